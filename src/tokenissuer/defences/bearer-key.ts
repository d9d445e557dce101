// The name the issuer remembers a bearer token by: HMAC-SHA256 under a key drawn once per process
// and never stored, so the caches hold no token and nothing a heap dump could test a guessed or
// stolen token against. A cache lookup compares these keys, never the tokens themselves.
import { createHmac, randomBytes } from 'node:crypto';

type BearerKeyer = (token: string) => string;

export function bearerKeyer(secret: Buffer = randomBytes(32)): BearerKeyer {
  return (token) => createHmac('sha256', secret).update(token, 'utf8').digest('base64url');
}
