// The CRDs in deploy/crds and their mirror in src/flavor/resources.ts: the YAML is structural
// and bounded, the zod schemas agree with it (names, patterns, limits, enums, defaults, required
// fields), good and bad objects are told apart, and the pure helpers (parseDuration, tokenExpiry,
// matchesNodeName, parseTimestamp) behave. The good/bad object tables below were also run
// through k8s.io/apiextensions-apiserver v0.37.2's own validators (schema, list-type and CEL,
// with defaulting and transition rules); each case's expectation is what the API server said.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import {
  API_VERSION,
  CATEGORY,
  CONDITION_REASON_PATTERN,
  CONDITION_TYPE_PATTERN,
  DEFAULT_MAX_USES,
  DEFAULT_TTL_MS,
  DNS_SUBDOMAIN_PATTERN,
  FLAVOR_CLASS_KIND,
  FLAVOR_CLASS_PLURAL,
  FLAVOR_CLASS_SHORT_NAME,
  FLAVOR_CLASS_SINGULAR,
  FLAVORED_TOKEN_KIND,
  FLAVORED_TOKEN_PLURAL,
  FLAVORED_TOKEN_SHORT_NAME,
  FLAVORED_TOKEN_SINGULAR,
  FlavorClassSchema,
  FlavorClassSpecSchema,
  FlavorClassStatusSchema,
  FlavoredTokenSchema,
  FlavoredTokenSpecSchema,
  FlavoredTokenStatusSchema,
  GROUP,
  isQualifiedName,
  isReservedKubernetesKey,
  JOIN_HISTORY_EVENTS,
  LABEL_VALUE_PATTERN,
  LIMITS,
  MAX_DURATION_MS,
  matchesNodeName,
  NODE_NAME_CLAIM_KIND,
  NODE_NAME_CLAIM_PLURAL,
  NODE_NAME_CLAIM_SHORT_NAME,
  NODE_NAME_CLAIM_SINGULAR,
  NODE_NAME_GLOB_PATTERN,
  NodeNameClaimSchema,
  NodeNameClaimSpecSchema,
  NodeNameClaimStatusSchema,
  parseDuration,
  parseTimestamp,
  QUALIFIED_NAME_PATTERN,
  QUARANTINE_TAINT_KEY,
  RESERVED_DOMAIN_PATTERN,
  RevocationPolicySchema,
  TaintEffectSchema,
  TOKEN_ID_LABEL,
  TOKEN_ID_PATTERN,
  TOKEN_LABEL_KEY,
  TokenConditionType,
  TTL_PATTERN,
  tokenExpiry,
  VERSION,
} from '../../src/flavor/resources.ts';

// ---------------------------------------------------------------------------------------------
// Loading the CRDs

// biome-ignore lint/suspicious/noExplicitAny: walking untyped YAML
type Json = any;

function loadCrd(file: string): Json {
  const text = readFileSync(new URL(`../../deploy/crds/${file}`, import.meta.url), 'utf8');
  return parse(text);
}

const fcCrd = loadCrd('nodeflavor.io_flavorclasses.yaml');
const ftCrd = loadCrd('nodeflavor.io_flavoredtokens.yaml');
const fcVersion = fcCrd.spec.versions[0];
const ftVersion = ftCrd.spec.versions[0];
const fcSchema = fcVersion.schema.openAPIV3Schema;
const ftSchema = ftVersion.schema.openAPIV3Schema;

interface Node {
  path: string;
  schema: Json;
}

/** Every schema node below the root, with its path (metadata excluded: the server owns it). */
function walk(schema: Json, path = ''): Node[] {
  const out: Node[] = [];
  for (const [name, child] of Object.entries<Json>(schema.properties ?? {})) {
    if (path === '' && name === 'metadata') continue;
    out.push({ path: `${path}.${name}`, schema: child }, ...walk(child, `${path}.${name}`));
  }
  if (schema.items) out.push({ path: `${path}[]`, schema: schema.items }, ...walk(schema.items, `${path}[]`));
  if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
    const ap = schema.additionalProperties;
    out.push({ path: `${path}{}`, schema: ap }, ...walk(ap, `${path}{}`));
  }
  return out;
}

function allRules(schema: Json): { path: string; rule: string; message?: string }[] {
  const nodes: Node[] = [{ path: '', schema }, ...walk(schema)];
  return nodes.flatMap(({ path, schema: s }) =>
    (s['x-kubernetes-validations'] ?? []).map((v: Json) => ({ path, rule: v.rule, message: v.message })),
  );
}

function rulesAt(schema: Json): string[] {
  return (schema['x-kubernetes-validations'] ?? []).map((v: Json) => v.rule as string);
}

function shapeKeys(schema: { shape: Record<string, unknown> }): string[] {
  return Object.keys(schema.shape).sort();
}

function requiredKeys(schema: {
  shape: Record<string, { safeParse: (v: unknown) => { success: boolean } }>;
}) {
  // A key is required when leaving it out fails the parse on its own (defaulted keys are optional).
  return Object.entries(schema.shape)
    .filter(([, field]) => !field.safeParse(undefined).success)
    .map(([key]) => key)
    .sort();
}

// ---------------------------------------------------------------------------------------------
// The CRD files

describe('CRD manifests', () => {
  const cases = [
    {
      crd: fcCrd,
      kind: FLAVOR_CLASS_KIND,
      plural: FLAVOR_CLASS_PLURAL,
      singular: FLAVOR_CLASS_SINGULAR,
      short: FLAVOR_CLASS_SHORT_NAME,
      columns: ['Nodes', 'Ready', 'Description', 'Age'],
    },
    {
      crd: ftCrd,
      kind: FLAVORED_TOKEN_KIND,
      plural: FLAVORED_TOKEN_PLURAL,
      singular: FLAVORED_TOKEN_SINGULAR,
      short: FLAVORED_TOKEN_SHORT_NAME,
      columns: ['Flavor', 'TokenID', 'Uses', 'MaxUses', 'Expires', 'Ready', 'Revoked', 'Description', 'Age'],
    },
  ];

  for (const c of cases) {
    describe(c.kind, () => {
      const version = c.crd.spec.versions[0];
      const schema = version.schema.openAPIV3Schema;

      it('is a cluster-scoped v1 CRD of nodeflavor.io/v1alpha1 with the agreed names', () => {
        assert.equal(c.crd.apiVersion, 'apiextensions.k8s.io/v1');
        assert.equal(c.crd.kind, 'CustomResourceDefinition');
        assert.equal(c.crd.metadata.name, `${c.plural}.${GROUP}`);
        assert.equal(c.crd.spec.group, GROUP);
        assert.equal(c.crd.spec.scope, 'Cluster');
        assert.deepEqual(c.crd.spec.names, {
          kind: c.kind,
          listKind: `${c.kind}List`,
          plural: c.plural,
          singular: c.singular,
          shortNames: [c.short],
          categories: [CATEGORY],
        });
        assert.equal(c.crd.spec.versions.length, 1);
        assert.equal(version.name, VERSION);
        assert.equal(version.served, true);
        assert.equal(version.storage, true);
        assert.equal(API_VERSION, `${GROUP}/${VERSION}`);
      });

      it('has a status subresource and the printer columns', () => {
        assert.deepEqual(version.subresources, { status: {} });
        const columns = version.additionalPrinterColumns;
        assert.deepEqual(
          columns.map((col: Json) => col.name),
          c.columns,
        );
        for (const col of columns) {
          assert.ok(['string', 'integer', 'number', 'boolean', 'date'].includes(col.type), col.name);
          assert.match(col.jsonPath, /^\./, col.name);
        }
        const age = columns.at(-1);
        assert.deepEqual(age, { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' });
      });

      it('is structural: every property has a type and a description', () => {
        assert.equal(schema.type, 'object');
        assert.ok(schema.description);
        assert.deepEqual(schema.properties.metadata, { type: 'object' });
        for (const { path, schema: s } of walk(schema)) {
          assert.ok(
            ['object', 'array', 'string', 'integer', 'number', 'boolean'].includes(s.type),
            `${path}: type`,
          );
          assert.ok(typeof s.description === 'string' && s.description.length > 10, `${path}: description`);
          assert.equal(
            s['x-kubernetes-preserve-unknown-fields'],
            undefined,
            `${path}: preserves unknown fields`,
          );
          for (const forbidden of ['anyOf', 'oneOf', 'allOf', 'not', '$ref']) {
            assert.equal(s[forbidden], undefined, `${path}: ${forbidden}`);
          }
          if (s.type === 'object') {
            assert.ok(s.properties || s.additionalProperties, `${path}: object without properties`);
            assert.ok(
              !(s.properties && s.additionalProperties),
              `${path}: both properties and additionalProperties`,
            );
          }
          for (const req of s.required ?? [])
            assert.ok(s.properties?.[req], `${path}: required ${req} undeclared`);
        }
      });

      it('bounds every string, list and map (keeps CEL under the cost budget)', () => {
        for (const { path, schema: s } of walk(schema)) {
          if (path === '.apiVersion' || path === '.kind') continue;
          if (s.type === 'string' && !s.enum && s.format !== 'date-time') {
            assert.equal(typeof s.maxLength, 'number', `${path}: maxLength`);
          }
          if (s.type === 'array') assert.equal(typeof s.maxItems, 'number', `${path}: maxItems`);
          if (s.type === 'object' && s.additionalProperties) {
            assert.equal(typeof s.maxProperties, 'number', `${path}: maxProperties`);
          }
          if (s.type === 'integer') assert.ok(['int32', 'int64'].includes(s.format), `${path}: format`);
        }
      });

      it('gives every CEL rule a message, and list-maps required keys', () => {
        for (const { path, rule, message } of allRules(schema)) {
          assert.ok(rule.trim().length > 0, path);
          assert.ok(message && message.length > 10, `${path}: ${rule} has no message`);
          assert.doesNotMatch(rule, /\\\./, `${path}: write [.] rather than an escaped dot in CEL strings`);
        }
        for (const { path, schema: s } of walk(schema)) {
          if (s['x-kubernetes-list-type'] !== 'map') continue;
          for (const key of s['x-kubernetes-list-map-keys']) {
            assert.ok(s.items.required.includes(key), `${path}: map key ${key} must be required`);
          }
        }
      });

      it('uses the standard metav1.Condition shape for status.conditions', () => {
        const conditions = schema.properties.status.properties.conditions;
        assert.equal(conditions['x-kubernetes-list-type'], 'map');
        assert.deepEqual(conditions['x-kubernetes-list-map-keys'], ['type']);
        assert.equal(conditions.maxItems, LIMITS.conditions);
        const item = conditions.items;
        assert.deepEqual([...item.required].sort(), [
          'lastTransitionTime',
          'message',
          'reason',
          'status',
          'type',
        ]);
        assert.equal(item.properties.type.pattern, CONDITION_TYPE_PATTERN);
        assert.equal(item.properties.reason.pattern, CONDITION_REASON_PATTERN);
        assert.deepEqual(item.properties.status.enum, ['True', 'False', 'Unknown']);
        assert.equal(item.properties.lastTransitionTime.format, 'date-time');
        assert.equal(schema.properties.status.properties.observedGeneration.format, 'int64');
      });
    });
  }
});

describe('CRD ↔ zod agreement', () => {
  const fcSpec = fcSchema.properties.spec;
  const ftSpec = ftSchema.properties.spec;
  const ftStatus = ftSchema.properties.status;

  it('declares the same fields', () => {
    assert.deepEqual(shapeKeys(FlavorClassSpecSchema), Object.keys(fcSpec.properties).sort());
    assert.deepEqual(
      shapeKeys(FlavorClassStatusSchema),
      Object.keys(fcSchema.properties.status.properties).sort(),
    );
    assert.deepEqual(shapeKeys(FlavoredTokenSpecSchema), Object.keys(ftSpec.properties).sort());
    assert.deepEqual(shapeKeys(FlavoredTokenStatusSchema), Object.keys(ftStatus.properties).sort());
    assert.deepEqual(shapeKeys(FlavorClassSchema), ['apiVersion', 'kind', 'metadata', 'spec', 'status']);
    assert.deepEqual(shapeKeys(FlavoredTokenSchema), ['apiVersion', 'kind', 'metadata', 'spec', 'status']);
    assert.deepEqual(fcSchema.required, ['spec']);
    assert.deepEqual(ftSchema.required, ['spec']);
  });

  it('requires the same fields (defaulted ones count as optional)', () => {
    assert.deepEqual(requiredKeys(FlavoredTokenSpecSchema), ftSpec.required);
    assert.deepEqual(requiredKeys(FlavorClassSpecSchema), []);
    assert.equal(fcSpec.required, undefined);
    assert.deepEqual(requiredKeys(FlavorClassStatusSchema), []);
    assert.deepEqual(requiredKeys(FlavoredTokenStatusSchema), []);
  });

  it('uses the same enums and defaults', () => {
    assert.deepEqual(fcSpec.properties.taints.items.properties.effect.enum, TaintEffectSchema.options);
    assert.deepEqual(ftSpec.properties.revocationPolicy.enum, RevocationPolicySchema.options);
    assert.equal(ftSpec.properties.revocationPolicy.default, 'Keep');
    assert.equal(ftSpec.properties.maxUses.default, DEFAULT_MAX_USES);
    assert.equal(ftSpec.properties.revoked.default, false);
    assert.deepEqual(FlavoredTokenSpecSchema.parse({ flavorClassName: 'sweet' }), {
      flavorClassName: 'sweet',
      maxUses: DEFAULT_MAX_USES,
      revocationPolicy: 'Keep',
      revoked: false,
    });
  });

  it('uses the same bounds', () => {
    assert.equal(fcSpec.properties.labels.maxProperties, LIMITS.labels);
    assert.equal(fcSpec.properties.labels.additionalProperties.maxLength, 63);
    assert.equal(fcSpec.properties.annotations.maxProperties, LIMITS.annotations);
    assert.equal(fcSpec.properties.annotations.additionalProperties.maxLength, LIMITS.annotationValueLength);
    assert.equal(fcSpec.properties.taints.maxItems, LIMITS.taints);
    assert.equal(fcSpec.properties.description.maxLength, LIMITS.descriptionLength);
    assert.equal(ftSpec.properties.description.maxLength, LIMITS.descriptionLength);
    assert.equal(ftSpec.properties.maxUses.minimum, 0);
    assert.equal(ftSpec.properties.maxUses.maximum, LIMITS.maxUses);
    assert.equal(ftSpec.properties.ttl.maxLength, LIMITS.ttlLength);
    assert.equal(ftSpec.properties.nodeName.maxLength, LIMITS.nodeNameLength);
    assert.equal(ftSpec.properties.nodeNamePattern.maxLength, LIMITS.nodeNameLength);
    assert.equal(ftStatus.properties.bindings.maxItems, LIMITS.bindings);
    assert.equal(ftStatus.properties.bindings.items.properties.nodeUID.maxLength, LIMITS.nodeUIDLength);
  });

  it('uses the exported patterns verbatim', () => {
    const labelRules = rulesAt(fcSpec.properties.labels).join('\n');
    assert.ok(labelRules.includes(`'${QUALIFIED_NAME_PATTERN}'`));
    assert.ok(labelRules.includes(`'${RESERVED_DOMAIN_PATTERN}'`));
    assert.ok(labelRules.includes(`'${TOKEN_LABEL_KEY}'`));
    assert.ok(
      rulesAt(fcSpec.properties.labels.additionalProperties)[0]?.includes(`'${LABEL_VALUE_PATTERN}'`),
    );
    const annotationRules = rulesAt(fcSpec.properties.annotations).join('\n');
    assert.ok(annotationRules.includes(`'${QUALIFIED_NAME_PATTERN}'`));
    assert.ok(annotationRules.includes(`'${RESERVED_DOMAIN_PATTERN}'`));
    const taint = fcSpec.properties.taints.items.properties;
    const taintKeyRules = rulesAt(taint.key).join('\n');
    assert.ok(taintKeyRules.includes(`'${QUALIFIED_NAME_PATTERN}'`));
    assert.ok(taintKeyRules.includes(`'${RESERVED_DOMAIN_PATTERN}'`));
    assert.ok(taintKeyRules.includes(`'${QUARANTINE_TAINT_KEY}'`));
    assert.ok(rulesAt(taint.value)[0]?.includes(`'${LABEL_VALUE_PATTERN}'`));
    assert.deepEqual(fcSpec.properties.taints['x-kubernetes-list-map-keys'], ['key', 'effect']);
    assert.equal(ftSpec.properties.flavorClassName.pattern, DNS_SUBDOMAIN_PATTERN);
    assert.equal(ftSpec.properties.nodeName.pattern, DNS_SUBDOMAIN_PATTERN);
    assert.equal(ftSpec.properties.nodeNamePattern.pattern, NODE_NAME_GLOB_PATTERN);
    assert.equal(ftSpec.properties.ttl.pattern, TTL_PATTERN);
    assert.ok(rulesAt(ftSpec.properties.ttl)[0]?.includes(`'${TTL_PATTERN}'`));
    assert.equal(ftStatus.properties.tokenID.pattern, TOKEN_ID_PATTERN);
    assert.deepEqual(ftStatus.properties.bindings['x-kubernetes-list-map-keys'], ['nodeName']);
  });

  it('has the at-most-one and immutability rules', () => {
    const spec = rulesAt(ftSpec);
    assert.ok(spec.includes('!has(self.ttl) || !has(self.expiresAt)'));
    assert.ok(spec.includes('!has(self.nodeName) || !has(self.nodeNamePattern)'));
    for (const field of ['ttl', 'expiresAt', 'nodeName', 'nodeNamePattern']) {
      const rule = spec.find((r) => r.includes(`oldSelf.${field}`));
      assert.ok(rule, `no transition rule for ${field}`);
      assert.ok(
        rule.includes(`has(self.${field}) == has(oldSelf.${field})`),
        `${field}: adding/removing allowed`,
      );
    }
    assert.deepEqual(rulesAt(ftSpec.properties.flavorClassName), ['self == oldSelf']);
    assert.deepEqual(rulesAt(ftSpec.properties.maxUses), ['self == oldSelf']);
    assert.deepEqual(rulesAt(ftSpec.properties.revoked), ['!oldSelf || self']);
    for (const mutable of ['description', 'revocationPolicy']) {
      assert.deepEqual(rulesAt(ftSpec.properties[mutable]), []);
      assert.ok(!spec.some((r) => r.includes(`oldSelf.${mutable}`)));
    }
  });

  it('exposes the Ready condition and the token-ID label', () => {
    const ready = ftVersion.additionalPrinterColumns.find((c: Json) => c.name === 'Ready');
    assert.equal(ready.jsonPath, '.status.conditions[?(@.type=="Ready")].status');
    assert.deepEqual(Object.values(TokenConditionType), ['Ready', 'Expired', 'Consumed', 'Revoked']);
    for (const type of Object.values(TokenConditionType))
      assert.ok(ftStatus.properties.conditions.description.includes(type));
    assert.ok(ftSchema.description.includes(`${TOKEN_ID_LABEL}=<token ID>`));
    assert.deepEqual(ftVersion.selectableFields, [{ jsonPath: '.spec.flavorClassName' }]);
  });
});

// ---------------------------------------------------------------------------------------------
// Objects: good and bad

const longPrefix = (n: number) => `${'a'.repeat(61)}.`.repeat(4).slice(0, 248) + 'b'.repeat(n - 248);

describe('FlavorClass spec validation', () => {
  const good: [string, unknown][] = [
    ['an empty spec', {}],
    [
      'a full spec',
      {
        description: 'trusted',
        labels: { 'example.com/tier': 'sweet', tier: '', 'a.b-c.d/x_y.z': 'A-1_b.c' },
        annotations: { 'example.com/note': 'free text: anything / goes!' },
        taints: [
          { key: 'example.com/tier', value: 'sweet', effect: 'NoSchedule' },
          { key: 'example.com/tier', effect: 'NoExecute' },
        ],
      },
    ],
    ['a 63-character name', { labels: { ['a'.repeat(63)]: 'v' } }],
    ['a 253-character prefix', { labels: { [`${longPrefix(253)}/x`]: 'v' } }],
    [
      'domains that only look like kubernetes.io',
      { labels: { 'notkubernetes.io/x': '', 'kubernetes.io.example.com/x': '' } },
    ],
    ['another nodeflavor.io label', { labels: { 'nodeflavor.io/flavor': 'x' } }],
    ['a 63-character value', { labels: { a: 'a'.repeat(63) } }],
    ['64 labels', { labels: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`k${i}`, 'v'])) }],
    ['the token key as an annotation', { annotations: { 'nodeflavor.io/token': 'v' } }],
    ['a taint with an empty value', { taints: [{ key: 'a', value: '', effect: 'PreferNoSchedule' }] }],
  ];
  const bad: [string, unknown][] = [
    ['a 64-character name', { labels: { ['a'.repeat(64)]: 'v' } }],
    ['a 254-character prefix', { labels: { [`${longPrefix(254)}/x`]: 'v' } }],
    ['an uppercase prefix', { labels: { 'Example.com/x': 'v' } }],
    ['an empty prefix', { labels: { '/x': 'v' } }],
    ['two slashes', { labels: { 'a.com/b/c': 'v' } }],
    ['a key ending in a dash', { labels: { 'abc-': 'v' } }],
    ['an empty key', { labels: { '': 'v' } }],
    ['kubernetes.io', { labels: { 'kubernetes.io/hostname': 'v' } }],
    ['node-role.kubernetes.io', { labels: { 'node-role.kubernetes.io/worker': '' } }],
    ['node-restriction.kubernetes.io', { labels: { 'node-restriction.kubernetes.io/x': '' } }],
    ['k8s.io', { labels: { 'k8s.io/x': '' } }],
    ['a k8s.io subdomain', { labels: { 'a.b.k8s.io/x': '' } }],
    ['the flavor token label', { labels: { [TOKEN_LABEL_KEY]: 'x' } }],
    ['a value starting with a dash', { labels: { a: '-x' } }],
    ['a 64-character value', { labels: { a: 'a'.repeat(64) } }],
    ['a value with a space', { labels: { a: 'a b' } }],
    ['65 labels', { labels: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v'])) }],
    ['a k8s.io annotation', { annotations: { 'k8s.io/x': 'v' } }],
    ['an annotation key with a space', { annotations: { 'x y': 'v' } }],
    ['a 4097-character annotation', { annotations: { a: 'x'.repeat(4097) } }],
    ['the quarantine taint', { taints: [{ key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' }] }],
    [
      'a kubernetes.io taint',
      { taints: [{ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }] },
    ],
    ['an unknown effect', { taints: [{ key: 'a', effect: 'Nope' }] }],
    ['a taint without effect', { taints: [{ key: 'a' }] }],
    [
      'a duplicate (key, effect)',
      {
        taints: [
          { key: 'a', effect: 'NoSchedule' },
          { key: 'a', value: 'x', effect: 'NoSchedule' },
        ],
      },
    ],
    ['a bad taint value', { taints: [{ key: 'a', value: 'x/y', effect: 'NoSchedule' }] }],
    ['33 taints', { taints: Array.from({ length: 33 }, (_, i) => ({ key: `k${i}`, effect: 'NoSchedule' })) }],
    ['a 513-character description', { description: 'd'.repeat(513) }],
  ];
  for (const [name, spec] of good) {
    it(`accepts ${name}`, () => {
      const result = FlavorClassSpecSchema.safeParse(spec);
      assert.ok(result.success, JSON.stringify(result.error?.issues));
    });
  }
  for (const [name, spec] of bad) {
    it(`rejects ${name}`, () => assert.equal(FlavorClassSpecSchema.safeParse(spec).success, false));
  }

  it('parses a whole object with status, keeping unknown metadata', () => {
    const obj = FlavorClassSchema.parse({
      apiVersion: API_VERSION,
      kind: FLAVOR_CLASS_KIND,
      metadata: { name: 'sweet', uid: 'u-1', managedFields: [{ manager: 'x' }] },
      spec: { labels: { 'example.com/tier': 'sweet' } },
      status: {
        nodes: 3,
        observedGeneration: 1,
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'Accepted',
            message: '',
            lastTransitionTime: '2025-01-01T00:00:00Z',
          },
        ],
      },
    });
    assert.equal(obj.metadata.name, 'sweet');
    assert.deepEqual(obj.metadata['managedFields'], [{ manager: 'x' }]);
    assert.equal(obj.status?.nodes, 3);
    assert.equal(FlavorClassStatusSchema.safeParse({ nodes: -1 }).success, false);
    assert.equal(
      FlavorClassSchema.safeParse({
        apiVersion: API_VERSION,
        kind: FLAVOR_CLASS_KIND,
        metadata: { name: 'x' },
      }).success,
      false,
    );
    assert.equal(
      FlavorClassSchema.safeParse({ apiVersion: 'v1', kind: FLAVOR_CLASS_KIND, metadata: {}, spec: {} })
        .success,
      false,
    );
  });
});

describe('FlavoredToken spec validation', () => {
  const base = { flavorClassName: 'sweet', ttl: '1h' };
  const good: [string, unknown][] = [
    ['the minimum', { flavorClassName: 'sweet' }],
    ['a ttl', base],
    ['a ttl of 1h30m', { flavorClassName: 'sweet', ttl: '1h30m' }],
    ['a ttl of 1.5h', { flavorClassName: 'sweet', ttl: '1.5h' }],
    ['an expiresAt', { flavorClassName: 'sweet', expiresAt: '2030-01-01T00:00:00Z' }],
    [
      'an expiresAt with an offset and fraction',
      { flavorClassName: 'sweet', expiresAt: '2030-01-01T00:00:00.5+02:00' },
    ],
    ['maxUses 0 (unlimited)', { ...base, maxUses: 0 }],
    ['maxUses 1000', { ...base, maxUses: 1000 }],
    ['a nodeName', { ...base, nodeName: 'node-1.example.com' }],
    ['a nodeNamePattern', { ...base, nodeNamePattern: 'pool-a-*' }],
    ['revocationPolicy StripNodes', { ...base, revocationPolicy: 'StripNodes' }],
    ['revoked', { ...base, revoked: true, description: 'lost' }],
  ];
  const bad: [string, unknown][] = [
    ['a ttl of 0s', { flavorClassName: 'sweet', ttl: '0s' }],
    ['a ttl of 0h0m', { flavorClassName: 'sweet', ttl: '0h0m' }],
    ['a ttl in days', { flavorClassName: 'sweet', ttl: '1d' }],
    ['a ttl in milliseconds', { flavorClassName: 'sweet', ttl: '100ms' }],
    ['a ttl beyond Go durations', { flavorClassName: 'sweet', ttl: '99999999999h' }],
    ['both ttl and expiresAt', { ...base, expiresAt: '2030-01-01T00:00:00Z' }],
    ['a bad expiresAt', { flavorClassName: 'sweet', expiresAt: 'tomorrow' }],
    ['an expiresAt without a zone', { flavorClassName: 'sweet', expiresAt: '2030-01-01T00:00:00' }],
    ['no flavorClassName', { ttl: '1h' }],
    ['an uppercase flavorClassName', { flavorClassName: 'Sweet' }],
    ['maxUses -1', { ...base, maxUses: -1 }],
    ['maxUses 1001', { ...base, maxUses: 1001 }],
    ['maxUses 1.5', { ...base, maxUses: 1.5 }],
    ['a bad nodeName', { ...base, nodeName: 'Node_1' }],
    ['a nodeNamePattern with ?', { ...base, nodeNamePattern: 'pool-a-?' }],
    ['both nodeName and nodeNamePattern', { ...base, nodeName: 'a', nodeNamePattern: 'a*' }],
    ['an unknown revocationPolicy', { ...base, revocationPolicy: 'Strip' }],
  ];
  for (const [name, spec] of good) {
    it(`accepts ${name}`, () => {
      const result = FlavoredTokenSpecSchema.safeParse(spec);
      assert.ok(result.success, JSON.stringify(result.error?.issues));
    });
  }
  for (const [name, spec] of bad) {
    it(`rejects ${name}`, () => assert.equal(FlavoredTokenSpecSchema.safeParse(spec).success, false));
  }

  it('parses a whole object with status', () => {
    const token = FlavoredTokenSchema.parse({
      apiVersion: API_VERSION,
      kind: FLAVORED_TOKEN_KIND,
      metadata: { name: 'tok-abcdef', labels: { [TOKEN_ID_LABEL]: 'abcdef' } },
      spec: base,
      status: {
        tokenID: 'abcdef',
        expiresAt: '2030-01-01T00:00:00Z',
        uses: 1,
        observedGeneration: 1,
        bindings: [
          {
            nodeName: 'n1',
            csrName: 'csr-x',
            boundAt: '2025-01-01T00:00:00Z',
            nodeUID: 'u',
            verifiedAt: '2025-01-01T00:00:01Z',
          },
        ],
        conditions: Object.values(TokenConditionType).map((type) => ({
          type,
          status: 'False',
          reason: 'Init',
          message: '',
          lastTransitionTime: '2025-01-01T00:00:00Z',
        })),
      },
    });
    assert.equal(token.spec.maxUses, 1);
    assert.equal(token.status?.bindings?.[0]?.nodeName, 'n1');
  });

  const binding = (nodeName: string) => ({ nodeName, csrName: 'c', boundAt: '2025-01-01T00:00:00Z' });
  const condition = (status: string) => ({
    type: 'Ready',
    status,
    reason: 'R',
    message: '',
    lastTransitionTime: '2025-01-01T00:00:00Z',
  });
  const badStatus: [string, unknown][] = [
    ['an uppercase tokenID', { tokenID: 'ABCDEF' }],
    ['a 7-character tokenID', { tokenID: 'abcdefg' }],
    ['negative uses', { uses: -1 }],
    ['a duplicate binding', { bindings: [binding('n1'), binding('n1')] }],
    ['1001 bindings', { bindings: Array.from({ length: 1001 }, (_, i) => binding(`n${i}`)) }],
    ['a binding without csrName', { bindings: [{ nodeName: 'n', boundAt: '2025-01-01T00:00:00Z' }] }],
    ['a duplicate condition', { conditions: [condition('True'), condition('False')] }],
    ['a lowercase condition status', { conditions: [condition('true')] }],
    ['a condition reason with a space', { conditions: [{ ...condition('True'), reason: 'Not ok' }] }],
  ];
  for (const [name, status] of badStatus) {
    it(`rejects a status with ${name}`, () =>
      assert.equal(FlavoredTokenStatusSchema.safeParse(status).success, false));
  }
  it('never declares a field for a secret', () => {
    const names = [...walk(ftSchema)].map((n) => n.path.toLowerCase());
    for (const path of names) assert.doesNotMatch(path, /secret|hmac|flavortoken|password|\.token$/);
  });
});

// ---------------------------------------------------------------------------------------------
// Helpers

describe('key and value predicates', () => {
  it('isQualifiedName', () => {
    for (const ok of ['a', 'A', 'a.b_c-d', 'example.com/x', 'a/B', `${longPrefix(253)}/${'n'.repeat(63)}`]) {
      assert.equal(isQualifiedName(ok), true, ok);
    }
    for (const no of [
      '',
      '-a',
      'a-',
      '/a',
      'a/',
      'A.com/x',
      'a..b/x',
      'a/b/c',
      `${longPrefix(254)}/x`,
      'n'.repeat(64),
    ]) {
      assert.equal(isQualifiedName(no), false, no);
    }
  });
  it('isReservedKubernetesKey', () => {
    for (const yes of ['kubernetes.io/x', 'k8s.io/x', 'node-role.kubernetes.io/w', 'a.b.k8s.io/x']) {
      assert.equal(isReservedKubernetesKey(yes), true, yes);
    }
    for (const no of [
      'kubernetes',
      'kubernetes.io',
      'x-kubernetes.io/a',
      'k8s.io.example.com/a',
      'example.com/k8s.io',
    ]) {
      assert.equal(isReservedKubernetesKey(no), false, no);
    }
  });
});

describe('parseDuration', () => {
  const table: [string, number][] = [
    ['1h', 3_600_000],
    ['30m', 1_800_000],
    ['45s', 45_000],
    ['24h', DEFAULT_TTL_MS],
    ['1h30m', 5_400_000],
    ['1h30m15s', 5_415_000],
    ['90m', 5_400_000],
    ['1.5h', 5_400_000],
    ['0.001s', 1],
    ['0s', 0],
    ['1m1m', 120_000],
    ['2562047h', 2_562_047 * 3_600_000],
    ['2562047h47m16s', MAX_DURATION_MS - 854],
  ];
  for (const [text, ms] of table) it(`${text} = ${ms} ms`, () => assert.equal(parseDuration(text), ms));

  const errors: [string, RegExp][] = [
    ['', /invalid duration ""/],
    ['1d', /unit "d" is not supported \(use h, m or s/],
    ['1w', /unit "w" is not supported/],
    ['100ms', /unit "ms" is not supported/],
    ['5us', /unit "us" is not supported/],
    ['1H', /unit "H" is not supported/],
    ['90', /missing unit after 90/],
    ['-1h', /expected a number/],
    ['+1h', /expected a number/],
    ['h', /expected a number/],
    ['.5h', /expected a number/],
    ['1.h', /missing unit/],
    ['1h 30m', /unit "h " is not supported/],
    ['2562048h', /longer than the maximum/],
  ];
  for (const [text, message] of errors) {
    it(`rejects ${JSON.stringify(text)}`, () => assert.throws(() => parseDuration(text), message));
  }

  it('agrees with TTL_PATTERN on what is well-formed', () => {
    const re = new RegExp(TTL_PATTERN);
    for (const text of [...table.map(([t]) => t), ...errors.map(([t]) => t)]) {
      let parses = true;
      try {
        parseDuration(text);
      } catch {
        parses = false;
      }
      if (text === '2562048h') continue; // well-formed, but beyond Go's range
      assert.equal(parses, re.test(text), text);
    }
  });
});

describe('parseTimestamp', () => {
  const good: [string, string][] = [
    ['2030-01-01T00:00:00Z', '2030-01-01T00:00:00.000Z'],
    ['2030-01-01t00:00:00z', '2030-01-01T00:00:00.000Z'],
    ['2030-01-01T00:00:00.5+02:00', '2029-12-31T22:00:00.500Z'],
    ['2030-01-01T00:00:00.123456789-01:30', '2030-01-01T01:30:00.123Z'],
    ['2028-02-29T23:59:59Z', '2028-02-29T23:59:59.000Z'],
    ['2030-01-01T00:00:00+24:00', '2029-12-31T00:00:00.000Z'],
  ];
  for (const [text, iso] of good)
    it(`parses ${text}`, () => assert.equal(parseTimestamp(text)?.toISOString(), iso));
  for (const text of [
    '2030-01-01T00:00:00',
    '2030-01-01T00:00Z',
    '2030-01-01 00:00:00Z',
    '2030-01-01T00:00:00+0200',
    '2030-01-01',
    '2030-02-29T00:00:00Z',
    '2030-13-01T00:00:00Z',
    '2030-01-01T24:00:00Z',
    '2030-01-01T00:00:60Z',
    '2030-01-01T00:00:00+25:00',
  ]) {
    it(`rejects ${text}`, () => assert.equal(parseTimestamp(text), undefined));
  }
});

describe('tokenExpiry', () => {
  const now = new Date('2025-06-01T12:00:00Z');
  it('adds the ttl to now', () => {
    assert.equal(tokenExpiry({ ttl: '1h30m' }, now).toISOString(), '2025-06-01T13:30:00.000Z');
  });
  it('defaults to 24h', () => {
    assert.equal(tokenExpiry({}, now).toISOString(), '2025-06-02T12:00:00.000Z');
  });
  it('uses expiresAt as is, whatever now is', () => {
    assert.equal(
      tokenExpiry({ expiresAt: '2030-01-01T02:00:00+02:00' }, now).toISOString(),
      '2030-01-01T00:00:00.000Z',
    );
    assert.equal(
      tokenExpiry({ expiresAt: '2020-01-01T00:00:00Z' }, now).toISOString(),
      '2020-01-01T00:00:00.000Z',
    );
  });
  it('is stable for the same creation time', () => {
    assert.equal(tokenExpiry({ ttl: '24h' }, now).getTime(), tokenExpiry({}, new Date(now)).getTime());
  });
  it('throws on bad input', () => {
    assert.throws(() => tokenExpiry({ ttl: '1h', expiresAt: '2030-01-01T00:00:00Z' }, now), /at most one/);
    assert.throws(() => tokenExpiry({ ttl: '1d' }, now), /unit "d"/);
    assert.throws(() => tokenExpiry({ expiresAt: 'soon' }, now), /RFC 3339/);
    assert.throws(() => tokenExpiry({ ttl: '1h' }, new Date(Number.NaN)), /invalid date/);
  });
});

describe('matchesNodeName', () => {
  const table: [string, { nodeName?: string; nodeNamePattern?: string }, string, boolean][] = [
    ['no constraint', {}, 'anything', true],
    ['exact name', { nodeName: 'node-1' }, 'node-1', true],
    ['exact name, other node', { nodeName: 'node-1' }, 'node-10', false],
    ['exact name, prefix only', { nodeName: 'node-10' }, 'node-1', false],
    ['glob suffix', { nodeNamePattern: 'pool-a-*' }, 'pool-a-7f3k', true],
    ['glob suffix, empty run', { nodeNamePattern: 'pool-a-*' }, 'pool-a-', true],
    ['glob suffix, other pool', { nodeNamePattern: 'pool-a-*' }, 'pool-b-1', false],
    ['glob is anchored at the start', { nodeNamePattern: 'pool-a-*' }, 'x-pool-a-1', false],
    ['glob is anchored at the end', { nodeNamePattern: '*.zone-1' }, 'n1.zone-1.extra', false],
    ['glob prefix', { nodeNamePattern: '*.zone-1' }, 'n1.zone-1', true],
    ['glob in the middle', { nodeNamePattern: 'pool-*-gpu' }, 'pool-a.b-gpu', true],
    ['glob in the middle, wrong end', { nodeNamePattern: 'pool-*-gpu' }, 'pool-a-cpu', false],
    ['two globs', { nodeNamePattern: '*-a-*' }, 'x-a-y-a-z', true],
    ['no glob is exact', { nodeNamePattern: 'node-1' }, 'node-1', true],
    ['no glob is exact, other node', { nodeNamePattern: 'node-1' }, 'node-12', false],
    ['dot is literal', { nodeNamePattern: 'a.b' }, 'axb', false],
    ['lone star', { nodeNamePattern: '*' }, 'any.node-1', true],
    ['star does not match /', { nodeNamePattern: 'pool-*' }, 'pool-a/b', false],
    ['star does not match uppercase', { nodeNamePattern: 'pool-*' }, 'pool-A', false],
    ['star does not match _', { nodeNamePattern: 'pool-*' }, 'pool-a_b', false],
    ['star does not match a newline', { nodeNamePattern: 'pool-*' }, 'pool-a\nb', false],
    ['a malformed pattern fails closed', { nodeNamePattern: 'pool-?' }, 'pool-a', false],
    ['a regex-looking pattern fails closed', { nodeNamePattern: 'pool-.+' }, 'pool-ab', false],
    ['an empty pattern fails closed', { nodeNamePattern: '' }, '', false],
    ['both set: both must match', { nodeName: 'pool-a-1', nodeNamePattern: 'pool-b-*' }, 'pool-a-1', false],
  ];
  for (const [name, spec, nodeName, expected] of table) {
    it(`${name}: ${JSON.stringify(nodeName)} → ${expected}`, () =>
      assert.equal(matchesNodeName(spec, nodeName), expected));
  }
  it('stays fast on many stars (no backtracking blow-up)', () => {
    const pattern = '*a'.repeat(100);
    const started = process.hrtime.bigint();
    assert.equal(matchesNodeName({ nodeNamePattern: pattern }, 'a'.repeat(99) + 'b'), false);
    assert.ok(process.hrtime.bigint() - started < 1_000_000_000n);
  });
});

describe('NodeNameClaim (ADR 0011)', () => {
  const crd = loadCrd('nodeflavor.io_nodenameclaims.yaml');
  const version = crd.spec.versions[0];
  const schema = version.schema.openAPIV3Schema;
  const spec = schema.properties.spec;

  it('is a cluster-scoped CRD of nodeflavor.io/v1alpha1 with the agreed names, no status subresource', () => {
    assert.equal(crd.metadata.name, `${NODE_NAME_CLAIM_PLURAL}.${GROUP}`);
    assert.equal(crd.spec.scope, 'Cluster');
    assert.deepEqual(crd.spec.names, {
      kind: NODE_NAME_CLAIM_KIND,
      listKind: `${NODE_NAME_CLAIM_KIND}List`,
      plural: NODE_NAME_CLAIM_PLURAL,
      singular: NODE_NAME_CLAIM_SINGULAR,
      shortNames: [NODE_NAME_CLAIM_SHORT_NAME],
      categories: [CATEGORY],
    });
    assert.equal(version.name, VERSION);
    assert.equal(version.subresources, undefined, 'written whole by the controller alone');
  });

  it('is structural and bounded, and agrees with the zod schema', () => {
    for (const { path, schema: s } of walk(schema)) {
      assert.ok(typeof s.description === 'string' && s.description.length > 10, `${path}: description`);
      if (s.type === 'string' && s.format !== 'date-time' && path !== '.apiVersion' && path !== '.kind')
        assert.equal(typeof s.maxLength, 'number', `${path}: maxLength`);
    }
    assert.deepEqual(shapeKeys(NodeNameClaimSpecSchema), Object.keys(spec.properties).sort());
    const holder = spec.properties.holder;
    assert.deepEqual([...holder.required].sort(), Object.keys(holder.properties).sort());
    assert.equal(holder.properties.tokenID.pattern, TOKEN_ID_PATTERN);
    const status = schema.properties.status;
    assert.deepEqual(shapeKeys(NodeNameClaimStatusSchema), Object.keys(status.properties).sort());
    assert.equal(status.properties.history.maxItems, LIMITS.joinHistory);
    assert.deepEqual(status.properties.history.items.properties.event.enum, [...JOIN_HISTORY_EVENTS]);
    assert.equal(status.properties.join.properties.tokenID.pattern, TOKEN_ID_PATTERN);
  });

  it('tells held, released and malformed claims apart', () => {
    const holder = {
      tokenName: 'ft-abc123',
      tokenUID: 'u-1',
      tokenID: 'abc123',
      csrName: 'csr-1',
      claimedAt: '2026-12-02T00:00:00Z',
    };
    const claim = (spec: unknown) => ({
      apiVersion: API_VERSION,
      kind: NODE_NAME_CLAIM_KIND,
      metadata: { name: 'n1' },
      spec,
    });
    assert.ok(NodeNameClaimSchema.safeParse(claim({ holder })).success);
    assert.ok(NodeNameClaimSchema.safeParse(claim({ releasedAt: '2026-12-02T00:00:00Z' })).success);
    const withJoin = (status: unknown) => ({ ...claim({ holder }), status });
    const join = { tokenName: 'ft-abc123', tokenID: 'abc123', csrName: 'csr-1' };
    assert.ok(
      NodeNameClaimSchema.safeParse(
        withJoin({
          join: { ...join, nodeUID: 'u', verifiedAt: '2026-12-02T00:00:00Z' },
          history: [{ at: '2026-12-02T00:00:00Z', event: 'Claimed', tokenID: 'abc123', csrName: 'csr-1' }],
        }),
      ).success,
    );
    assert.ok(
      !NodeNameClaimSchema.safeParse(withJoin({ history: [{ at: 'now', event: 'Claimed' }] })).success,
    );
    assert.ok(
      !NodeNameClaimSchema.safeParse(
        withJoin({ history: [{ at: '2026-12-02T00:00:00Z', event: 'Approved' }] }),
      ).success,
    );
    assert.ok(!NodeNameClaimSchema.safeParse(withJoin({ join: { ...join, tokenID: 'BAD' } })).success);
    assert.ok(!NodeNameClaimSchema.safeParse(claim({ holder: { ...holder, tokenID: 'ABC' } })).success);
    assert.ok(
      !NodeNameClaimSchema.safeParse(claim({ holder: { ...holder, claimedAt: 'yesterday' } })).success,
    );
    // The CRD refuses a claim both held and released (CEL rule on spec).
    assert.deepEqual(
      allRules(schema).map((r) => r.rule),
      ['!(has(self.holder) && has(self.releasedAt))'],
    );
  });
});
