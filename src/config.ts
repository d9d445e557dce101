// The one configuration object of `nodeflavor run`, parsed once at start-up (flags first, then
// NODEFLAVOR_* environment variables, then defaults) and passed down; nothing deeper reads
// process.env.
import { z } from 'zod';
import { isAddressOrCidr } from './tokenissuer/client-address.ts';
import { DEFAULT_AUTH_EXTRA_GROUP, DEFAULT_ISSUER_AUDIENCE } from './tokenissuer/config.ts';
import { DEFAULT_DISCOVERY_MODE, DISCOVERY_MODES } from './tokenissuer/discovery-kubeconfig.ts';

const FORBIDDEN_ADMIN_GROUPS = new Set([
  'system:authenticated',
  'system:unauthenticated',
  'system:serviceaccounts',
  'system:nodes',
]);

const durationMs = z
  .string()
  .regex(/^\d+(ms|s|m|h)$/, 'a duration like 500ms, 30s, 5m or 1h')
  .transform((text) => {
    const match = /^(\d+)(ms|s|m|h)$/.exec(text) as RegExpExecArray;
    const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[match[2] as 'ms' | 's' | 'm' | 'h'];
    return Number(match[1]) * unit;
  });

const address = z.string().regex(/^(\[[0-9a-f:]+\]|[0-9.]*|[a-z0-9.-]*):\d{1,5}$/i, 'host:port or :port');

export const ConfigSchema = z.object({
  kubeconfig: z.string().optional(),
  /** The operator's namespace (its Secrets, Lease, Services). */
  namespace: z.string().min(1).default('nodeflavor'),
  /** The operator's ServiceAccount: the identity the admission guard lets write flavors. */
  serviceAccount: z.string().min(1).default('nodeflavor'),
  controller: z.boolean().default(true),
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
  keySecret: z.string().default('nodeflavor-hmac-keys'),
  /**
   * The group every issued bootstrap token authenticates with (the same for every flavor). Our
   * own by default, which kube-controller-manager's auto-approval does not cover: nodeflavor
   * approves those CSRs itself (csrApprover) and nobody else does.
   */
  bootstrapGroup: z
    .string()
    .regex(/^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$/)
    .default(DEFAULT_AUTH_EXTRA_GROUP),
  /**
   * Approve kubelet client CSRs of bootstrapGroup that bind, deny the rest of that group (CSRs of
   * other groups, such as plain kubeadm tokens, are left alone). On by default: with our own
   * group, nobody else approves them.
   */
  csrApprover: z.boolean().default(true),
  /** How long a node carrying a token label may wait for its CSR binding before it is judged. */
  bindingGrace: durationMs.default(30_000),
  /** An unused FlavoredToken never marked nodeflavor.io/issued is deleted after this long (a failed issuance). */
  orphanGrace: durationMs.default(120_000),
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
  issuerAudience: z.string().min(1).default(DEFAULT_ISSUER_AUDIENCE),
  jwtJwksFile: z.string().optional(),
  jwtSecretFile: z.string().optional(),
  jwtIssuer: z.string().optional(),
  jwtAudience: z.string().optional(),
  jwtFlavorsClaim: z.string().default('nodeflavor.io/flavors'),
  issuerTlsSecret: z.string().default('nodeflavor-issuer-tls'),
  /** The ConfigMap (operator namespace) where portals read the issuer's CA certificate (ca.crt only). */
  issuerCaConfigMap: z.string().min(1).default('nodeflavor-issuer-ca'),
  /** The issuer API's Service (its DNS names go in the self-managed serving certificate). */
  issuerService: z.string().default('nodeflavor-issuer'),
  /** host:port nodes join through, when it differs from the server in kube-public/cluster-info. */
  joinApiServerEndpoint: z.string().optional(),
  /**
   * How issued JoinConfigurations discover the API server: `file` (the discovery kubeconfig beside
   * them; no signature in cluster-info) or `token` (CA hash pin and a cluster-info JWS per live token).
   */
  joinDiscovery: z.enum(DISCOVERY_MODES).default(DEFAULT_DISCOVERY_MODE),
  // The issuer's limits against abusive clients (docs/token-issuer.md, "Abusive clients").
  /** The TLS handshake, and then each request's headers, must arrive within this. */
  issuerHeadersTimeout: durationMs.refine((ms) => ms >= 100, 'must be at least 100ms').default(10_000),
  /** Each whole request, body included, must arrive within this. */
  issuerRequestTimeout: durationMs.refine((ms) => ms >= 100, 'must be at least 100ms').default(15_000),
  /** A kept-alive connection with no request in flight is closed after this. */
  issuerIdleTimeout: durationMs.refine((ms) => ms >= 100, 'must be at least 100ms').default(65_000),
  issuerMaxConnectionsPerAddress: z.number().int().min(1).max(1_000_000).default(32),
  issuerMaxConnections: z.number().int().min(1).max(1_000_000).default(1_024),
  /** Proxies (IP addresses, CIDRs) whose X-Forwarded-For the issuer believes. */
  issuerTrustedProxies: z
    .array(z.string().refine(isAddressOrCidr, { message: 'must be IP addresses or CIDRs' }))
    .default([]),
  /** Failed authentications (reviews of unknown bearers) per client address: burst, then per second. */
  issuerAuthFailureBurst: z.number().int().min(1).max(100_000).default(20),
  issuerAuthFailuresPerSecond: z.number().positive().max(100_000).default(1),
  /** Requests per authenticated caller: burst, then per second. */
  issuerCallerBurst: z.number().int().min(1).max(100_000).default(30),
  issuerCallerPerSecond: z.number().positive().max(100_000).default(1),
  /** Serve the self-service page for node administrators at /portal/ on the issuer. */
  issuerPortal: z.boolean().default(false),
  logLevel: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
});

/** Rules across settings, checked after each one alone (kept off ConfigSchema so its shape stays a plain object). */
const CheckedConfigSchema = ConfigSchema.refine((c) => c.issuerHeadersTimeout <= c.issuerRequestTimeout, {
  message: 'must not be longer than --issuer-request-timeout',
  path: ['issuerHeadersTimeout'],
})
  .refine((c) => c.issuerMaxConnectionsPerAddress <= c.issuerMaxConnections, {
    message: 'must not be larger than --issuer-max-connections',
    path: ['issuerMaxConnectionsPerAddress'],
  })
  // client-go's rules: a leader gives up before a standby may take over, and renews in between.
  .refine((c) => c.leaderElectRenewDeadline < c.leaderElectLeaseDuration, {
    message: 'must be shorter than --leader-elect-lease-duration',
    path: ['leaderElectRenewDeadline'],
  })
  .refine((c) => c.leaderElectRetryPeriod < c.leaderElectRenewDeadline, {
    message: 'must be shorter than --leader-elect-renew-deadline',
    path: ['leaderElectRetryPeriod'],
  });

export type Config = z.output<typeof ConfigSchema>;

export function controllerUsername(config: Pick<Config, 'namespace' | 'serviceAccount'>): string {
  return `system:serviceaccount:${config.namespace}:${config.serviceAccount}`;
}

/** Parses already-collected raw settings; the error lists every bad field in one line each. */
export function parseConfig(raw: Record<string, unknown>): Config {
  const result = CheckedConfigSchema.safeParse(raw);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `--${kebab(issue.path.join('.'))}: ${issue.message}`);
    throw new Error(`invalid configuration: ${lines.join('; ')}`);
  }
  return result.data;
}

export function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}
