// TLS with `tlsMode: cert-manager`: a cert-manager Certificate writes the Secret (tls.crt, tls.key,
// ca.crt) and renews it, and cainjector copies its CA into the webhook configuration (annotation
// cert-manager.io/inject-ca-from). We never write the Secret: we watch it and serve whatever
// servable certificate it holds, swapping it in on every renewal.
import type { Logger } from 'pino';
import {
  CertificateHolder,
  type CertificateSource,
  type ServingCertificate,
  servingCertificateFrom,
} from '../pki/certificate-source.ts';
import type { SecretWatch, StoredTlsBundle, TlsSecretStore } from './webhook-tls-store.ts';

export class CertManagerTls implements CertificateSource {
  private readonly store: TlsSecretStore;
  private readonly logger: Logger;
  private readonly holder = new CertificateHolder();
  private watch: SecretWatch | undefined;

  constructor(options: { store: TlsSecretStore; logger: Logger }) {
    this.store = options.store;
    this.logger = options.logger;
  }

  current(): ServingCertificate | undefined {
    return this.holder.current();
  }

  onChange(listener: (certificate: ServingCertificate) => void): void {
    this.holder.onChange(listener);
  }

  async start(): Promise<ServingCertificate> {
    const first = new Promise<ServingCertificate>((resolve) => this.holder.onChange(resolve));
    this.watch = this.store.watch(
      (secret) => this.observed(secret),
      (reason, error) => {
        if (error !== undefined)
          this.logger.warn({ reason, err: error.message }, 'watch on the TLS Secret restarted');
      },
    );
    await this.watch.start();
    if (this.holder.current() === undefined) {
      this.logger.warn(
        { secret: this.store.description },
        'waiting for cert-manager to issue the webhook certificate: check the Certificate and its Issuer',
      );
    }
    return first;
  }

  stop(): void {
    this.watch?.stop();
  }

  private observed(secret: StoredTlsBundle | undefined): void {
    // Deleted or half-written: keep serving the certificate we have until cert-manager reissues.
    const certificate = secret === undefined ? undefined : servingCertificateFrom(secret.bundle);
    if (certificate === undefined) return;
    if (this.holder.offer(certificate)) {
      this.logger.info(
        {
          secret: this.store.description,
          serial: certificate.serial,
          notAfter: certificate.notAfter.toISOString(),
        },
        'serving the certificate cert-manager issued',
      );
    }
  }
}
