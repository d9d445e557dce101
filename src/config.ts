// The one configuration object of `nodeflavor run`, parsed once at start-up (flags first, then
// NODEFLAVOR_* environment variables, then defaults) and passed down; nothing deeper reads
// process.env. The token issuer's settings are its library's own field schemas
// (src/tokenissuer/config.ts), so a bound or default is written once; issuerConfigFor hands them
// to the issuer without parsing them again.
import { z } from 'zod';
import {
  DEFAULT_TRUSTED_NODE_LABELS,
  isTrustedNodeLabelKey,
  TRUSTED_NODE_LABEL_PREFIXES,
} from './flavor/placement.ts';
import {
  AttestationSettingsSchema,
  AttestationTotalBucketSchema,
  AudienceSchema,
  AuthFailureBucketSchema,
  CallerBucketSchema,
  ConnectionsSchema,
  DEFAULT_ISSUER_AUDIENCE,
  headersWithinRequest,
  ISSUER_DEFAULTS,
  IssuanceSettingsSchema,
  type IssuerConfig,
  JWT_DEFAULTS,
  JwtSchema,
  KeyRingSchema,
  oneJwtKeySource,
  PortalSchema,
  perAddressWithinTotal,
  TrustedProxiesSchema,
} from './tokenissuer/config.ts';

const FORBIDDEN_ADMIN_GROUPS = new Set([
  'system:authenticated',
  'system:unauthenticated',
  'system:serviceaccounts',
  'system:nodes',
]);

const DURATION = /^(\d+)(ms|s|m|h)$/;
const DURATION_HINT = 'a duration like 500ms, 30s, 5m or 1h';
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
const millisecondsOf = (text: string): number => {
  const match = DURATION.exec(text) as RegExpExecArray;
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
};

export const durationMs = z.string().regex(DURATION, DURATION_HINT).transform(millisecondsOf);

/**
 * A duration flag for an issuer setting the library keeps in seconds: the library's field checks
 * the bound and supplies the default, and Config holds milliseconds like every other duration.
 */
const issuerDurationMs = (seconds: z.ZodType<number, number | undefined>) =>
  z
    .preprocess((text, ctx) => {
      if (text === undefined) return undefined; // the library's default
      if (typeof text === 'string' && DURATION.test(text)) return millisecondsOf(text) / 1000;
      ctx.addIssue({ code: 'custom', message: DURATION_HINT });
      return z.NEVER;
    }, seconds)
    .transform((s) => Math.round(s * 1000)); // back to the whole milliseconds given

export const address = z
  .string()
  .regex(/^(\[[0-9a-f:]+\]|[0-9.]*|[a-z0-9.-]*):\d{1,5}$/i, 'host:port or :port');

/** A regular expression as text (Go RE2 syntax, as Cluster API's flags take it; JavaScript reads it alike). */
const regexSource = z.string().refine(
  (text) => {
    try {
      new RegExp(text);
      return true;
    } catch {
      return false;
    }
  },
  { error: (issue) => `"${String(issue.input)}" is not a regular expression` },
);

export const ConfigSchema = z.object({
  kubeconfig: z.string().optional(),
  /** The operator's namespace (its Secrets, Lease, Services; the key ring's too). */
  namespace: KeyRingSchema.shape.namespace,
  /** The operator's ServiceAccount: the identity the admission guard lets write flavors. */
  serviceAccount: z.string().min(1).default('nodeflavor'),
  controller: z.boolean().default(true),
  /**
   * The Node this process runs on (the chart passes `--node-name=$(NODE_NAME)`, spec.nodeName
   * from the downward API). When set, the process reads that Node at start and refuses to run on
   * one that is not trusted (see trustedNodeLabels). Unset (out of the cluster): no such check.
   * Not read from a bare NODE_NAME: CI agents (Jenkins) set that variable to their own name.
   */
  nodeName: z.string().min(1).optional(),
  /**
   * Label keys that mark a node trusted to run the operator (one of them suffices). Only keys a
   * kubelet cannot set on itself (NodeRestriction): under node-restriction.kubernetes.io/ or
   * node-role.kubernetes.io/.
   */
  trustedNodeLabels: z
    .array(
      z.string().refine(isTrustedNodeLabelKey, {
        error: (issue) =>
          `"${String(issue.input)}" is a label a kubelet could set on its own Node: use a key under ${TRUSTED_NODE_LABEL_PREFIXES.join(' or ')} (NodeRestriction keeps kubelets from those)`,
      }),
    )
    .min(1)
    .default([...DEFAULT_TRUSTED_NODE_LABELS]),
  /** Run although the Node this process runs on is not trusted (see nodeName). Logged loudly. */
  allowUntrustedNode: z.boolean().default(false),
  /**
   * Run the controller although no admission guard protects Nodes (this process runs none and none
   * is registered under webhookConfigName): without a guard any kubelet can label itself. Logged loudly.
   */
  allowUnguardedNodes: z.boolean().default(false),
  webhook: z.boolean().default(true),
  issuer: z.boolean().default(true),
  leaderElect: z.boolean().default(true),
  leaderElectionId: z.string().default('nodeflavor-controller'),
  /** A standby takes the Lease this long after it last saw the leader renew it. */
  leaderElectLeaseDuration: durationMs.default(10_000),
  /** A leader that has not renewed for this long stops leading, in-flight writes included. */
  leaderElectRenewDeadline: durationMs.default(7_000),
  /** How often the leader renews and a standby checks the Lease. */
  leaderElectRetryPeriod: durationMs.refine((ms) => ms >= 100, 'must be at least 100ms').default(2_000),
  /** Every Kubernetes API request (lists page by page, writes, reviews) fails after this long. */
  kubeRequestTimeout: durationMs.refine((ms) => ms >= 100, 'must be at least 100ms').default(30_000),
  /** Serves /metrics, /healthz and /readyz (plain HTTP). */
  metricsAddress: address.default(':8080'),
  keySecret: KeyRingSchema.shape.secretName,
  /**
   * The group every issued bootstrap token authenticates with (the same for every flavor). Our
   * own by default, which kube-controller-manager's auto-approval does not cover: nodeflavor
   * approves those CSRs itself (csrApprover) and nobody else does.
   */
  bootstrapGroup: IssuanceSettingsSchema.shape.authExtraGroups,
  /**
   * Approve kubelet client CSRs of bootstrapGroup that bind, deny the rest of that group (CSRs of
   * other groups, such as plain kubeadm tokens, are left alone). On by default: with our own
   * group, nobody else approves them.
   */
  csrApprover: z.boolean().default(true),
  /** How long a node carrying a token label may wait for its CSR binding before it is judged. */
  bindingGrace: durationMs.default(30_000),
  /**
   * A Normal `Verified` Event on each Node when it is flavored. Off by default: one write per join
   * that no check reads (the Node's labels, its signed record and the token's status say it);
   * Warnings (every refusal) are always recorded.
   */
  verifiedEvents: z.boolean().default(false),
  /**
   * The management cluster's Cluster API --additional-sync-machine-labels (regular expressions): a
   * FlavorClass label key matching one, like one in Cluster API's own synced domains, is reported
   * on the class (ClusterAPISyncConflict and a Warning Event). One per --capi-synced-label-pattern.
   */
  capiSyncedLabelPatterns: z.array(regexSource).default([]),
  /** The same for --additional-sync-machine-annotations and FlavorClass annotation keys. */
  capiSyncedAnnotationPatterns: z.array(regexSource).default([]),
  /** An unused keyed FlavoredToken (ADR 0005) never marked nodeflavor.io/issued is deleted after this long. */
  orphanGrace: durationMs.default(120_000),
  /**
   * A released join record (NodeNameClaim) is deleted this long after its release, once its Node
   * and its requests are gone too (ADR 0016): until then it shows the name's history and keeps a
   * Node registered under the name quarantined.
   */
  claimGrace: durationMs.default(3_600_000),
  /** Periodic re-reconcile of every object (drift repair even without events). */
  resync: durationMs.refine((ms) => ms >= 1000, 'must be at least 1s').default(600_000),
  workers: z.number().int().min(1).max(64).default(16),
  adminGroups: z
    .array(z.string().min(1))
    .default([])
    .refine(
      (groups) =>
        groups.every((g) => !FORBIDDEN_ADMIN_GROUPS.has(g) && !g.startsWith('system:bootstrappers')),
      {
        message: `admin groups may not be broad system groups (${[...FORBIDDEN_ADMIN_GROUPS].join(', ')}) or bootstrap token groups (system:bootstrappers*: every token holder is in them)`,
      },
    ),
  admissionMode: z.enum(['webhook', 'policy', 'both']).default('webhook'),
  webhookAddress: address.default(':9443'),
  /** The webhook Service (its DNS names go in the serving certificate). */
  webhookService: z.string().default('nodeflavor-webhook'),
  /** Register the webhook by URL instead of Service (out-of-cluster runs, tests). */
  webhookUrl: z.string().url().optional(),
  webhookConfigName: z.string().default('nodeflavor'),
  /**
   * A ClusterRole that owns the admission registration (ownerReferences): when it is deleted (the
   * Helm chart's, on `helm uninstall`), the garbage collector deletes the registration with it,
   * so no webhook with failurePolicy Fail outlives the operator. Unset: nothing owns it.
   */
  registrationOwner: z.string().min(1).optional(),
  tlsMode: z.enum(['self', 'cert-manager']).default('self'),
  tlsSecret: z.string().default('nodeflavor-webhook-tls'),
  issuerAddress: address.default(':8443'),
  issuerAuth: z.enum(['tokenreview', 'jwt']).default('tokenreview'),
  /** The audience callers' Kubernetes tokens must be issued for (`kubectl create token --audience`). */
  issuerAudience: AudienceSchema.default(DEFAULT_ISSUER_AUDIENCE),
  // With --issuer-auth jwt: issuer and audience, and exactly one of the two key files.
  jwtJwksFile: JwtSchema.shape.jwksFile,
  jwtSecretFile: JwtSchema.shape.hs256SecretFile,
  jwtIssuer: JwtSchema.shape.issuer.optional(),
  jwtAudience: JwtSchema.shape.audience.optional(),
  jwtFlavorsClaim: JwtSchema.shape.flavorsClaim,
  issuerTlsSecret: z.string().default('nodeflavor-issuer-tls'),
  /** The ConfigMap (operator namespace) where portals read the issuer's CA certificate (ca.crt only). */
  issuerCaConfigMap: z.string().min(1).default('nodeflavor-issuer-ca'),
  /** The issuer API's Service (its DNS names go in the self-managed serving certificate). */
  issuerService: z.string().default('nodeflavor-issuer'),
  /** host:port nodes join through, when it differs from the server in kube-public/cluster-info. */
  joinApiServerEndpoint: IssuanceSettingsSchema.shape.apiServerEndpoint,
  /** How issued JoinConfigurations discover the API server: `file` or `token`. */
  joinDiscovery: IssuanceSettingsSchema.shape.discovery,
  // Attested joins (ADR 0014): where nodes reach the issuer, the CA they trust it with, the TPM
  // manufacturer CAs an EK certificate must chain to and their CRLs, and how many unauthenticated
  // attestation requests one issuer process serves. Without --attestation-url: none.
  attestationUrl: AttestationSettingsSchema.shape.url,
  attestationCaFile: AttestationSettingsSchema.shape.issuerCaFile,
  tpmManufacturerCaFile: AttestationSettingsSchema.shape.manufacturerCaFile,
  tpmManufacturerCrlFile: AttestationSettingsSchema.shape.manufacturerCrlFile,
  attestationBurst: AttestationTotalBucketSchema.shape.capacity,
  attestationPerSecond: AttestationTotalBucketSchema.shape.refillPerSecond,
  // The issuer's limits against abusive clients (docs/token-issuer.md, "Abusive clients").
  issuerHeadersTimeout: issuerDurationMs(ConnectionsSchema.shape.headersTimeoutSeconds),
  issuerRequestTimeout: issuerDurationMs(ConnectionsSchema.shape.requestTimeoutSeconds),
  issuerIdleTimeout: issuerDurationMs(ConnectionsSchema.shape.idleTimeoutSeconds),
  issuerMaxConnectionsPerAddress: ConnectionsSchema.shape.maxPerAddress,
  issuerMaxConnections: ConnectionsSchema.shape.max,
  issuerTrustedProxies: TrustedProxiesSchema,
  issuerAuthFailureBurst: AuthFailureBucketSchema.shape.capacity,
  issuerAuthFailuresPerSecond: AuthFailureBucketSchema.shape.refillPerSecond,
  issuerCallerBurst: CallerBucketSchema.shape.capacity,
  issuerCallerPerSecond: CallerBucketSchema.shape.refillPerSecond,
  issuerPortal: PortalSchema.shape.enabled,
  logLevel: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
});

/** Rules across settings, checked after each one alone (kept off ConfigSchema so its shape stays a plain object). */
const CheckedConfigSchema = ConfigSchema.refine((c) => headersWithinRequest(issuerConnections(c)), {
  message: 'must not be longer than --issuer-request-timeout',
  path: ['issuerHeadersTimeout'],
})
  .refine((c) => perAddressWithinTotal(issuerConnections(c)), {
    message: 'must not be larger than --issuer-max-connections',
    path: ['issuerMaxConnectionsPerAddress'],
  })
  // What the issuer's JwtSchema requires, asked here so that it fails at start-up with the flag's name.
  .refine((c) => c.issuerAuth !== 'jwt' || c.jwtIssuer !== undefined, {
    message: 'required with --issuer-auth jwt',
    path: ['jwtIssuer'],
  })
  .refine((c) => c.issuerAuth !== 'jwt' || c.jwtAudience !== undefined, {
    message: 'required with --issuer-auth jwt',
    path: ['jwtAudience'],
  })
  .refine(
    (c) =>
      c.issuerAuth !== 'jwt' ||
      oneJwtKeySource({ jwksFile: c.jwtJwksFile, hs256SecretFile: c.jwtSecretFile }),
    {
      message: 'set exactly one of --jwt-jwks-file and --jwt-secret-file with --issuer-auth jwt',
      path: ['jwtJwksFile'],
    },
  )
  .superRefine(leaderElectionRules);

/** client-go's rules: a leader gives up before a standby may take over, and renews in between. */
export function leaderElectionRules(
  c: { leaderElectLeaseDuration: number; leaderElectRenewDeadline: number; leaderElectRetryPeriod: number },
  ctx: z.RefinementCtx,
): void {
  if (!(c.leaderElectRenewDeadline < c.leaderElectLeaseDuration))
    ctx.addIssue({
      code: 'custom',
      message: 'must be shorter than --leader-elect-lease-duration',
      path: ['leaderElectRenewDeadline'],
    });
  if (!(c.leaderElectRetryPeriod < c.leaderElectRenewDeadline))
    ctx.addIssue({
      code: 'custom',
      message: 'must be shorter than --leader-elect-renew-deadline',
      path: ['leaderElectRetryPeriod'],
    });
}

export type Config = z.output<typeof ConfigSchema>;

export function controllerUsername(config: Pick<Config, 'namespace' | 'serviceAccount'>): string {
  return `system:serviceaccount:${config.namespace}:${config.serviceAccount}`;
}

/** Parses already-collected raw settings; the error lists every bad field in one line each. */
export function parseConfig(raw: Record<string, unknown>): Config {
  return parseSettings(CheckedConfigSchema, raw);
}

/** Parses a command's raw settings with its schema; the error names each bad flag, one per line. */
export function parseSettings<T>(schema: z.ZodType<T>, raw: Record<string, unknown>): T {
  const result = schema.safeParse(raw);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `--${kebab(issue.path.join('.'))}: ${issue.message}`);
    throw new Error(`invalid configuration: ${lines.join('; ')}`);
  }
  return result.data;
}

export function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** The issuer's connection limits, in the library's units. */
function issuerConnections(config: Config): IssuerConfig['connections'] {
  return {
    headersTimeoutSeconds: config.issuerHeadersTimeout / 1000,
    requestTimeoutSeconds: config.issuerRequestTimeout / 1000,
    idleTimeoutSeconds: config.issuerIdleTimeout / 1000,
    maxPerAddress: config.issuerMaxConnectionsPerAddress,
    max: config.issuerMaxConnections,
  };
}

/**
 * The token issuer's configuration as `nodeflavor run` sets it: its flags (already checked by the
 * library's own field schemas) over the library's defaults for the rest. Pure and total; no
 * second parse.
 */
export function issuerConfigFor(
  config: Config,
  serving: { listen: { host?: string | undefined; port: number }; tls: IssuerConfig['tls'] },
): IssuerConfig {
  const defaults = ISSUER_DEFAULTS;
  const jwtSetting = (value: string | undefined, flag: string): string => {
    // parseConfig's rules require it in JWT mode; a Config that skipped them must not run open.
    if (!value) throw new Error(`--issuer-auth=jwt needs ${flag}`);
    return value;
  };
  const jwt =
    config.issuerAuth === 'jwt'
      ? {
          ...JWT_DEFAULTS,
          issuer: jwtSetting(config.jwtIssuer, '--jwt-issuer'),
          audience: jwtSetting(config.jwtAudience, '--jwt-audience'),
          flavorsClaim: config.jwtFlavorsClaim,
          ...(config.jwtJwksFile ? { jwksFile: config.jwtJwksFile } : {}),
          ...(config.jwtSecretFile ? { hs256SecretFile: config.jwtSecretFile } : {}),
        }
      : undefined;
  return {
    ...defaults,
    listen: { host: serving.listen.host ?? defaults.listen.host, port: serving.listen.port },
    tls: serving.tls,
    connections: issuerConnections(config),
    trustedProxies: config.issuerTrustedProxies,
    issuance: {
      ...defaults.issuance,
      authExtraGroups: config.bootstrapGroup,
      discovery: config.joinDiscovery,
      ...(config.joinApiServerEndpoint ? { apiServerEndpoint: config.joinApiServerEndpoint } : {}),
      attestation: {
        ...defaults.issuance.attestation,
        ...(config.attestationUrl ? { url: config.attestationUrl } : {}),
        ...(config.attestationCaFile ? { issuerCaFile: config.attestationCaFile } : {}),
        ...(config.tpmManufacturerCaFile ? { manufacturerCaFile: config.tpmManufacturerCaFile } : {}),
        ...(config.tpmManufacturerCrlFile ? { manufacturerCrlFile: config.tpmManufacturerCrlFile } : {}),
        total: { capacity: config.attestationBurst, refillPerSecond: config.attestationPerSecond },
      },
    },
    keyRing: { namespace: config.namespace, secretName: config.keySecret, createIfMissing: true },
    auth: {
      ...defaults.auth,
      tokenReview: { enabled: config.issuerAuth === 'tokenreview', audiences: [config.issuerAudience] },
      ...(jwt ? { jwt } : {}),
    },
    rateLimit: {
      ...defaults.rateLimit,
      perCaller: { capacity: config.issuerCallerBurst, refillPerSecond: config.issuerCallerPerSecond },
      unauthenticatedPerAddress: {
        capacity: config.issuerAuthFailureBurst,
        refillPerSecond: config.issuerAuthFailuresPerSecond,
      },
    },
    portal: { enabled: config.issuerPortal },
    logLevel: config.logLevel,
  };
}
