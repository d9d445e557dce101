// @peculiar/x509 (with reflect-metadata and node's WebCrypto), loaded on first use rather than at
// start: a controller that sees no join and an issuer that checks no EK certificate hold none of
// its ~5 MiB (bench/RESULTS.md, P4).
import { webcrypto } from 'node:crypto';
import type * as X509 from '@peculiar/x509';

let library: Promise<typeof X509> | undefined;

export function loadX509(): Promise<typeof X509> {
  library ??= (async () => {
    await import('reflect-metadata');
    const x509 = await import('@peculiar/x509');
    x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
    return x509;
  })();
  return library;
}
