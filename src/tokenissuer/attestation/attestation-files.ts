// The files attested joins are configured with (ADR 0014), each read once and re-read when it
// changes (watched-file.ts): the TPM manufacturer CAs and CRLs an EK certificate is checked
// against (at issuance, and again at each challenge and answer), and the CA nodes trust the issuer
// with (put in the material). A rotated bundle takes effect without a restart, and no request
// reads a file synchronously.
import { type EkTrust, parseEkTrust } from '../../flavor/tpm/ek-certificate.ts';
import type { AttestationSettings } from '../config.ts';
import { IssuerError } from '../errors.ts';
import { WatchedFile } from './watched-file.ts';

export interface AttestationFiles {
  /** The configured manufacturer trust; undefined when no CA file is configured. */
  manufacturerTrust(): Promise<EkTrust | undefined>;
  /** The issuer CA the material pins; undefined when none is configured. */
  issuerCaPem(): Promise<string | undefined>;
}

interface Options {
  recheckMs?: number;
  onError?: (path: string, error: Error) => void;
}

type FileSettings = Pick<AttestationSettings, 'manufacturerCaFile' | 'manufacturerCrlFile' | 'issuerCaFile'>;

export function attestationFiles(settings: FileSettings, options: Options = {}): AttestationFiles {
  const watch = <T>(path: string | undefined, parse: (bytes: Buffer) => T) =>
    path === undefined ? undefined : new WatchedFile(path, parse, options);
  const cas = watch(settings.manufacturerCaFile, (bytes) => bytes.toString('utf8'));
  const crls = watch(settings.manufacturerCrlFile, (bytes) => bytes);
  const issuerCa = watch(settings.issuerCaFile, (bytes) => bytes.toString('utf8'));
  // Parsed again only when either file's content was read again; content that does not parse
  // keeps the last good trust (reported), and is not parsed again until it changes.
  let good: { pem: string; crls: Buffer | undefined; trust: EkTrust } | undefined;
  let bad: { pem: string; crls: Buffer | undefined; error: Error } | undefined;
  return {
    async manufacturerTrust() {
      if (!cas) return undefined;
      const [pem, crlBytes] = await Promise.all([
        read(cas, 'TPM manufacturer CA file'),
        crls ? read(crls, 'TPM manufacturer CRL file') : undefined,
      ]);
      const seen = (v: { pem: string; crls: Buffer | undefined } | undefined) =>
        v?.pem === pem && v.crls === crlBytes;
      if (!seen(good) && !seen(bad)) {
        try {
          const trust = await parseEkTrust({ certificatesPem: pem, ...(crlBytes ? { crls: crlBytes } : {}) });
          good = { pem, crls: crlBytes, trust };
        } catch (error) {
          bad = { pem, crls: crlBytes, error: error as Error };
          if (good) options.onError?.(settings.manufacturerCaFile ?? '', error as Error);
        }
      }
      if (good) return good.trust;
      throw new IssuerError(
        'Internal',
        `the TPM manufacturer CAs (${settings.manufacturerCaFile}) cannot be used: ${bad?.error.message}`,
      );
    },
    async issuerCaPem() {
      return issuerCa ? read(issuerCa, 'attestation CA file') : undefined;
    },
  };
}

async function read<T>(file: WatchedFile<T>, what: string): Promise<T> {
  try {
    return await file.current();
  } catch (error) {
    throw new IssuerError(
      'Internal',
      `cannot read the ${what} ${file.path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
}

const shared = new Map<string, AttestationFiles>();

/** One per set of paths, for callers that hold none of their own (the CLI, tests). */
export function sharedAttestationFiles(settings: FileSettings): AttestationFiles {
  const key = JSON.stringify([
    settings.manufacturerCaFile,
    settings.manufacturerCrlFile,
    settings.issuerCaFile,
  ]);
  let files = shared.get(key);
  if (!files) {
    files = attestationFiles(settings);
    shared.set(key, files);
  }
  return files;
}
