// The start-up decisions of `nodeflavor run` (ADR 0003): the controller runs only as the identity
// the admission guard exempts, and only with a guard in front of Nodes unless told otherwise.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseRunFlags } from '../../src/cli/run-flags.ts';
import { guardDecision, identityRefusal, type StartupConfig } from '../../src/cli/startup-checks.ts';
import { parseConfig } from '../../src/config.ts';

const config = (args: string[] = []): StartupConfig => parseConfig(parseRunFlags(args, {}));
const SA = 'system:serviceaccount:nodeflavor:nodeflavor';

describe('identityRefusal', () => {
  it('lets the configured ServiceAccount run the controller', () => {
    assert.equal(identityRefusal(config(), SA), undefined);
    assert.equal(
      identityRefusal(config(['--namespace=ops', '--service-account=nf']), 'system:serviceaccount:ops:nf'),
      undefined,
    );
  });

  it('refuses any other identity in one line that says how to run as the ServiceAccount', () => {
    const line = identityRefusal(config(), 'kubernetes-admin');
    assert.ok(line);
    assert.doesNotMatch(line, /\n/);
    assert.match(line, /refusing to run the controller as "kubernetes-admin"/);
    assert.match(line, new RegExp(`only "${SA}" write flavors`));
    assert.match(line, /kubectl -n nodeflavor create token nodeflavor/);
  });

  it('names the flags that would match when the identity is another ServiceAccount', () => {
    const line = identityRefusal(config(), 'system:serviceaccount:ops:nf') ?? '';
    assert.match(line, /--namespace=ops --service-account=nf/);
  });

  it('does not care who runs a process without the controller (only the controller writes flavors)', () => {
    assert.equal(identityRefusal(config(['--no-controller']), 'kubernetes-admin'), undefined);
  });
});

describe('guardDecision', () => {
  it('is content when this process runs the guard, or runs no controller', () => {
    assert.deepEqual(guardDecision(config()), { guarded: true });
    assert.deepEqual(guardDecision(config(['--no-controller', '--no-webhook']), { state: 'absent' }), {
      guarded: true,
    });
  });

  it("is content with another process's registration", () => {
    const decision = guardDecision(config(['--no-webhook']), {
      state: 'present',
      kinds: ['ValidatingWebhookConfiguration'],
    });
    assert.deepEqual(decision, { guarded: true });
  });

  it('refuses a controller with no guard, in one line naming the flag and the chart value', () => {
    for (const finding of [
      { state: 'absent' } as const,
      { state: 'unreadable', why: 'read ValidatingWebhookConfiguration nodeflavor: forbidden' } as const,
    ]) {
      const decision = guardDecision(config(['--no-webhook']), finding);
      assert.equal(decision.guarded, false);
      assert.ok(decision.refusal);
      assert.doesNotMatch(decision.refusal, /\n/);
      assert.match(decision.refusal, /refusing to run the controller unguarded/);
      assert.match(decision.refusal, /--allow-unguarded-nodes/);
      assert.match(decision.refusal, /controller\.allowUnguardedNodes=true/);
      assert.equal(decision.warning, undefined);
    }
  });

  it('runs unguarded with --allow-unguarded-nodes, with a loud warning instead', () => {
    const decision = guardDecision(config(['--no-webhook', '--allow-unguarded-nodes']), { state: 'absent' });
    assert.equal(decision.refusal, undefined);
    assert.equal(decision.guarded, false);
    assert.match(decision.warning ?? '', /^NODES ARE UNGUARDED: /);
  });

  it('reads the flag from NODEFLAVOR_ALLOW_UNGUARDED_NODES too', () => {
    const parsed = parseConfig(parseRunFlags(['--no-webhook'], { NODEFLAVOR_ALLOW_UNGUARDED_NODES: 'true' }));
    assert.equal(parsed.allowUnguardedNodes, true);
    assert.equal(config().allowUnguardedNodes, false);
  });
});
