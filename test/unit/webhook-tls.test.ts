import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type BundleFacts,
  bundleFacts,
  createBundle,
  isRenewalDue,
  judgeBundle,
  MAX_CHECK_INTERVAL_MS,
  nextCheckDelay,
  renewalTime,
  renewServing,
  servingNames,
  type Wanted,
} from '../../src/pki/serving-bundle.ts';

const DAY = 24 * 3_600_000;
const t0 = new Date('2026-11-01T00:00:00Z');
const at = (ms: number) => new Date(t0.getTime() + ms);

describe('servingNames', () => {
  test("the Service's four DNS names, the CN its .svc name", () => {
    assert.deepEqual(servingNames({ service: 'nodeflavor-webhook', namespace: 'nf' }), {
      commonName: 'nodeflavor-webhook.nf.svc',
      dnsNames: [
        'nodeflavor-webhook',
        'nodeflavor-webhook.nf',
        'nodeflavor-webhook.nf.svc',
        'nodeflavor-webhook.nf.svc.cluster.local',
      ],
      ipAddresses: [],
    });
  });

  test('a loopback webhook URL adds every loopback spelling', () => {
    const names = servingNames({
      service: 'w',
      namespace: 'n',
      url: 'https://127.0.0.1:9443/validate-nodes',
    });
    assert.deepEqual(names.ipAddresses, ['127.0.0.1', '::1']);
    assert.ok(names.dnsNames.includes('localhost'));
  });

  test('another URL adds just its host, as an IP or a DNS name', () => {
    assert.deepEqual(servingNames({ service: 'w', namespace: 'n', url: 'https://10.1.2.3/' }).ipAddresses, [
      '10.1.2.3',
    ]);
    const byName = servingNames({ service: 'w', namespace: 'n', url: 'https://Webhook.Example.com:8443/x' });
    assert.equal(byName.dnsNames.at(-1), 'webhook.example.com');
    assert.deepEqual(byName.ipAddresses, []);
  });
});

describe('renewal timing', () => {
  const validity = { notBefore: t0, notAfter: at(30 * DAY) };

  test('renews at two thirds of the lifetime', () => {
    assert.equal(renewalTime(validity).getTime(), at(20 * DAY).getTime());
    assert.equal(isRenewalDue(validity, at(20 * DAY - 1)), false);
    assert.equal(isRenewalDue(validity, at(20 * DAY)), true);
    assert.equal(isRenewalDue(validity, at(31 * DAY)), true, 'an expired certificate is due too');
  });

  test('a 6 s certificate is renewed after 4 s', () => {
    assert.equal(renewalTime({ notBefore: t0, notAfter: at(6_000) }).getTime(), at(4_000).getTime());
  });

  test('sleeps until the renewal, at most an hour, at least a moment', () => {
    assert.equal(nextCheckDelay({ notBefore: t0, notAfter: at(6_000) }, at(1_000)), 3_000);
    assert.equal(nextCheckDelay(validity, t0), MAX_CHECK_INTERVAL_MS, 'clock jumps and long timers');
    assert.equal(nextCheckDelay(validity, at(25 * DAY)), 100, 'overdue: look again at once');
  });
});

describe('judgeBundle', () => {
  const wanted: Wanted = {
    names: {
      commonName: 'w.n.svc',
      dnsNames: ['w', 'w.n', 'w.n.svc', 'w.n.svc.cluster.local'],
      ipAddresses: [],
    },
    servingLifetimeMs: 30 * DAY,
  };
  const good: Required<BundleFacts> = {
    ca: { notBefore: t0, notAfter: at(3650 * DAY), isCA: true, keyMatches: true },
    serving: {
      notBefore: t0,
      notAfter: at(30 * DAY),
      serial: '01',
      dnsNames: [...wanted.names.dnsNames],
      ipAddresses: [],
      issuedByCa: true,
      keyMatches: true,
    },
  };
  const now = at(DAY);
  const cases: Record<
    string,
    { facts: BundleFacts; now?: Date; wanted?: Wanted; action: string; why?: RegExp }
  > = {
    'a sound bundle is served': { facts: good, action: 'serve' },
    'an empty Secret gets a new CA': { facts: {}, action: 'recreate', why: /no readable CA/ },
    'a CA key that does not fit': {
      facts: { ...good, ca: { ...good.ca, keyMatches: false } },
      action: 'recreate',
    },
    'a leaf posing as the CA': { facts: { ...good, ca: { ...good.ca, isCA: false } }, action: 'recreate' },
    'a CA about to expire is replaced': {
      facts: { ...good, ca: { ...good.ca, notAfter: at(40 * DAY) } },
      action: 'recreate',
      why: /expires too soon/,
    },
    'no serving certificate: renew, keep the CA': { facts: { ca: good.ca }, action: 'renew' },
    'a serving certificate from another CA': {
      facts: { ...good, serving: { ...good.serving, issuedByCa: false } },
      action: 'renew',
    },
    'a serving key that does not fit': {
      facts: { ...good, serving: { ...good.serving, keyMatches: false } },
      action: 'renew',
    },
    'a missing name (the Service was renamed)': {
      facts: { ...good, serving: { ...good.serving, dnsNames: ['w'] } },
      action: 'renew',
      why: /lacks w\.n, w\.n\.svc/,
    },
    'just before two thirds: serve': { facts: good, now: at(20 * DAY - 1_000), action: 'serve' },
    'at two thirds: renew': { facts: good, now: at(20 * DAY), action: 'renew', why: /two thirds/ },
    'a shortened configured lifetime takes effect now': {
      facts: good,
      wanted: { ...wanted, servingLifetimeMs: 6_000 },
      action: 'renew',
      why: /longer than the configured/,
    },
  };
  for (const [name, c] of Object.entries(cases)) {
    test(name, () => {
      const verdict = judgeBundle(c.facts, c.wanted ?? wanted, c.now ?? now);
      assert.equal(verdict.action, c.action);
      if (c.why && verdict.action !== 'serve') assert.match(verdict.why, c.why);
    });
  }
});

describe('issuing (real certificates)', () => {
  const wanted: Wanted = {
    names: servingNames({ service: 'w', namespace: 'n', url: 'https://127.0.0.1:9443/' }),
    servingLifetimeMs: 6_000,
  };

  test('a new bundle is judged sound, with every name and a short lifetime', async () => {
    const now = new Date();
    const bundle = await createBundle(wanted, now);
    const facts = bundleFacts(bundle);
    assert.equal(judgeBundle(facts, wanted, now).action, 'serve');
    assert.ok(facts.serving);
    assert.deepEqual(facts.serving.ipAddresses, ['127.0.0.1', '::1']);
    assert.ok(facts.serving.dnsNames.includes('w.n.svc.cluster.local'));
    // X.509 keeps whole seconds; the back-dating for clock skew is a tenth of the lifetime here.
    const lifetime = facts.serving.notAfter.getTime() - facts.serving.notBefore.getTime();
    assert.ok(lifetime >= 5_000 && lifetime <= 8_000, `lifetime ${lifetime} ms`);
    assert.ok(facts.serving.notAfter.getTime() > now.getTime() + 4_000, 'not born expired');
    assert.equal(judgeBundle(facts, wanted, new Date(now.getTime() + 6_000)).action, 'renew');
  });

  test('renewing keeps the CA and changes the serial and key', async () => {
    const now = new Date();
    const first = await createBundle(wanted, now);
    const second = await renewServing(first, wanted, now);
    assert.equal(second.caCert, first.caCert);
    assert.equal(second.caKey, first.caKey);
    assert.notEqual(second.tlsKey, first.tlsKey);
    assert.notEqual(bundleFacts(second).serving?.serial, bundleFacts(first).serving?.serial);
    assert.equal(judgeBundle(bundleFacts(second), wanted, now).action, 'serve');
  });

  test('mixed-up keys and foreign certificates are caught', async () => {
    const now = new Date();
    const a = await createBundle(wanted, now);
    const b = await createBundle(wanted, now);
    assert.equal(bundleFacts({ ...a, tlsKey: b.tlsKey }).serving?.keyMatches, false);
    assert.equal(bundleFacts({ ...a, tlsCert: b.tlsCert, tlsKey: b.tlsKey }).serving?.issuedByCa, false);
    assert.equal(bundleFacts({ ...a, caKey: b.caKey }).ca?.keyMatches, false);
    assert.deepEqual(bundleFacts({ caCert: 'not a certificate', tlsCert: '' }), {});
  });
});
