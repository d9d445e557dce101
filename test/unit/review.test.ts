import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  type AdmissionPolicy,
  protectedKeysFromFlavorClasses,
  QUARANTINE_TAINT_KEY,
  TOKEN_LABEL_KEY,
} from '../../src/flavor/admission.ts';
import {
  admissionResponse,
  nodeAdmissionRequestFrom,
  nodeViewFrom,
  parseAdmissionReview,
  reviewNodeAdmission,
} from '../../src/webhook/review.ts';

const policy: AdmissionPolicy = {
  controllerUsernames: ['system:serviceaccount:nodeflavor:nodeflavor'],
  adminGroups: ['nodeflavor-admins'],
  protectedKeys: protectedKeysFromFlavorClasses([{ labels: { 'nodeflavor.io/flavor': 'sweet' } }]),
};
const TOKEN_VALUE = 'SECRETTOKENVALUE';

function nodeObject(labels: Record<string, string>, taints: unknown[] = []): Record<string, unknown> {
  return { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1', labels }, spec: { taints } };
}

/** An AdmissionReview as kube-apiserver sends it for a Node write. */
function review(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
      kind: { group: '', version: 'v1', kind: 'Node' },
      resource: { group: '', version: 'v1', resource: 'nodes' },
      requestKind: { group: '', version: 'v1', kind: 'Node' },
      name: 'n1',
      operation: 'CREATE',
      userInfo: { username: 'system:node:n1', groups: ['system:nodes', 'system:authenticated'] },
      object: nodeObject({ [TOKEN_LABEL_KEY]: TOKEN_VALUE }, [
        { key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' },
      ]),
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
      ...overrides,
    },
  };
}

describe('parseAdmissionReview', () => {
  test('reads a real review and keeps fields it does not model', () => {
    const parsed = parseAdmissionReview(review());
    assert.ok(parsed.ok);
    assert.equal(parsed.review.request.operation, 'CREATE');
    assert.equal(parsed.review.request.userInfo.username, 'system:node:n1');
    assert.deepEqual(parsed.review.request['requestKind'], { group: '', version: 'v1', kind: 'Node' });
  });

  test('an invalid review with a uid says so and keeps the uid', () => {
    const parsed = parseAdmissionReview(review({ operation: 'PATCH' }));
    assert.ok(!parsed.ok);
    assert.equal(parsed.uid, '705ab4f5-6393-11e8-b7cc-42010a800002');
    assert.match(parsed.error, /request\.operation/);
  });

  test('errors name fields, never the values in the body', () => {
    const parsed = parseAdmissionReview(review({ userInfo: { username: TOKEN_VALUE, groups: TOKEN_VALUE } }));
    assert.ok(!parsed.ok);
    assert.ok(!parsed.error.includes(TOKEN_VALUE), parsed.error);
  });
});

describe('nodeViewFrom', () => {
  test('reads labels, annotations and taints', () => {
    const view = nodeViewFrom({
      metadata: { labels: { a: '1' }, annotations: { b: '2' } },
      spec: {
        taints: [
          { key: 'k', value: 'v', effect: 'NoSchedule' },
          { key: 'k2', effect: 'NoExecute' },
        ],
      },
    });
    assert.deepEqual(view, {
      labels: { a: '1' },
      annotations: { b: '2' },
      taints: [
        { key: 'k', value: 'v', effect: 'NoSchedule' },
        { key: 'k2', effect: 'NoExecute' },
      ],
    });
  });

  const emptyView = { labels: {}, annotations: {}, taints: [] };
  const tolerated: Record<string, unknown> = {
    'no object': undefined,
    null: null,
    'a string': 'node',
    'no metadata': { spec: {} },
    'labels of the wrong shape': { metadata: { labels: ['a'], annotations: 7 }, spec: { taints: {} } },
    'taints without a key': { spec: { taints: [null, 3, { effect: 'NoSchedule' }] } },
  };
  for (const [name, object] of Object.entries(tolerated)) {
    test(`tolerates ${name}`, () => assert.deepEqual(nodeViewFrom(object), emptyView));
  }

  test('a "__proto__" label key stays a label', () => {
    const view = nodeViewFrom(JSON.parse('{"metadata":{"labels":{"__proto__":"x"}}}'));
    assert.deepEqual(Object.keys(view.labels), ['__proto__']);
  });
});

describe('nodeAdmissionRequestFrom', () => {
  test('a CREATE has a new node only, named by the request', () => {
    const parsed = parseAdmissionReview(review());
    assert.ok(parsed.ok);
    const request = nodeAdmissionRequestFrom(parsed.review.request);
    assert.equal(request.nodeName, 'n1');
    assert.equal(request.oldNode, undefined);
    assert.deepEqual(request.newNode?.labels, { [TOKEN_LABEL_KEY]: TOKEN_VALUE });
  });

  test('without a request name the object name is used', () => {
    const parsed = parseAdmissionReview(review({ name: undefined }));
    assert.ok(parsed.ok);
    assert.equal(nodeAdmissionRequestFrom(parsed.review.request).nodeName, 'n1');
  });
});

describe('admissionResponse', () => {
  test('an allow echoes the uid and carries no status', () => {
    assert.deepEqual(admissionResponse('u1', { allowed: true, reason: 'Controller' }), {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: 'u1', allowed: true },
    });
  });

  test('a deny is a 403 Forbidden with the message', () => {
    assert.deepEqual(admissionResponse('u2', { allowed: false, reason: 'Unauthorized', message: 'no' }), {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: 'u2', allowed: false, status: { code: 403, reason: 'Forbidden', message: 'no' } },
    });
  });
});

describe('reviewNodeAdmission', () => {
  const cases: Record<
    string,
    { body: unknown; want: { httpStatus: 200 | 400; allowed?: boolean; reason?: string } }
  > = {
    'a kubelet registering with its token is allowed': {
      body: review(),
      want: { httpStatus: 200, allowed: true, reason: 'KubeletRegistration' },
    },
    'a kubelet labelling itself with a flavor on update is refused': {
      body: review({
        operation: 'UPDATE',
        subResource: 'status',
        object: nodeObject({ 'nodeflavor.io/flavor': 'sweet' }),
        oldObject: nodeObject({}),
      }),
      want: { httpStatus: 200, allowed: false, reason: 'KubeletProtectedKey' },
    },
    'an UPDATE whose object is not an object is refused': {
      body: review({ operation: 'UPDATE', object: 'garbage', oldObject: nodeObject({}) }),
      want: { httpStatus: 200, allowed: false, reason: 'MalformedRequest' },
    },
    'a review for another resource is refused': {
      body: review({ resource: { group: 'apps', version: 'v1', resource: 'deployments' } }),
      want: { httpStatus: 200, allowed: false, reason: 'MalformedRequest' },
    },
    'a malformed review with a uid is a well-formed deny': {
      body: review({ userInfo: 'nobody' }),
      want: { httpStatus: 200, allowed: false, reason: 'MalformedRequest' },
    },
    'a v1beta1 review is refused': {
      body: { ...review(), apiVersion: 'admission.k8s.io/v1beta1' },
      want: { httpStatus: 200, allowed: false, reason: 'MalformedRequest' },
    },
    'a body without a uid cannot be answered': {
      body: { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: {} },
      want: { httpStatus: 400 },
    },
    'a body that is not a review cannot be answered': { body: [1, 2, 3], want: { httpStatus: 400 } },
  };

  for (const [name, { body, want }] of Object.entries(cases)) {
    test(name, () => {
      const got = reviewNodeAdmission(body, policy);
      assert.equal(got.httpStatus, want.httpStatus);
      if (got.httpStatus !== 200) return;
      assert.equal(got.body.response.uid, '705ab4f5-6393-11e8-b7cc-42010a800002');
      assert.equal(got.body.response.allowed, want.allowed);
      assert.equal(got.decision.reason, want.reason);
      assert.ok(!JSON.stringify(got.body).includes(TOKEN_VALUE), 'response leaks the token value');
      if (!got.body.response.allowed) assert.ok(got.body.response.status?.message);
    });
  }

  test('a malformed review answers "malformed AdmissionReview: ..."', () => {
    const got = reviewNodeAdmission(review({ userInfo: 'nobody' }), policy);
    assert.ok(got.httpStatus === 200 && !got.decision.allowed);
    assert.match(got.body.response.status?.message ?? '', /^malformed AdmissionReview: request\.userInfo/);
  });
});

describe('property: any body gets an answer or a 400, never an exception', () => {
  function assertWellFormed(body: unknown): void {
    const got = reviewNodeAdmission(body, policy);
    if (got.httpStatus === 400) {
      assert.equal(typeof got.error, 'string');
      return;
    }
    const { response } = got.body;
    assert.equal(got.body.apiVersion, 'admission.k8s.io/v1');
    assert.equal(got.body.kind, 'AdmissionReview');
    assert.ok(typeof response.uid === 'string' && response.uid.length > 0);
    assert.equal(response.allowed, got.decision.allowed);
    if (!response.allowed) assert.equal(response.status?.code, 403);
    assert.doesNotThrow(() => JSON.stringify(got.body));
  }

  test('random JSON values', () => {
    fc.assert(fc.property(fc.jsonValue(), assertWellFormed), { numRuns: 300 });
  });

  test('random values of any kind', () => {
    fc.assert(fc.property(fc.anything({ withNullPrototype: true }), assertWellFormed), { numRuns: 300 });
  });

  test('reviews with random requests and objects', () => {
    const request = fc.record(
      {
        uid: fc.oneof(fc.uuid(), fc.constant(''), fc.integer()),
        kind: fc.oneof(fc.constant({ group: '', version: 'v1', kind: 'Node' }), fc.anything()),
        resource: fc.oneof(fc.constant({ group: '', version: 'v1', resource: 'nodes' }), fc.anything()),
        name: fc.oneof(fc.constant('n1'), fc.anything()),
        operation: fc.oneof(fc.constantFrom('CREATE', 'UPDATE', 'DELETE', 'CONNECT'), fc.anything()),
        userInfo: fc.oneof(
          fc.record({
            username: fc.constantFrom('system:node:n1', 'alice'),
            groups: fc.subarray(['system:nodes', 'nodeflavor-admins']),
          }),
          fc.anything(),
        ),
        object: fc.oneof(fc.constant(nodeObject({ [TOKEN_LABEL_KEY]: TOKEN_VALUE })), fc.jsonValue()),
        oldObject: fc.oneof(fc.constant(nodeObject({})), fc.jsonValue()),
      },
      { requiredKeys: ['uid'] },
    );
    fc.assert(
      fc.property(request, (r) =>
        assertWellFormed({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: r }),
      ),
      { numRuns: 500 },
    );
  });
});
