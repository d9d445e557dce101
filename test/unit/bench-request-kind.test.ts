// The P3 benchmark's count of the issuer's API requests per issuance groups them by verb and
// resource (bench/p3-issuer-server.ts): names dropped, watches apart.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { requestKind } from '../../bench/p3-issuer-server.ts';

describe('requestKind (P3 bench)', () => {
  it('names verb and resource, without object names or namespaces', () => {
    const cases: [string, string, string][] = [
      ['POST', '/apis/nodeflavor.io/v1alpha1/flavoredtokens', 'POST flavoredtokens'],
      ['PATCH', '/apis/nodeflavor.io/v1alpha1/flavoredtokens/ft-abcdef', 'PATCH flavoredtokens'],
      ['POST', '/api/v1/namespaces/kube-system/secrets', 'POST secrets'],
      ['GET', '/api/v1/namespaces/kube-public/configmaps/cluster-info', 'GET configmaps'],
      ['POST', '/apis/authentication.k8s.io/v1/tokenreviews', 'POST tokenreviews'],
      ['POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', 'POST subjectaccessreviews'],
      ['PUT', '/apis/nodeflavor.io/v1alpha1/flavoredtokens/ft-abcdef/status', 'PUT flavoredtokens/status'],
      ['GET', '/api/v1/namespaces', 'GET namespaces'],
    ];
    for (const [method, path, kind] of cases) assert.equal(requestKind(method, path), kind, path);
  });

  it('sets watches apart from lists', () => {
    assert.equal(
      requestKind('GET', '/apis/nodeflavor.io/v1alpha1/flavoredtokens?watch=true&resourceVersion=5'),
      'WATCH flavoredtokens',
    );
    assert.equal(
      requestKind('GET', '/apis/nodeflavor.io/v1alpha1/flavoredtokens?limit=500'),
      'GET flavoredtokens',
    );
    assert.equal(
      requestKind('GET', '/api/v1/namespaces/nodeflavor/secrets?fieldSelector=x&watch=1'),
      'WATCH secrets',
    );
  });
});
