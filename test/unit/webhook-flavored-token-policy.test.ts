// The ValidatingAdmissionPolicy on FlavoredTokens (src/webhook/flavored-token-policy.ts): what it
// matches and asks; test/e2e/admission.test.ts shows the API server enforcing it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { flavoredTokenPolicy, flavoredTokenPolicyBinding } from '../../src/webhook/flavored-token-policy.ts';

describe('flavoredTokenPolicy', () => {
  const policy = flavoredTokenPolicy({ name: 'nf', operatorUsername: 'system:serviceaccount:ns:nodeflavor' });

  it('is asked about every FlavoredToken CREATE and UPDATE (not status writes), and fails closed', () => {
    assert.equal(policy.metadata.name, 'nf-flavored-tokens');
    assert.equal(policy.spec.failurePolicy, 'Fail');
    assert.deepEqual(policy.spec.matchConstraints.resourceRules, [
      {
        apiGroups: ['nodeflavor.io'],
        apiVersions: ['*'],
        operations: ['CREATE', 'UPDATE'],
        resources: ['flavoredtokens'],
        scope: 'Cluster',
      },
    ]);
  });

  it("exempts the operator's ServiceAccount only: it creates records for callers it checked", () => {
    assert.deepEqual(policy.spec.matchConditions, [
      {
        name: 'not-nodeflavor-operator',
        expression: '!(request.userInfo.username in ["system:serviceaccount:ns:nodeflavor"])',
      },
    ]);
    assert.throws(() => flavoredTokenPolicy({ name: 'nf', operatorUsername: '' }), /must not be empty/);
  });

  it("asks the authorizer for `use` on the record's FlavorClass at CREATE, and keeps the attested annotation the operator's", () => {
    const [use, attested] = policy.spec.validations;
    assert.equal(
      use?.expression,
      'request.operation != "CREATE" || authorizer.group("nodeflavor.io").resource("flavorclasses").name(object.spec.flavorClassName).check("use").allowed()',
    );
    assert.equal(attested?.expression, 'variables.attested == variables.oldAttested');
    assert.match(JSON.stringify(policy.spec.variables), /nodeflavor\.io\/attested/);
    for (const validation of policy.spec.validations) assert.equal(validation.reason, 'Forbidden');
  });

  it('is bound with Deny, under its own name', () => {
    assert.deepEqual(flavoredTokenPolicyBinding({ name: 'nf' }).spec, {
      policyName: 'nf-flavored-tokens',
      validationActions: ['Deny'],
    });
  });
});
