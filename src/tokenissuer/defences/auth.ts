// Who is calling, and may they use a flavor?
//   AuthN: the bearer token is a JWT from the configured issuer (checked with jose against a JWKS
//          file or an HS256 shared secret, with issuer, audience and expiry), or else a Kubernetes
//          token checked with a TokenReview for the issuer's own audience (never the API
//          server's: a token valid here must be useless against the API server). A JWT naming
//          another issuer (e.g. a ServiceAccount token) goes to the TokenReview.
//   AuthZ: Kubernetes callers need RBAC verb `use` on flavorclasses.nodeflavor.io/<flavor>
//          (SubjectAccessReview); JWT callers need the flavor in the configured claim.
// Answers are cached for a few seconds: identities keyed by a keyed hash of the token (never the
// token itself), SubjectAccessReviews by everything the review depends on. Which bearers may cost a
// review at all is auth-budget.ts's decision; concurrent requests with one bearer share one review.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { decodeJwt, type JWTPayload, jwtVerify } from 'jose';
import { FLAVOR_CLASS_PLURAL, FLAVORED_TOKEN_PLURAL, GROUP } from '../../flavor/resources.ts';
import type { KubeUser, ResourceCheck, ReviewedToken } from '../../kube/reviews.ts';
import type { IssuerConfig } from '../config.ts';
import { IssuerError } from '../errors.ts';
import { AuthBudget, type BudgetSettings, type Ticket } from './auth-budget.ts';
import { bearerKeyer } from './bearer-key.ts';
import { BoundedCache } from './bounded-cache.ts';
import { JwksFile } from './jwks-file.ts';

export interface Caller {
  /**
   * A name for logs, messages and the requested-by annotation; never a credential, and never the
   * key of anything kept per caller: for JWT callers it comes from a configurable claim that two
   * subjects may share, and a Kubernetes name outlives the ServiceAccount it named. Use `owner`.
   */
  username: string;
  via: 'kubernetes' | 'jwt';
  kubeUser?: KubeUser;
  /** JWT callers: the flavors the claim grants. */
  flavors?: ReadonlySet<string>;
  /**
   * The caller's identity: a digest of the Kubernetes username and uid, or of the JWT's iss and
   * sub. Everything kept per caller is keyed by it (the tokens it owns, recorded on each
   * FlavoredToken; its rate limit, watch slots and idempotent answers), so a ServiceAccount
   * re-created under the same name, or another subject with the same username claim, is someone
   * else. Not a credential.
   */
  owner: string;
}

/** The Kubernetes reviews auth needs (KubeReviews implements it). */
export interface Reviews {
  reviewToken(token: string, audiences: string[]): Promise<ReviewedToken | undefined>;
  userCan(user: KubeUser, check: ResourceCheck): Promise<boolean>;
}

/** What a review (TokenReview or JWT verification) found; `error`: it could not be made. */
type ReviewResult = 'valid' | 'invalid' | 'error';

interface AuthOptions {
  /** The failed-authentication budget per client address (default: none). */
  budget?: Pick<BudgetSettings, 'perAddress' | 'knownMs' | 'maxKeys'>;
  /** Told of every review made (for metrics). */
  onReview?: (result: ReviewResult) => void;
}

export interface CallerAuth {
  /**
   * The caller behind an Authorization header, sent from client address key `address`;
   * IssuerError Unauthenticated, or RateLimited when the address has used up its budget.
   */
  authenticate(authorization: string | undefined, address?: string): Promise<Caller>;
  mayUse(caller: Caller, flavor: string): Promise<boolean>;
  /**
   * Whether the caller may `verb` FlavoredToken `name` whoever issued it: RBAC on
   * flavoredtokens.nodeflavor.io (SubjectAccessReview). JWT callers never may: they manage the
   * tokens they issued, and administrators use kubectl with their RBAC.
   */
  mayManageAny(caller: Caller, verb: 'get' | 'delete' | 'list', name?: string): Promise<boolean>;
}

const BEARER_PATTERN = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
const MAX_TOKEN_LENGTH = 16_384;
const ASYMMETRIC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
];
const MIN_HS256_SECRET_BYTES = 32;
const CACHE_ENTRIES = 10_000;

export function bearerToken(authorization: string | undefined): string {
  if (authorization === undefined || authorization === '') {
    throw new IssuerError('Unauthenticated', 'authentication required: send Authorization: Bearer <token>');
  }
  const match = authorization.length <= MAX_TOKEN_LENGTH + 16 ? BEARER_PATTERN.exec(authorization) : null;
  if (!match?.[1]) {
    throw new IssuerError('Unauthenticated', 'malformed Authorization header: expected Bearer <token>');
  }
  return match[1];
}

type JwtConfig = NonNullable<IssuerConfig['auth']['jwt']>;

interface JwtVerifier {
  issuer: string;
  verify(token: string): Promise<Caller | undefined>;
}

function jwtVerifier(config: JwtConfig, now: () => number): JwtVerifier {
  let key: JwksFile | Uint8Array;
  let algorithms: string[];
  if (config.jwksFile) {
    key = new JwksFile(config.jwksFile, { refreshMs: config.jwksRefreshSeconds * 1000, now });
    algorithms = ASYMMETRIC_ALGORITHMS;
  } else {
    // A trailing newline is an artefact of how the file was written, not part of the secret.
    const secret = new TextEncoder().encode(
      readFileSync(config.hs256SecretFile ?? '', 'utf8').replace(/\r?\n$/, ''),
    );
    if (secret.length < MIN_HS256_SECRET_BYTES) {
      throw new Error(`auth.jwt.hs256SecretFile must hold at least ${MIN_HS256_SECRET_BYTES} bytes`);
    }
    key = secret;
    algorithms = ['HS256'];
  }
  return {
    issuer: config.issuer,
    async verify(token) {
      let payload: JWTPayload;
      try {
        const options = {
          issuer: config.issuer,
          audience: config.audience,
          algorithms,
          // `sub` is the identity (owner): a token without one names nobody in particular.
          requiredClaims: ['exp', 'sub'],
          clockTolerance: 30,
        };
        ({ payload } =
          key instanceof Uint8Array
            ? await jwtVerify(token, key, options)
            : await jwtVerify(token, key.getKey, options));
      } catch {
        return undefined;
      }
      // Never a fallback to the username claim: that claim is configurable and not unique, so
      // two subjects sharing it would share an owner, and with it each other's tokens.
      const subject = payload.sub;
      if (typeof subject !== 'string' || subject === '') return undefined;
      const username = payload[config.usernameClaim];
      if (typeof username !== 'string' || username === '') return undefined;
      const claim = payload[config.flavorsClaim];
      const flavors = Array.isArray(claim) ? claim.filter((f): f is string => typeof f === 'string') : [];
      return {
        username: `jwt:${username}`,
        via: 'jwt',
        flavors: new Set(flavors),
        owner: jwtOwner(config.issuer, subject),
      };
    },
  };
}

function unverifiedIssuer(token: string): string | undefined {
  try {
    return decodeJwt(token).iss;
  } catch {
    return undefined;
  }
}

function ownerOf(parts: string[]): string {
  return `sha256:${createHash('sha256').update(JSON.stringify(parts)).digest('base64url')}`;
}

/** The owner digest of a JWT subject: its issuer and `sub`, never a configurable claim. */
export function jwtOwner(issuer: string, subject: string): string {
  return ownerOf(['jwt', issuer, subject]);
}

/** The owner digest of a Kubernetes user (exported for tests and tools that record tokens). */
export function kubernetesOwner(user: Pick<KubeUser, 'username' | 'uid'>): string {
  return ownerOf(['kubernetes', user.username, user.uid ?? '']);
}

/**
 * Everything a SubjectAccessReview depends on: user, uid, groups and extra (order-free), and the
 * attributes checked. Two callers differing in any of them never share an answer.
 */
function reviewCacheKey(user: KubeUser, check: ResourceCheck): string {
  const extra = Object.keys(user.extra)
    .sort()
    .map((key) => [key, [...(user.extra[key] ?? [])].sort()]);
  return JSON.stringify([
    user.username,
    user.uid ?? '',
    [...user.groups].sort(),
    extra,
    check.group,
    check.resource,
    check.verb,
    check.name ?? '',
  ]);
}

export function createCallerAuth(
  config: IssuerConfig['auth'],
  reviews: Reviews | undefined,
  now: () => number = Date.now,
  options: AuthOptions = {},
): CallerAuth {
  const jwt = config.jwt ? jwtVerifier(config.jwt, now) : undefined;
  const tokenReview = config.tokenReview.enabled ? reviews : undefined;
  const audiences = config.tokenReview.audiences;
  const cacheMs = config.cacheSeconds * 1000;
  const budget = new AuthBudget<Caller>({
    cacheMs,
    knownMs: options.budget?.knownMs ?? 0,
    maxKeys: options.budget?.maxKeys ?? CACHE_ENTRIES,
    ...(options.budget?.perAddress ? { perAddress: options.budget.perAddress } : {}),
  });
  const keyOf = bearerKeyer();
  /** Reviews in flight by bearer key: a second request with the same bearer waits for the first. */
  const inFlight = new Map<string, Promise<Caller | undefined>>();
  const decisions = new BoundedCache<string, boolean>(CACHE_ENTRIES);

  async function identify(token: string): Promise<Caller | undefined> {
    if (jwt && unverifiedIssuer(token) === jwt.issuer) return jwt.verify(token);
    if (!tokenReview) return undefined;
    const reviewed = await tokenReview.reviewToken(token, audiences);
    // An authenticator that ignores the requested audiences answers without them: refuse, or a
    // token meant for the API server would be accepted here.
    if (!reviewed?.audiences.some((a) => audiences.includes(a))) return undefined;
    const user = reviewed.user;
    return { username: user.username, via: 'kubernetes', kubeUser: user, owner: kubernetesOwner(user) };
  }

  /**
   * SubjectAccessReviews in flight by cache key: requests of one caller arriving together (or
   * when its cached answer expires under load) share one review instead of each making its own.
   */
  const decisionsInFlight = new Map<string, Promise<boolean>>();

  async function userCan(user: KubeUser, check: ResourceCheck): Promise<boolean> {
    if (!reviews) return false;
    const key = reviewCacheKey(user, check);
    const cached = cacheMs > 0 ? decisions.get(key, now()) : undefined;
    if (cached !== undefined) return cached;
    if (cacheMs <= 0) return reviews.userCan(user, check);
    const pending = decisionsInFlight.get(key);
    if (pending) return pending;
    const decided = (async () => {
      try {
        const allowed = await reviews.userCan(user, check);
        decisions.set(key, allowed, cacheMs, now());
        return allowed;
      } finally {
        decisionsInFlight.delete(key);
      }
    })();
    decisionsInFlight.set(key, decided);
    return decided;
  }

  function review(token: string, ticket: Ticket): Promise<Caller | undefined> {
    const reviewed = (async () => {
      try {
        const caller = await identify(token);
        if (caller) budget.valid(ticket, caller, now());
        else budget.invalid(ticket, now());
        options.onReview?.(caller ? 'valid' : 'invalid');
        return caller;
      } catch (error) {
        budget.unanswered(ticket, now());
        options.onReview?.('error');
        throw error;
      } finally {
        inFlight.delete(ticket.bearer);
      }
    })();
    inFlight.set(ticket.bearer, reviewed);
    return reviewed;
  }

  const invalid = () => new IssuerError('Unauthenticated', 'the bearer token is invalid or expired');
  const found = (caller: Caller | undefined): Caller => {
    if (!caller) throw invalid();
    return caller;
  };

  return {
    async authenticate(authorization, address = '') {
      const token = bearerToken(authorization);
      const bearer = keyOf(token);
      const pending = inFlight.get(bearer);
      if (pending) return found(await pending);
      const admission = budget.admit(bearer, address, now());
      switch (admission.kind) {
        case 'cached':
          return admission.caller;
        case 'refused':
          throw invalid();
        case 'limited':
          throw new IssuerError(
            'RateLimited',
            `too many failed authentications from your address: retry in ${admission.retryAfterSeconds} s`,
            undefined,
            { retryAfterSeconds: admission.retryAfterSeconds },
          );
      }
      return found(await review(token, admission.ticket));
    },

    async mayUse(caller, flavor) {
      if (caller.via === 'jwt') return caller.flavors?.has(flavor) ?? false;
      if (!caller.kubeUser) return false;
      return userCan(caller.kubeUser, {
        group: GROUP,
        resource: FLAVOR_CLASS_PLURAL,
        verb: 'use',
        name: flavor,
      });
    },

    async mayManageAny(caller, verb, name) {
      if (caller.via === 'jwt' || !caller.kubeUser) return false;
      return userCan(caller.kubeUser, {
        group: GROUP,
        resource: FLAVORED_TOKEN_PLURAL,
        verb,
        ...(name ? { name } : {}),
      });
    },
  };
}
