import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { z } from 'zod';
import { parseIssuerConfig } from '../../src/tokenissuer/config.ts';
import { OPENAPI_DOCUMENT, REQUEST_BODY_SCHEMAS } from '../../src/tokenissuer/openapi.ts';
import { IssueRequestSchema } from '../../src/tokenissuer/request.ts';
import { buildIssuerApp } from '../../src/tokenissuer/server.ts';
import { clusterInfoKubeconfig, FakeReviews, FakeTokenKube, fakeKeyRing } from './support/issuer-fakes.ts';

/** `METHOD /path` for every route, read from fastify's route tree (`{id}` style params). */
function registeredRoutes(tree: string): string[] {
  const routes: string[] = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const match = /^([│ ]*)[├└]── (\S+) \(([A-Z, ]+)\)$/.exec(line);
    if (!match) continue;
    const depth = (match[1] ?? '').length / 4;
    stack.length = depth;
    const path = (stack[depth - 1] ?? '') + (match[2] ?? '');
    stack[depth] = path;
    for (const method of (match[3] ?? '').split(', ')) {
      routes.push(`${method} ${path.replace(/:([A-Za-z]+)/g, '{$1}')}`);
    }
  }
  return routes.sort();
}

describe('OpenAPI document', () => {
  it('is a JSON-serialisable OpenAPI 3.1 document', () => {
    const text = JSON.stringify(OPENAPI_DOCUMENT);
    const parsed = JSON.parse(text) as { openapi: string; paths: object; components: object };
    assert.equal(parsed.openapi, '3.1.0');
    assert.ok(Object.keys(parsed.paths).length > 0);
  });

  it('describes exactly the routes the server registers', async () => {
    const { app } = buildIssuerApp(
      parseIssuerConfig({
        tls: { certPem: 'x', keyPem: 'y' },
        logLevel: 'silent',
        // The attestation routes are served only where attested joins are set up.
        issuance: { attestation: { url: 'https://issuer.example.com' } },
      }),
      {
        kube: new FakeTokenKube(await clusterInfoKubeconfig()),
        reviews: new FakeReviews(),
        keyRing: fakeKeyRing(),
      },
    );
    await app.ready();
    const documented = Object.entries(OPENAPI_DOCUMENT.paths)
      .flatMap(([path, operations]) =>
        Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`),
      )
      .sort();
    assert.deepEqual(registeredRoutes(app.printRoutes({ commonPrefix: false })), documented);
    await app.close();
  });

  it('resolves every $ref and gives every operation an id and responses', () => {
    const schemas = OPENAPI_DOCUMENT.components.schemas as Record<string, unknown>;
    const refs = JSON.stringify(OPENAPI_DOCUMENT).match(/"#\/components\/schemas\/[A-Za-z]+"/g) ?? [];
    for (const ref of refs) {
      const name = ref.slice('"#/components/schemas/'.length, -1);
      assert.ok(schemas[name], `${ref} resolves`);
    }
    const ids = new Set<string>();
    for (const operations of Object.values(OPENAPI_DOCUMENT.paths)) {
      for (const operation of Object.values(operations) as { operationId: string; responses: object }[]) {
        assert.ok(operation.operationId && !ids.has(operation.operationId), 'unique operationId');
        ids.add(operation.operationId);
        assert.ok(Object.keys(operation.responses).length > 0);
      }
    }
  });

  it('gives each request body the conversion of the zod schema the server validates it with', () => {
    const schemas = OPENAPI_DOCUMENT.components.schemas as Record<string, unknown>;
    const withBody: string[] = [];
    for (const operations of Object.values(OPENAPI_DOCUMENT.paths)) {
      for (const operation of Object.values(operations) as {
        operationId: string;
        requestBody?: { content: { 'application/json': { schema: { $ref: string } } } };
      }[]) {
        if (!operation.requestBody) continue;
        withBody.push(operation.operationId);
        const validating = REQUEST_BODY_SCHEMAS[operation.operationId];
        assert.ok(validating, `${operation.operationId}: its validating schema is named`);
        const { $ref } = operation.requestBody.content['application/json'].schema;
        const { $schema: _dialect, ...converted } = z.toJSONSchema(validating, { io: 'input' });
        assert.deepEqual(
          schemas[$ref.slice('#/components/schemas/'.length)],
          converted,
          operation.operationId,
        );
      }
    }
    assert.deepEqual(withBody.sort(), Object.keys(REQUEST_BODY_SCHEMAS).sort());
    // The one the route validates with (validateIssueRequest) is the one named.
    assert.equal(REQUEST_BODY_SCHEMAS.issueToken, IssueRequestSchema);
  });

  it('documents what the hand-written IssueRequest said: formats, defaults, descriptions', () => {
    const body = OPENAPI_DOCUMENT.components.schemas.IssueRequest as { properties: Record<string, object> };
    assert.deepEqual(body.properties.expiresAt, {
      type: 'string',
      format: 'date-time',
      description: 'Absolute expiry. Not with ttl.',
    });
    assert.equal((body.properties.maxUses as { default?: number }).default, 1);
    for (const [name, property] of Object.entries(body.properties))
      assert.ok((property as { description?: string }).description, `${name} has a description`);
  });
});
