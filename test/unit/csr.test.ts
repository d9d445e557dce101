import 'reflect-metadata';
import assert from 'node:assert/strict';
import { webcrypto } from 'node:crypto';
import { before, describe, test } from 'node:test';
import * as x509 from '@peculiar/x509';
import fc from 'fast-check';
import { type CsrSubject, parseKubeletCsr } from '../../src/flavor/csr.ts';
import { createCertificateAuthority, createCertificateRequest } from '../../src/pki/certs.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** A CSR's spec.request: base64 of the PEM block, as kubelets send it. */
const specRequest = (pem: string) => Buffer.from(pem, 'utf8').toString('base64');

/** A CSR with a subject that createCertificateRequest cannot express (several CNs, raw DN text). */
async function csrWithSubject(name: string, extensions: x509.Extension[] = []): Promise<string> {
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name,
    keys,
    signingAlgorithm: ALG,
    extensions,
  });
  return csr.toString('pem');
}

const pemToDer = (pem: string) => Buffer.from(x509.PemConverter.decodeFirst(pem));
const derToPem = (der: Buffer) => x509.PemConverter.encode(der, 'CERTIFICATE REQUEST');

function assertRejected(result: CsrSubject, reason: RegExp): void {
  assert.equal(result.ok, false, JSON.stringify(result));
  if (!result.ok) assert.match(result.reason, reason);
}

describe('parseKubeletCsr', () => {
  let kubeletPem = '';
  let caPem = '';
  before(async () => {
    kubeletPem = (await createCertificateRequest('system:node:n1', ['system:nodes'])).csrPem;
    caPem = (await createCertificateAuthority('system:node:n1', 60_000)).certPem;
  });

  test('a real kubelet CSR (base64 of the PEM) gives the node name and organizations', async () => {
    assert.deepEqual(await parseKubeletCsr(specRequest(kubeletPem)), {
      ok: true,
      nodeName: 'n1',
      organizations: ['system:nodes'],
      hasSubjectAltNames: false,
      publicKey: { algorithm: 'ECDSA', curve: 'P-256' },
    });
  });

  test('a DER request (base64 of the DER bytes) works too', async () => {
    const result = await parseKubeletCsr(pemToDer(kubeletPem).toString('base64'));
    assert.equal(result.ok, true);
    if (result.ok) assert.equal(result.nodeName, 'n1');
  });

  test('a PEM with CRLF line ends and surrounding text still parses', async () => {
    const pem = `garbage before\r\n${kubeletPem.replace(/\n/g, '\r\n')}\r\ntrailing`;
    const result = await parseKubeletCsr(specRequest(pem));
    assert.equal(result.ok, true, JSON.stringify(result));
  });

  test('subject alternative names are reported', async () => {
    const pem = await csrWithSubject('CN=system:node:n1, O=system:nodes', [
      new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: 'n1.example.com' }]),
    ]);
    const result = await parseKubeletCsr(specRequest(pem));
    assert.equal(result.ok, true);
    if (result.ok) assert.equal(result.hasSubjectAltNames, true);
  });

  const subjects: Record<string, { subject: () => Promise<string>; ok?: string; reason?: RegExp }> = {
    'a longer DNS subdomain name': {
      subject: async () =>
        (await createCertificateRequest('system:node:web-1.zone-a.example.com', [])).csrPem,
      ok: 'web-1.zone-a.example.com',
    },
    'no organization at all is still a node name (the CN is what counts)': {
      subject: async () => (await createCertificateRequest('system:node:n2', [])).csrPem,
      ok: 'n2',
    },
    'a CN without the system:node: prefix': {
      subject: async () => (await createCertificateRequest('n1', ['system:nodes'])).csrPem,
      reason: /exactly one CN of the form system:node:<name>/,
    },
    'a CN with the prefix in another case': {
      subject: async () => (await createCertificateRequest('System:Node:n1', ['system:nodes'])).csrPem,
      reason: /exactly one CN/,
    },
    'a CN of a user, not a node (system:nodes:n1)': {
      subject: async () => (await createCertificateRequest('system:nodes:n1', ['system:nodes'])).csrPem,
      reason: /exactly one CN/,
    },
    'two CNs': {
      subject: () => csrWithSubject('CN=system:node:n1, CN=system:node:n2, O=system:nodes'),
      reason: /exactly one CN/,
    },
    'no CN': {
      subject: () => csrWithSubject('O=system:nodes'),
      reason: /exactly one CN/,
    },
    'an empty node name': {
      subject: async () => (await createCertificateRequest('system:node:', ['system:nodes'])).csrPem,
      reason: /not a valid DNS subdomain/,
    },
    'a node name with upper case': {
      subject: async () => (await createCertificateRequest('system:node:N1', ['system:nodes'])).csrPem,
      reason: /not a valid DNS subdomain/,
    },
    'a node name with an underscore': {
      subject: async () => (await createCertificateRequest('system:node:n_1', ['system:nodes'])).csrPem,
      reason: /not a valid DNS subdomain/,
    },
    'a node name with a slash (path injection)': {
      subject: async () => (await createCertificateRequest('system:node:../n1', ['system:nodes'])).csrPem,
      reason: /not a valid DNS subdomain/,
    },
    'a node name ending in a dash': {
      subject: async () => (await createCertificateRequest('system:node:n1-', ['system:nodes'])).csrPem,
      reason: /not a valid DNS subdomain/,
    },
    'a node name longer than 253 characters': {
      subject: async () =>
        (await createCertificateRequest(`system:node:${'a'.repeat(254)}`, ['system:nodes'])).csrPem,
      reason: /not a valid DNS subdomain/,
    },
  };
  for (const [name, c] of Object.entries(subjects)) {
    test(`subject: ${name}`, async () => {
      const result = await parseKubeletCsr(specRequest(await c.subject()));
      if (c.ok !== undefined) {
        assert.equal(result.ok, true, JSON.stringify(result));
        if (result.ok) assert.equal(result.nodeName, c.ok);
      } else {
        assertRejected(result, c.reason ?? /./);
      }
    });
  }

  // The Node API rejects these names (each dot-separated label must start and end alphanumeric),
  // so a CSR naming one binds a token (and uses up a single-use token) to a Node that can never exist.
  const notSubdomains = ['a..b', 'a.-b', 'a-.b'];
  for (const bad of notSubdomains) {
    test(`subject: node name "${bad}" is not a DNS subdomain`, {}, async () => {
      const pem = (await createCertificateRequest(`system:node:${bad}`, ['system:nodes'])).csrPem;
      assertRejected(await parseKubeletCsr(specRequest(pem)), /not a valid DNS subdomain/);
    });
  }

  const damaged: Record<string, { request: () => string; reason: RegExp }> = {
    'the signature has a flipped byte': {
      request: () => {
        const der = pemToDer(kubeletPem);
        der[der.length - 1] = (der[der.length - 1] ?? 0) ^ 0x01;
        return specRequest(derToPem(der));
      },
      reason: /signature/,
    },
    'the subject was edited after signing (n1 → n2)': {
      request: () => {
        const der = pemToDer(kubeletPem);
        const at = der.indexOf(Buffer.from('system:node:n1'));
        assert.ok(at > 0);
        der[at + 'system:node:n'.length] = '2'.charCodeAt(0);
        return specRequest(derToPem(der));
      },
      reason: /signature does not verify/,
    },
    'an empty request': { request: () => '', reason: /empty, too large or not PEM\/DER/ },
    'a request over 16 KiB': {
      request: () => Buffer.alloc(16 * 1024 + 1, 0x30).toString('base64'),
      reason: /too large/,
    },
    'a PEM block with a broken body': {
      request: () =>
        specRequest('-----BEGIN CERTIFICATE REQUEST-----\n!!!!\n-----END CERTIFICATE REQUEST-----\n'),
      reason: /not (PEM\/DER|a valid PKCS#10)/,
    },
    'a certificate, not a request': {
      request: () => specRequest(caPem),
      reason: /not a valid PKCS#10/,
    },
    'a truncated DER': {
      request: () => pemToDer(kubeletPem).subarray(0, 40).toString('base64'),
      reason: /not a valid PKCS#10/,
    },
  };
  for (const [name, c] of Object.entries(damaged)) {
    test(`damaged: ${name}`, async () => {
      assertRejected(await parseKubeletCsr(c.request()), c.reason);
    });
  }

  // -------------------------------------------------------------------------------------------
  // Untrusted input: never a crash, always a reason.

  async function neverThrows(request: string): Promise<void> {
    let result: CsrSubject;
    try {
      result = await parseKubeletCsr(request);
    } catch (error) {
      assert.fail(`threw on ${JSON.stringify(request.slice(0, 80))}: ${(error as Error).message}`);
    }
    assert.equal(result.ok, false);
    if (!result.ok) {
      assert.equal(typeof result.reason, 'string');
      assert.ok(result.reason.length > 0);
    }
  }

  test('random bytes (base64) never throw and always give a reason', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 2048 }), (bytes) =>
        neverThrows(Buffer.from(bytes).toString('base64')),
      ),
      { numRuns: 500, seed: 1 },
    );
  });

  test('random strings (not base64) never throw and always give a reason', async () => {
    await fc.assert(fc.asyncProperty(fc.string({ unit: 'binary', maxLength: 512 }), neverThrows), {
      numRuns: 500,
      seed: 2,
    });
  });

  test('random base64 text never throws and always gives a reason', async () => {
    await fc.assert(fc.asyncProperty(fc.base64String({ maxLength: 1024 }), neverThrows), {
      numRuns: 500,
      seed: 3,
    });
  });

  test('random bytes in a PEM block, and random DER-looking bytes, never throw', async () => {
    const pemOf = (bytes: Uint8Array) => specRequest(derToPem(Buffer.from(bytes)));
    const derish = fc.uint8Array({ minLength: 2, maxLength: 600 }).map((b) => {
      const out = Buffer.from(b);
      out[0] = 0x30; // a SEQUENCE, so the ASN.1 parser goes further than the first byte
      return out.toString('base64');
    });
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.uint8Array({ maxLength: 600 }).map(pemOf), derish), neverThrows),
      { numRuns: 500, seed: 4 },
    );
  });

  test('a real CSR with random bytes changed never throws and never yields another node name', async () => {
    const der = pemToDer(kubeletPem);
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.nat({ max: der.length - 1 }), fc.integer({ min: 1, max: 255 })), {
          minLength: 1,
          maxLength: 4,
        }),
        async (edits) => {
          const copy = Buffer.from(der);
          for (const [index, xor] of edits) copy[index] = (copy[index] ?? 0) ^ xor;
          const result = await parseKubeletCsr(copy.toString('base64'));
          if (result.ok) assert.equal(result.nodeName, 'n1');
          else assert.ok(result.reason.length > 0);
        },
      ),
      { numRuns: 500, seed: 5 },
    );
  });
});
