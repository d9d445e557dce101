// The token issuer's configuration: one object, parsed once with zod at start-up and passed down.
// Every field has a safe default except the TLS material. Secrets are referenced by file path
// (the JWT shared secret) so that the parsed config can be logged without leaking them.
// The exported field schemas are the one definition of each setting's bound and default:
// `nodeflavor run` builds its flags from them (src/config.ts), so the two cannot drift.
import { z } from 'zod';
import { DEFAULT_TTL, parseDuration, TtlSchema } from '../flavor/resources.ts';
import { DEFAULT_KEY_SECRET_NAME } from '../kube/keyring-store.ts';
import { ATTESTATION_URL_PATTERN } from './attestation/attest-script.ts';
import { isAddressOrCidr } from './defences/client-address.ts';
import {
  DEFAULT_DISCOVERY_KUBECONFIG_PATH,
  DEFAULT_DISCOVERY_MODE,
  DISCOVERY_MODES,
  isDiscoveryPath,
} from './issuance/discovery-kubeconfig.ts';

/**
 * nodeflavor's own bootstrap group: every flavor's token carries exactly this one
 * (indistinguishability). kube-controller-manager's auto-approval covers kubeadm's group, not
 * this one, so nodeflavor is the only approver of its tokens' kubelet CSRs: a token holder cannot
 * get a certificate for a node name nodeflavor has not bound to its token (name squatting).
 */
export const DEFAULT_AUTH_EXTRA_GROUP = 'system:bootstrappers:nodeflavor';
/** kubeadm's group, whose kubelet CSRs kube-controller-manager auto-approves. */
export const KUBEADM_BOOTSTRAP_GROUP = 'system:bootstrappers:kubeadm:default-node-token';
/** The bootstrap Secret's description: the same text for every flavor. */
export const DEFAULT_SECRET_DESCRIPTION = 'nodeflavor join token';
/** What a JWT configuration holds unless told otherwise. */
export const JWT_DEFAULTS = {
  flavorsClaim: 'nodeflavor.io/flavors',
  usernameClaim: 'sub',
  jwksRefreshSeconds: 60,
} as const;
/**
 * The audience a Kubernetes token must be issued for (`kubectl create token --audience`), so a
 * portal never hands the issuer a token that is also valid against the API server.
 */
export const DEFAULT_ISSUER_AUDIENCE = 'nodeflavor-issuer';

/**
 * The highest maxClusterInfoSignatures allowed: 425 KB of signature values, 40 % of the 1 MiB a
 * ConfigMap's values may total (12,325 signatures: bench/RESULTS.md), leaving room for what the
 * 10 s cached read, other replicas and tokens made elsewhere add.
 */
export const MAX_CLUSTER_INFO_SIGNATURES = 5_000;

/** The API server's rule for auth-extra-groups entries. */
const BOOTSTRAP_GROUP_RE = /^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$/;

const TlsFilesSchema = z.strictObject({ certFile: z.string().min(1), keyFile: z.string().min(1) });
/** Inline PEM, for tests and for callers that already hold the material in memory. */
const TlsPemSchema = z.strictObject({ certPem: z.string().min(1), keyPem: z.string().min(1) });

/** A token bucket: `capacity` requests in a burst, then `refillPerSecond` more each second. */
const bucketSchema = (defaults: { capacity: number; refillPerSecond: number }) =>
  z.strictObject({
    capacity: z.number().int().min(1).max(100_000).default(defaults.capacity),
    refillPerSecond: z.number().positive().max(100_000).default(defaults.refillPerSecond),
  });
/** Requests per authenticated caller. */
export const CallerBucketSchema = bucketSchema({ capacity: 30, refillPerSecond: 1 });
/** Failed authentications (reviews of bearers the issuer does not know) per client address. */
export const AuthFailureBucketSchema = bucketSchema({ capacity: 20, refillPerSecond: 1 });
/** Attestation requests (unauthenticated) from every address together, per issuer process. */
export const AttestationTotalBucketSchema = bucketSchema({ capacity: 100, refillPerSecond: 20 });

/** A headers timeout longer than the whole request's would never fire. */
export const headersWithinRequest = (c: { headersTimeoutSeconds: number; requestTimeoutSeconds: number }) =>
  c.headersTimeoutSeconds <= c.requestTimeoutSeconds;
/** A per-address cap above the total would never apply. */
export const perAddressWithinTotal = (c: { maxPerAddress: number; max: number }) => c.maxPerAddress <= c.max;

export const ConnectionsSchema = z
  .strictObject({
    /** The TLS handshake, and then a request's line and headers, must each arrive within this. */
    headersTimeoutSeconds: z
      .number()
      .min(0.1, 'must be at least 100ms')
      .max(300, 'must be at most 5m')
      .default(10),
    /** A whole request, body included, must arrive within this (from its first byte). */
    requestTimeoutSeconds: z
      .number()
      .min(0.1, 'must be at least 100ms')
      .max(600, 'must be at most 10m')
      .default(15),
    /**
     * A kept-alive connection with no request in flight is closed after this. Above the upstream
     * idle timeout of common proxies (ingress-nginx, cloud load balancers: 60 s), so that a proxy
     * never sends a request on a connection the issuer is closing.
     */
    idleTimeoutSeconds: z
      .number()
      .min(0.1, 'must be at least 100ms')
      .max(3_600, 'must be at most 1h')
      .default(65),
    /** Open connections per client socket address; trusted proxies are held to `max` only. */
    maxPerAddress: z.number().int().min(1).max(1_000_000).default(32),
    /** Open connections in all; beyond it new ones are closed at once (memory stays bounded). */
    max: z.number().int().min(1).max(1_000_000).default(1_024),
  })
  .refine(headersWithinRequest, {
    message: 'headersTimeoutSeconds must not be longer than requestTimeoutSeconds',
    path: ['headersTimeoutSeconds'],
  })
  .refine(perAddressWithinTotal, {
    message: 'maxPerAddress must not be larger than max',
    path: ['maxPerAddress'],
  });

/**
 * Proxies (IP addresses or CIDRs) whose X-Forwarded-For is believed: behind them the client's
 * address is the last one they forwarded. Empty: the socket's address, whatever the headers say.
 */
export const TrustedProxiesSchema = z
  .array(z.string().refine(isAddressOrCidr, { message: 'must be an IP address or a CIDR' }))
  .max(1000)
  .default([]);

/**
 * An audience callers' Kubernetes tokens must be issued for. Never the API server's own: a token a
 * portal sends here must be useless against the API server.
 */
export const AudienceSchema = z.string().min(1);

/** Either key source alone decides which tokens are genuine; both at once would be ambiguous. */
export const oneJwtKeySource = (jwt: {
  jwksFile?: string | undefined;
  hs256SecretFile?: string | undefined;
}) => (jwt.jwksFile === undefined) !== (jwt.hs256SecretFile === undefined);

export const JwtSchema = z
  .strictObject({
    issuer: z.string().min(1),
    audience: z.string().min(1),
    /** A JSON Web Key Set file (public keys; RS*, ES*, EdDSA). */
    jwksFile: z.string().min(1).optional(),
    /** A file holding the HS256 shared secret (at least 32 bytes). */
    hs256SecretFile: z.string().min(1).optional(),
    /** Claim listing the flavors the caller may use (an array of FlavorClass names). */
    flavorsClaim: z.string().min(1).default(JWT_DEFAULTS.flavorsClaim),
    /** Claim naming the caller, for logs, rate limits and the FlavoredToken's requested-by. */
    usernameClaim: z.string().min(1).default(JWT_DEFAULTS.usernameClaim),
    /** How often the JWKS file is re-read (a key missing from it triggers a re-read sooner). */
    jwksRefreshSeconds: z.number().int().min(1).max(86_400).default(JWT_DEFAULTS.jwksRefreshSeconds),
  })
  .refine(oneJwtKeySource, { message: 'set exactly one of jwksFile and hs256SecretFile' });

/** Attested joins (ADR 0014). Files are re-read when they change, so a rotated bundle needs no restart. */
export const AttestationSettingsSchema = z.strictObject({
  /** The https URL nodes reach the issuer at (its /v1/attestations endpoints); unset: no attested tokens. */
  url: z
    .string()
    .regex(ATTESTATION_URL_PATTERN, { message: 'must be a plain https URL, e.g. https://issuer.example.com' })
    .optional(),
  /** PEM file of the CA nodes trust the issuer's serving certificate with (else their system trust). */
  issuerCaFile: z.string().min(1).optional(),
  /**
   * PEM bundle of the TPM manufacturer CAs an EK certificate must chain to: the self-signed ones
   * are the trust anchors, the others intermediates to build paths through.
   */
  manufacturerCaFile: z.string().min(1).optional(),
  /** CRLs (PEM or one DER) of those CAs: a certificate on an EK certificate's path they revoke is refused. */
  manufacturerCrlFile: z.string().min(1).optional(),
  /** How long a node has to answer a challenge (the TPM's credential activation takes about a second). */
  challengeSeconds: z.number().int().min(5).max(600).default(60),
  /** How long the bootstrap token an attestation mints stays valid: time enough for `kubeadm join`. */
  joinWindowSeconds: z.number().int().min(60).max(86_400).default(900),
  /** Attestation requests (challenges and answers) per client address: unauthenticated, a node has nothing but its TPM. */
  perAddress: bucketSchema({ capacity: 10, refillPerSecond: 0.5 }).prefault({}),
  /** Attestation requests from all addresses together, per issuer process (a flood from many addresses). */
  total: AttestationTotalBucketSchema.prefault({}),
});
export type AttestationSettings = z.output<typeof AttestationSettingsSchema>;

/** How tokens are minted; the CLI parses the same schema so both paths mint identical tokens. */
export const IssuanceSettingsSchema = z
  .strictObject({
    authExtraGroups: z
      .string()
      .regex(BOOTSTRAP_GROUP_RE, { message: 'must match system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]' })
      .default(DEFAULT_AUTH_EXTRA_GROUP),
    secretDescription: z.string().max(256).default(DEFAULT_SECRET_DESCRIPTION),
    /** Applied when a request sets neither ttl nor expiresAt. */
    defaultTtl: TtlSchema.default(DEFAULT_TTL),
    /** The longest validity a request may ask for (ttl or expiresAt). */
    maxTtl: TtlSchema.default('168h'),
    /** host:port nodes join through; default: the server in kube-public/cluster-info. */
    apiServerEndpoint: z.string().min(1).optional(),
    /** Join material registers the node with the quarantine taint that only verification lifts. */
    quarantineTaint: z.boolean().default(true),
    /**
     * How kubeadm trusts the API server (discovery-kubeconfig.ts). `file`: the discovery kubeconfig
     * (CA and server) beside the JoinConfiguration, no signature in cluster-info. `token`: the CA
     * hash pin and the bootstrap signer's JWS, one per live token in cluster-info.
     */
    discovery: z.enum(DISCOVERY_MODES).default(DEFAULT_DISCOVERY_MODE),
    /** Where the JoinConfiguration expects the discovery kubeconfig on the node (file discovery). */
    discoveryKubeconfigPath: z
      .string()
      .refine(isDiscoveryPath, { message: 'must be an absolute file path (no URL, no . or .. segments)' })
      .default(DEFAULT_DISCOVERY_KUBECONFIG_PATH),
    /**
     * Token discovery only: issue nothing (503) while kube-public/cluster-info carries this many
     * JWS signatures or more (85 bytes of value each; past 12,325 the ConfigMap cannot be written at all
     * and every token-discovery join in the cluster fails, kubeadm's own included).
     */
    maxClusterInfoSignatures: z.number().int().min(1).max(MAX_CLUSTER_INFO_SIGNATURES).default(1_000),
    /** Attested joins (ADR 0014): tokens bound to a machine's TPM. Off until `url` is set. */
    attestation: AttestationSettingsSchema.prefault({}),
  })
  .refine((issuance) => parseDuration(issuance.defaultTtl) <= parseDuration(issuance.maxTtl), {
    message: 'defaultTtl must not be longer than maxTtl',
    path: ['defaultTtl'],
  });
export type IssuanceSettings = z.output<typeof IssuanceSettingsSchema>;

export const KeyRingSchema = z.strictObject({
  namespace: z.string().min(1).default('nodeflavor'),
  secretName: z.string().min(1).default(DEFAULT_KEY_SECRET_NAME),
  /** Create a ring when the Secret is missing on first install (no FlavoredToken exists). */
  createIfMissing: z.boolean().default(true),
});

/** The self-service page for node administrators at /portal/ (off unless asked for). */
export const PortalSchema = z.strictObject({ enabled: z.boolean().default(false) });

/** Every setting but the TLS material, which alone has no default. */
const IssuerSettingsSchema = z.strictObject({
  listen: z
    .strictObject({
      host: z.string().min(1).default('0.0.0.0'),
      port: z.number().int().min(0).max(65_535).default(8443),
    })
    .prefault({}),
  /** Larger request bodies get 413. */
  bodyLimitBytes: z.number().int().min(1024).max(1_048_576).default(16_384),
  /** What one client may hold open, and for how long (slow clients; see server-options.ts). */
  connections: ConnectionsSchema.prefault({}),
  trustedProxies: TrustedProxiesSchema,
  issuance: IssuanceSettingsSchema.prefault({}),
  keyRing: KeyRingSchema.prefault({}),
  auth: z
    .strictObject({
      tokenReview: z
        .strictObject({
          enabled: z.boolean().default(true),
          /** Audiences the bearer token must be valid for (one of them). */
          audiences: z.array(AudienceSchema).min(1).default([DEFAULT_ISSUER_AUDIENCE]),
        })
        .prefault({}),
      jwt: JwtSchema.optional(),
      /** How long a TokenReview or SubjectAccessReview answer is reused (0 turns caching off). */
      cacheSeconds: z.number().int().min(0).max(300).default(10),
    })
    .prefault({}),
  rateLimit: z
    .strictObject({
      perCaller: CallerBucketSchema.prefault({}),
      /**
       * The failed-authentication budget per client address: a bearer the issuer does not know
       * reserves one unit before its review (so N at once cost at most the budget) and gets it
       * back if it proves valid. Keeps a flood of bad tokens off TokenReview.
       */
      unauthenticatedPerAddress: AuthFailureBucketSchema.prefault({}),
      /**
       * A bearer that authenticated within this long is reviewed again outside its address's
       * budget: a flood of bad tokens from a shared address (a proxy, a NAT) does not lock out
       * the callers already known there. 0 turns it off.
       */
      knownBearerSeconds: z.number().int().min(0).max(86_400).default(3_600),
      maxTrackedCallers: z.number().int().min(1).max(1_000_000).default(10_000),
    })
    .prefault({}),
  idempotency: z
    .strictObject({
      /** How long a POST's answer is kept for retries with the same Idempotency-Key. */
      ttlSeconds: z.number().int().min(1).max(86_400).default(3_600),
      maxEntries: z.number().int().min(1).max(1_000_000).default(10_000),
    })
    .prefault({}),
  /** Open GET /v1/tokens/{id}?watch=true streams: per caller, and in all (beyond either, 429). */
  watches: z
    .strictObject({
      perCaller: z.number().int().min(1).max(1_000).default(4),
      max: z.number().int().min(1).max(100_000).default(256),
    })
    .prefault({}),
  portal: PortalSchema.prefault({}),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

const IssuerConfigSchema = IssuerSettingsSchema.extend({
  tls: z.union([TlsFilesSchema, TlsPemSchema]),
}).refine((config) => config.auth.tokenReview.enabled || config.auth.jwt !== undefined, {
  message: 'enable auth.tokenReview or configure auth.jwt: the issuer needs a way to authenticate callers',
  path: ['auth'],
});

export type IssuerConfig = z.output<typeof IssuerConfigSchema>;
export type IssuerConfigInput = z.input<typeof IssuerConfigSchema>;

/**
 * Every setting at its default, TLS aside: the library's answer to an empty configuration, from
 * which `nodeflavor run` takes the settings it has no flag for.
 */
export const ISSUER_DEFAULTS: Omit<IssuerConfig, 'tls'> = deepFreeze(IssuerSettingsSchema.parse({}));

/** Frozen all the way down: its nested objects are shared by reference into every issuer config. */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** Parses the configuration; the error lists every bad field as `path: message`. */
export function parseIssuerConfig(input: unknown): IssuerConfig {
  const result = IssuerConfigSchema.safeParse(input);
  if (result.success) return result.data;
  const problems = result.error.issues.map(
    (issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`,
  );
  throw new Error(`invalid token-issuer configuration: ${problems.join('; ')}`);
}
