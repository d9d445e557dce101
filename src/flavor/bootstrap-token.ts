// Kubernetes bootstrap tokens (`<id>.<secret>`, https://kubernetes.io/docs/reference/access-authn-authz/bootstrap-tokens/).
// The ID is public: it appears in the username `system:bootstrap:<id>` and in the Secret name.
// The secret part is wrapped in `Secret` so it never reaches a log line.
import { randomBytes as cryptoRandomBytes } from 'node:crypto';
import { Secret } from './secret.ts';

/** A source of random bytes; `crypto.randomBytes` in production, a deterministic fake in tests. */
export type RandomBytes = (size: number) => Buffer;

export const TOKEN_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
export const TOKEN_ID_LENGTH = 6;
export const TOKEN_SECRET_LENGTH = 16;
export const TOKEN_ID_PATTERN = /^[a-z0-9]{6}$/;
export const TOKEN_SECRET_PATTERN = /^[a-z0-9]{16}$/;

const TOKEN_PATTERN = /^([a-z0-9]{6})\.([a-z0-9]{16})$/;
const BOOTSTRAP_SECRET_NAME_PREFIX = 'bootstrap-token-';

export interface BootstrapToken {
  id: string;
  secret: Secret;
}

/**
 * A uniformly random string over `alphabet`. Rejection sampling: a byte is used only when it is
 * below the largest multiple of the alphabet size that fits in a byte (252 for 36 characters),
 * so `byte % size` hits every character equally often; larger bytes are consumed and discarded.
 * Plain `byte % 36` would make the first 4 characters 8/7 as likely as the other 32 (256 = 7·36 + 4).
 */
export function randomString(alphabet: string, length: number, randomBytes: RandomBytes): string {
  const size = alphabet.length;
  if (size < 2 || size > 256 || new Set(alphabet).size !== size) {
    throw new Error('randomString: the alphabet must have 2 to 256 distinct characters');
  }
  if (!Number.isSafeInteger(length) || length < 0) {
    throw new Error('randomString: length must be a non-negative integer');
  }
  const acceptBelow = Math.floor(256 / size) * size;
  let result = '';
  while (result.length < length) {
    // Ask for what is still missing; rejected bytes are rare, so one round is the usual case.
    for (const byte of randomBytes(length - result.length)) {
      if (byte >= acceptBelow) continue;
      result += alphabet[byte % size];
      if (result.length === length) break;
    }
  }
  return result;
}

export function generateBootstrapToken(randomBytes: RandomBytes = cryptoRandomBytes): BootstrapToken {
  const id = randomString(TOKEN_ALPHABET, TOKEN_ID_LENGTH, randomBytes);
  const secret = new Secret(randomString(TOKEN_ALPHABET, TOKEN_SECRET_LENGTH, randomBytes));
  return { id, secret };
}

/** `<id>.<secret>`, the form kubeadm and the API server's bootstrap authenticator expect. */
export function formatBootstrapToken(token: BootstrapToken): string {
  return `${token.id}.${token.secret.reveal()}`;
}

/** Parses `<id>.<secret>`. The error never echoes the input: it may be a real token. */
export function parseBootstrapToken(text: string): BootstrapToken {
  const match = typeof text === 'string' ? TOKEN_PATTERN.exec(text) : null;
  if (!match) {
    throw new Error(
      'invalid bootstrap token: expected <id>.<secret> with a 6-character id and a 16-character secret, ' +
        'both of lowercase letters and digits',
    );
  }
  return { id: match[1]!, secret: new Secret(match[2]!) };
}

function assertTokenId(id: string): void {
  if (!TOKEN_ID_PATTERN.test(id)) {
    throw new Error('invalid bootstrap token id: expected 6 lowercase letters or digits');
  }
}

/** The kube-system Secret that holds the token; the API server looks it up by this name. */
export function bootstrapSecretName(id: string): string {
  assertTokenId(id);
  return BOOTSTRAP_SECRET_NAME_PREFIX + id;
}
