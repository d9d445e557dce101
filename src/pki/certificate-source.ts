// Where the webhook's serving certificate comes from, whichever way it is managed (our own CA in
// self-managed-tls.ts, or cert-manager in cert-manager-tls.ts): the current certificate and a
// change notification, so the server swaps its TLS context and the registration its caBundle
// without a restart.
import { bundleFacts, type TlsBundle } from './serving-bundle.ts';

export interface ServingCertificate {
  certPem: string;
  keyPem: string;
  /** The CA to trust for it (the caBundle); absent when the Secret has no ca.crt. */
  caPem?: string;
  serial: string;
  notBefore: Date;
  notAfter: Date;
}

export interface CertificateSource {
  /** Resolves with the first servable certificate (waits for it as long as it takes). */
  start(): Promise<ServingCertificate>;
  current(): ServingCertificate | undefined;
  onChange(listener: (certificate: ServingCertificate) => void): void;
  stop(): void;
}

/** The servable part of a stored bundle: a readable certificate with its own key, else undefined. */
export function servingCertificateFrom(bundle: Partial<TlsBundle>): ServingCertificate | undefined {
  const { serving } = bundleFacts(bundle);
  if (
    serving === undefined ||
    !serving.keyMatches ||
    bundle.tlsCert === undefined ||
    bundle.tlsKey === undefined
  ) {
    return undefined;
  }
  const certificate: ServingCertificate = {
    certPem: bundle.tlsCert,
    keyPem: bundle.tlsKey,
    serial: serving.serial,
    notBefore: serving.notBefore,
    notAfter: serving.notAfter,
  };
  if (bundle.caCert !== undefined && bundle.caCert !== '') certificate.caPem = bundle.caCert;
  return certificate;
}

/** Holds the current certificate and tells listeners when another one (by serial or CA) replaces it. */
export class CertificateHolder {
  private certificate: ServingCertificate | undefined;
  private readonly listeners: ((certificate: ServingCertificate) => void)[] = [];

  current(): ServingCertificate | undefined {
    return this.certificate;
  }

  onChange(listener: (certificate: ServingCertificate) => void): void {
    this.listeners.push(listener);
  }

  /** Returns whether it was a change. */
  offer(certificate: ServingCertificate): boolean {
    const previous = this.certificate;
    if (
      previous !== undefined &&
      previous.serial === certificate.serial &&
      previous.caPem === certificate.caPem
    ) {
      return false;
    }
    this.certificate = certificate;
    for (const listener of this.listeners) listener(certificate);
    return true;
  }
}
