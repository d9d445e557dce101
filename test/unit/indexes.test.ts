// The controller's in-memory indexes forget what is deleted: churn must not grow them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Indexes } from '../../src/controller/indexes.ts';
import { SetIndex } from '../../src/flavor/set-index.ts';
import type { CsrObject } from '../../src/kube/csrs.ts';
import { createCertificateRequest } from '../../src/pki/certs.ts';

describe('Indexes', () => {
  it("forget a deleted CSR (its token's requests, the name it asked for): churn does not grow them", async () => {
    const indexes = new Indexes();
    const { csrPem } = await createCertificateRequest('system:node:n1', ['system:nodes']);
    const csr: CsrObject = {
      metadata: {
        name: 'csr-1',
        uid: 'u-1',
        resourceVersion: '1',
        creationTimestamp: '2026-12-01T00:00:00Z',
      },
      spec: { username: 'system:bootstrap:abcdef', request: Buffer.from(csrPem).toString('base64') },
    };
    indexes.onCsr(csr, false);
    assert.deepEqual(await indexes.csrsNaming('n1'), ['csr-1'], 'indexed by the name it asks for');
    assert.deepEqual(indexes.csrsByTokenId.get('abcdef'), ['csr-1']);
    indexes.onCsr(csr, true);
    assert.deepEqual(await indexes.csrsNaming('n1'), []);
    assert.deepEqual(indexes.csrsByTokenId.get('abcdef'), []);
  });
});

describe('SetIndex', () => {
  it('keeps members per key through adds and removes, one member or many', () => {
    const index = new SetIndex();
    assert.deepEqual(index.get('n1'), []);
    index.add('n1', 'a');
    index.add('n1', 'a');
    assert.deepEqual(index.get('n1'), ['a'], 'a member added twice is there once');
    index.add('n1', 'b');
    index.add('n1', 'c');
    assert.deepEqual(index.get('n1').sort(), ['a', 'b', 'c']);
    index.remove('n1', 'b');
    index.remove('n1', 'c');
    assert.deepEqual(index.get('n1'), ['a']);
    index.remove('n1', 'zzz');
    assert.deepEqual(index.get('n1'), ['a'], 'removing a stranger changes nothing');
    index.add('n1', 'd');
    assert.deepEqual(index.get('n1').sort(), ['a', 'd'], 'grows again after shrinking to one');
    index.remove('n1', 'a');
    index.remove('n1', 'd');
    assert.deepEqual(index.get('n1'), []);
    index.add('n2', 'x');
    index.remove('n2', 'y');
    assert.deepEqual(index.get('n2'), ['x']);
  });
});
