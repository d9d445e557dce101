// The resource label of nodeflavor_kube_api_requests_total: the resource and subresource a path
// names, never an object's name or namespace (a label's values must stay few).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { apiResourceOf } from '../../src/runtime/fetch.ts';

describe('apiResourceOf', () => {
  const cases: [string, string][] = [
    ['/api/v1/nodes', 'nodes'],
    ['/api/v1/nodes/n1', 'nodes'],
    ['/api/v1/nodes/n1/status', 'nodes/status'],
    ['/api/v1/namespaces/kube-system/secrets/bootstrap-token-abcdef', 'secrets'],
    ['/api/v1/namespaces/default/events', 'events'],
    ['/api/v1/namespaces/kube-system', 'namespaces'],
    ['/apis/nodeflavor.io/v1alpha1/flavoredtokens/ft-1/status', 'flavoredtokens/status'],
    ['/apis/nodeflavor.io/v1alpha1/nodenameclaims?watch=1&resourceVersion=5', 'nodenameclaims'],
    [
      '/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1/approval',
      'certificatesigningrequests/approval',
    ],
    ['/apis/coordination.k8s.io/v1/namespaces/nodeflavor/leases/nodeflavor', 'leases'],
    ['/apis/authentication.k8s.io/v1/selfsubjectreviews', 'selfsubjectreviews'],
    ['/apis', 'other'],
    ['/apis/nodeflavor.io/v1alpha1', 'other'],
    ['/version', 'other'],
  ];
  for (const [path, resource] of cases) {
    it(`${path} → ${resource}`, () => assert.equal(apiResourceOf(path), resource));
  }
});
