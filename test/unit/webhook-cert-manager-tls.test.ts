// tlsMode cert-manager: we never write the Secret, we serve what cert-manager puts in it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pino } from 'pino';
import { createBundle, renewServing, servingNames, type Wanted } from '../../src/pki/serving-bundle.ts';
import { CertManagerTls } from '../../src/webhook/cert-manager-tls.ts';
import { MemoryStore } from './support/memory-tls-store.ts';

const wanted: Wanted = {
  names: servingNames({ service: 'w', namespace: 'n' }),
  servingLifetimeMs: 3_600_000,
};

describe('CertManagerTls', () => {
  test('waits for the Secret, serves it, follows renewals, ignores half-written or deleted Secrets', async () => {
    const store = new MemoryStore();
    const tls = new CertManagerTls({ store, logger: pino({ level: 'silent' }) });
    try {
      let served = false;
      const first = tls.start().then((certificate) => {
        served = true;
        return certificate;
      });
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(served, false, 'nothing to serve before cert-manager writes the Secret');

      // cert-manager writes tls.crt, tls.key and ca.crt (no CA key).
      const issued = await createBundle(wanted, new Date());
      store.replace({ caCert: issued.caCert, tlsCert: issued.tlsCert, tlsKey: issued.tlsKey });
      const initial = await first;
      assert.equal(initial.certPem, issued.tlsCert);
      assert.equal(initial.caPem, issued.caCert);

      const renewed = await renewServing(issued, wanted, new Date());
      store.replace({ caCert: renewed.caCert, tlsCert: renewed.tlsCert, tlsKey: renewed.tlsKey });
      assert.equal(tls.current()?.certPem, renewed.tlsCert);

      store.replace({ caCert: renewed.caCert, tlsCert: issued.tlsCert, tlsKey: renewed.tlsKey });
      assert.equal(tls.current()?.certPem, renewed.tlsCert, 'a key that does not fit is not served');
      store.replace(undefined);
      assert.equal(tls.current()?.certPem, renewed.tlsCert, 'a deleted Secret leaves the last certificate');
      assert.equal(store.writes, 0, 'never writes');
    } finally {
      tls.stop();
    }
  });
});
