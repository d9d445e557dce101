// Keeps the issuer's CA certificate published in a ConfigMap (ca.crt only) for portals, so that
// nothing ever needs to read the TLS Secret, which also holds the CA key. It follows the serving
// certificate: a new CA (the self-managed one re-created, cert-manager's rotated) is published
// when the server starts serving under it, and the ConfigMap is re-checked now and then so that
// an edit or a deletion is repaired. Without a CA in the Secret (a cert-manager issuer that
// writes no ca.crt) there is nothing to publish: the CA then comes from that issuer.
import type { Logger } from 'pino';
import type { CaConfigMapStore } from '../kube/ca-configmap.ts';
import type { CertificateSource } from '../pki/certificate-source.ts';
import { CoalescedRun } from '../runtime/coalesced-run.ts';

const RECHECK_MS = 10 * 60_000;
const MAX_RETRY_DELAY_MS = 30_000;

interface CaPublisher {
  stop(): void;
}

export function publishServingCa(
  source: CertificateSource,
  store: Pick<CaConfigMapStore, 'publish' | 'description'>,
  logger: Logger,
  options: { recheckMs?: number } = {},
): CaPublisher {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let warnedMissing = false;
  const run: CoalescedRun = new CoalescedRun({
    pass: async () => {
      const caPem = source.current()?.caPem;
      if (caPem === undefined) {
        if (!warnedMissing && source.current() !== undefined) {
          warnedMissing = true;
          logger.warn(
            { configMap: store.description },
            'the issuer TLS Secret holds no ca.crt: portals must get the CA from the certificate issuer',
          );
        }
        return;
      }
      const result = await store.publish(caPem);
      if (result !== 'unchanged')
        logger.info({ configMap: store.description, result }, 'issuer CA published');
    },
    onError: (error, failures) =>
      logger.error(
        { err: error.message, failures, configMap: store.description },
        'cannot publish the issuer CA',
      ),
    onSettled: () => {
      if (stopped) return;
      if (timer !== undefined) clearTimeout(timer);
      const delay =
        run.failures > 0
          ? Math.min(MAX_RETRY_DELAY_MS, 500 * 2 ** Math.min(run.failures, 6))
          : (options.recheckMs ?? RECHECK_MS);
      timer = setTimeout(() => run.request(), delay);
      timer.unref();
    },
    isStopped: () => stopped,
  });
  source.onChange(() => run.request());
  run.request();
  return {
    stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}
