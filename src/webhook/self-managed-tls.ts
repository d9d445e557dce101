// Self-managed TLS for the webhook: the CA and serving certificate live in one Secret that every
// replica shares. Each replica reconciles it the same way (read, judge, write only on need, with
// the resourceVersion it read), so the first writer wins and the others adopt its result; each
// also watches the Secret, so a renewal made by any replica is served by all of them within
// moments, long before the previous certificate (a third of its lifetime left) expires.

import type { Logger } from 'pino';
import {
  CertificateHolder,
  type CertificateSource,
  type ServingCertificate,
  servingCertificateFrom,
} from '../pki/certificate-source.ts';
import {
  bundleFacts,
  createBundle,
  judgeBundle,
  nextCheckDelay,
  renewServing,
  type Wanted,
} from '../pki/serving-bundle.ts';
import { CoalescedRun } from '../runtime/coalesced-run.ts';
import { isAlreadyExists } from '../runtime/kube-error.ts';
import type { SecretWatch, StoredTlsBundle, TlsSecretStore } from './webhook-tls-store.ts';

const MAX_CONFLICTS = 5;
const MAX_RETRY_DELAY_MS = 30_000;

interface SelfManagedTlsOptions {
  store: TlsSecretStore;
  wanted: Wanted;
  logger: Logger;
  /** The clock, for tests. */
  now?: () => Date;
}

export class SelfManagedTls implements CertificateSource {
  private readonly store: TlsSecretStore;
  private readonly wanted: Wanted;
  private readonly logger: Logger;
  private readonly now: () => Date;
  private readonly holder = new CertificateHolder();
  private watch: SecretWatch | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly run = new CoalescedRun({
    pass: () => this.reconcileOnce(),
    // Keep serving what we have; the certificate in hand has a third of its life left.
    onError: (error, failures) =>
      this.logger.error({ err: error.message, failures }, 'cannot reconcile the webhook TLS Secret'),
    onSettled: () => this.schedule(),
    isStopped: () => this.stopped,
  });
  private stopped = false;

  constructor(options: SelfManagedTlsOptions) {
    this.store = options.store;
    this.wanted = options.wanted;
    this.logger = options.logger;
    this.now = options.now ?? (() => new Date());
  }

  current(): ServingCertificate | undefined {
    return this.holder.current();
  }

  onChange(listener: (certificate: ServingCertificate) => void): void {
    this.holder.onChange(listener);
  }

  start(): Promise<ServingCertificate> {
    const first = new Promise<ServingCertificate>((resolve) => {
      const existing = this.holder.current();
      if (existing !== undefined) resolve(existing);
      else this.holder.onChange(resolve);
    });
    this.watch = this.store.watch(
      (secret) => this.observed(secret),
      (reason, error) => {
        if (error !== undefined)
          this.logger.warn({ reason, err: error.message }, 'watch on the TLS Secret restarted');
      },
    );
    void this.watch.start();
    this.reconcile();
    return first;
  }

  stop(): void {
    this.stopped = true;
    this.watch?.stop();
    if (this.timer !== undefined) clearTimeout(this.timer);
  }

  /** Another replica (or a person) changed the Secret: serve it if it is good, else repair it. */
  private observed(secret: StoredTlsBundle | undefined): void {
    // Mid-reconcile (often our own write coming back): let the reconcile read the latest and decide.
    if (this.run.busy) {
      this.run.request();
      return;
    }
    if (
      secret !== undefined &&
      judgeBundle(bundleFacts(secret.bundle), this.wanted, this.now()).action === 'serve'
    ) {
      this.adopt(secret, 'adopted');
      this.schedule();
      return;
    }
    this.reconcile();
  }

  /** Runs reconcileOnce, one at a time; a request that comes in meanwhile runs once more after. */
  private reconcile(): void {
    this.run.request();
  }

  private async reconcileOnce(): Promise<void> {
    for (let attempt = 0; attempt < MAX_CONFLICTS; attempt++) {
      const stored = await this.store.read();
      if (stored === undefined) {
        const bundle = await createBundle(this.wanted, this.now());
        try {
          this.adopt(await this.store.create(bundle), 'created');
          return;
        } catch (error) {
          if (isAlreadyExists(error)) continue; // another replica was first: adopt its Secret
          throw error;
        }
      }
      const verdict = judgeBundle(bundleFacts(stored.bundle), this.wanted, this.now());
      if (verdict.action === 'serve') {
        this.adopt(stored, 'adopted');
        return;
      }
      const { caCert, caKey } = stored.bundle;
      const next =
        verdict.action === 'renew' && caCert !== undefined && caKey !== undefined
          ? await renewServing({ caCert, caKey }, this.wanted, this.now())
          : await createBundle(this.wanted, this.now());
      try {
        this.adopt(
          await this.store.update(next, stored.resourceVersion),
          verdict.action === 'renew' ? 'renewed' : 'recreated',
          verdict.why,
        );
        return;
      } catch (error) {
        if (isAlreadyExists(error)) continue; // 409 Conflict: someone wrote first; judge theirs
        throw error;
      }
    }
    throw new Error(`${this.store.description} kept changing under us (${MAX_CONFLICTS} conflicts in a row)`);
  }

  private adopt(
    secret: StoredTlsBundle,
    how: 'created' | 'adopted' | 'renewed' | 'recreated',
    why?: string,
  ): void {
    const certificate = servingCertificateFrom(secret.bundle);
    if (certificate === undefined) return;
    if (this.holder.offer(certificate)) {
      this.logger.info(
        {
          secret: this.store.description,
          how,
          why,
          serial: certificate.serial,
          notAfter: certificate.notAfter.toISOString(),
        },
        'serving webhook certificate',
      );
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    const current = this.holder.current();
    const delay =
      this.run.failures > 0 || current === undefined
        ? Math.min(MAX_RETRY_DELAY_MS, 500 * 2 ** Math.min(this.run.failures, 6))
        : nextCheckDelay(current, this.now());
    this.timer = setTimeout(() => this.reconcile(), delay);
    this.timer.unref();
  }
}
