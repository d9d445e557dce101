// The custom resources of nodeflavor.io/v1alpha1 (FlavorClass, FlavoredToken, NodeNameClaim): constants,
// zod schemas and TypeScript types that mirror deploy/crds/*.yaml (the CRDs are the source of
// truth; test/unit/resources.test.ts checks that the two agree), plus the pure helpers every
// component needs: Go-style duration parsing for spec.ttl, the token's expiry, and node-name
// matching for spec.nodeName / spec.nodeNamePattern. Pure and I/O-free.
import { z } from 'zod';

// ---------------------------------------------------------------------------------------------
// Names

export const GROUP = 'nodeflavor.io';
export const VERSION = 'v1alpha1';
export const API_VERSION = 'nodeflavor.io/v1alpha1';

export const FLAVOR_CLASS_KIND = 'FlavorClass';
export const FLAVOR_CLASS_PLURAL = 'flavorclasses';
export const FLAVOR_CLASS_SINGULAR = 'flavorclass';
export const FLAVOR_CLASS_SHORT_NAME = 'fc';

export const FLAVORED_TOKEN_KIND = 'FlavoredToken';
export const FLAVORED_TOKEN_PLURAL = 'flavoredtokens';
export const FLAVORED_TOKEN_SINGULAR = 'flavoredtoken';
export const FLAVORED_TOKEN_SHORT_NAME = 'ft';

export const NODE_NAME_CLAIM_KIND = 'NodeNameClaim';
export const NODE_NAME_CLAIM_PLURAL = 'nodenameclaims';
export const NODE_NAME_CLAIM_SINGULAR = 'nodenameclaim';
export const NODE_NAME_CLAIM_SHORT_NAME = 'nnc';

/** The category every kind belongs to: `kubectl get nodeflavor`. */
export const CATEGORY = 'nodeflavor';
/** A kubelet's user name is this prefix and its node name; its group is NODES_GROUP. */
export const NODE_USER_PREFIX = 'system:node:';
export const NODES_GROUP = 'system:nodes';
/** The server-side apply field manager of every write nodeflavor makes. */
export const FIELD_MANAGER = 'nodeflavor';

/** Label the issuer sets on every FlavoredToken: `nodeflavor.io/token-id=<token ID>`, for lookup. */
export const TOKEN_ID_LABEL = 'nodeflavor.io/token-id';
/**
 * Set by the issuer once the bootstrap Secret exists: a FlavoredToken without it (and unused)
 * is a failed issuance whose rollback also failed, and the controller deletes it. This spares
 * the controller reading Secrets in kube-system.
 */
export const ISSUED_ANNOTATION = 'nodeflavor.io/issued';

/**
 * Deleting a FlavoredToken revokes it (its Secret first; with StripNodes, its nodes' flavor), so
 * the controller holds this finalizer. The issuer creates the record with it: no window where a
 * token exists that could be deleted unrevoked, and no separate write to add it.
 */
export const TOKEN_FINALIZER = 'nodeflavor.io/revoke';
/**
 * A join record (NodeNameClaim) holds this finalizer while its join holds the name: deleting the
 * record (an admin making room for a plain join) takes effect once the join ends, never under a
 * join in flight or a node it flavors (ADR 0016).
 */
export const CLAIM_FINALIZER = 'nodeflavor.io/join';
/** Node label under which a joining node presents its flavor token. Reserved in FlavorClass labels. */
export const TOKEN_LABEL_KEY = 'nodeflavor.io/token';
/**
 * Object keys (labels, annotations, fields) whose values are secrets wherever they appear: kept out
 * of anything long-lived and shared, such as the string intern table (src/kube/intern.ts).
 */
export const SECRET_VALUED_KEYS: ReadonlySet<string> = new Set([TOKEN_LABEL_KEY]);
/** Quarantine taint key for nodes not (yet) verified. Reserved in FlavorClass taints. */
export const QUARANTINE_TAINT_KEY = 'nodeflavor.io/unverified';
/**
 * Label every Node that joined through nodeflavor carries from its first version (admission adds
 * it at registration, the controller keeps it): the operator's own pods never run on such a node.
 * Reserved in FlavorClass labels.
 */
export const JOINED_LABEL_KEY = 'nodeflavor.io/joined';
export const JOINED_LABEL_VALUE = 'true';

/** The ttl the issuer applies when a FlavoredToken sets neither ttl nor expiresAt. */
export const DEFAULT_TTL = '24h';
/** spec.maxUses when unset: a single-use token. */
export const DEFAULT_MAX_USES = 1;

/** The bounds the CRDs put on lists, maps and strings (they keep CEL inside its cost budget). */
export const LIMITS = {
  labels: 64,
  annotations: 64,
  annotationValueLength: 4096,
  taints: 32,
  descriptionLength: 512,
  maxUses: 1000,
  bindings: 1000,
  conditions: 16,
  ttlLength: 32,
  nodeNameLength: 253,
  nodeUIDLength: 128,
  ekPublicKeyLength: 1024,
  /** An EK certificate with the intermediates presented with it, PEM: ~1.5 KB a certificate. */
  ekCertificateLength: 16384,
  rejections: 10,
  joinHistory: 10,
  reasonLength: 64,
  messageLength: 1024,
} as const;

/** Condition types of a FlavoredToken. */
export const TokenConditionType = {
  /** True when a node can join with the token now (not expired, consumed or revoked). */
  Ready: 'Ready',
  /** True once the token's expiry has passed. */
  Expired: 'Expired',
  /** True once maxUses nodes have joined with it (never for maxUses 0). */
  Consumed: 'Consumed',
  /** True once the token is revoked (spec.revoked). */
  Revoked: 'Revoked',
} as const;
export type TokenConditionType = (typeof TokenConditionType)[keyof typeof TokenConditionType];

/** Condition types of a FlavorClass. */
export const FlavorClassConditionType = {
  /** True when the controller has accepted the spec and applies it to verified nodes. */
  Ready: 'Ready',
  /**
   * Present (True) only while some of the class's keys are ones Cluster API also writes to Nodes
   * (src/flavor/capi-synced-keys.ts); absent otherwise.
   */
  ClusterAPISyncConflict: 'ClusterAPISyncConflict',
} as const;
export type FlavorClassConditionType =
  (typeof FlavorClassConditionType)[keyof typeof FlavorClassConditionType];

// ---------------------------------------------------------------------------------------------
// Patterns. Each is valid both as RE2 (Kubernetes CEL `matches`, OpenAPI `pattern`) and as a
// JavaScript RegExp, and the CRDs use these exact strings (the unit test checks it).

/** A Kubernetes qualified name: optional lowercase DNS-subdomain prefix and '/', then a name of ≤ 63. */
export const QUALIFIED_NAME_PATTERN =
  '^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$';
/** A non-empty label value (≤ 63); the empty value is valid too. */
export const LABEL_VALUE_PATTERN = '^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$';
/** Keys whose prefix is kubernetes.io, k8s.io or one of their subdomains. */
export const RESERVED_DOMAIN_PATTERN = '^([^/]*[.])?(kubernetes|k8s)[.]io/';
/** A DNS subdomain (RFC 1123), without the 253 length bound. */
export const DNS_SUBDOMAIN_PATTERN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
/** spec.ttl: a Go-style duration of h, m and s units only, e.g. 1h30m. */
export const TTL_PATTERN = '^([0-9]+([.][0-9]+)?[hms])+$';
/** spec.nodeNamePattern: a glob of lowercase letters, digits, '.', '-' and '*'. */
export const NODE_NAME_GLOB_PATTERN = '^[a-z0-9*.-]+$';
/** A bootstrap token ID. */
export const TOKEN_ID_PATTERN = '^[a-z0-9]{6}$';
/** metav1.Condition type. */
export const CONDITION_TYPE_PATTERN =
  '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$';
/** metav1.Condition reason. */
export const CONDITION_REASON_PATTERN = '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$';

const QUALIFIED_NAME_RE = new RegExp(QUALIFIED_NAME_PATTERN);
const LABEL_VALUE_RE = new RegExp(LABEL_VALUE_PATTERN);
const RESERVED_DOMAIN_RE = new RegExp(RESERVED_DOMAIN_PATTERN);
const DNS_SUBDOMAIN_RE = new RegExp(DNS_SUBDOMAIN_PATTERN);
const TTL_RE = new RegExp(TTL_PATTERN);
const NODE_NAME_GLOB_RE = new RegExp(NODE_NAME_GLOB_PATTERN);
const TOKEN_ID_RE = new RegExp(TOKEN_ID_PATTERN);
const CONDITION_TYPE_RE = new RegExp(CONDITION_TYPE_PATTERN);
const CONDITION_REASON_RE = new RegExp(CONDITION_REASON_PATTERN);
/** A failure reason (FAILURE_REASONS in verdict.ts), as the status stores it. */
const REASON_RE = /^[A-Za-z][A-Za-z0-9]*$/;
/** Characters a node name may hold; the only ones a `*` in a nodeNamePattern can match. */
const NODE_NAME_CHARS_RE = /^[a-z0-9.-]*$/;

/** A Kubernetes qualified name (label, annotation or taint key): prefix ≤ 253, name ≤ 63. */
export function isQualifiedName(key: string): boolean {
  return QUALIFIED_NAME_RE.test(key) && (!key.includes('/') || key.indexOf('/') <= 253);
}

/** A valid label (or taint) value: empty, or ≤ 63 of [A-Za-z0-9._-] with alphanumeric ends. */
function isLabelValue(value: string): boolean {
  return value === '' || LABEL_VALUE_RE.test(value);
}

/** Whether the key's prefix is kubernetes.io, k8s.io or a subdomain of either. */
export function isReservedKubernetesKey(key: string): boolean {
  return RESERVED_DOMAIN_RE.test(key);
}

/** A DNS subdomain of at most 253 characters (Node and FlavorClass names). */
export function isDnsSubdomain(name: string): boolean {
  return name.length <= 253 && DNS_SUBDOMAIN_RE.test(name);
}

// ---------------------------------------------------------------------------------------------
// Shared schemas

const QUALIFIED_NAME_MESSAGE =
  "must be a qualified name: an optional DNS subdomain prefix (at most 253 characters, lowercase) and '/', " +
  'then a name of at most 63 characters of [A-Za-z0-9._-] beginning and ending with an alphanumeric character';
const RESERVED_DOMAIN_MESSAGE =
  'keys in the kubernetes.io and k8s.io domains (and their subdomains) are reserved for Kubernetes; use your own domain';
const LABEL_VALUE_MESSAGE =
  'must be empty or at most 63 characters of [A-Za-z0-9._-] beginning and ending with an alphanumeric character';

const int32 = z.number().int().min(-2147483648).max(2147483647);
const int64 = z.number().int();

const RFC3339_RE =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/**
 * Parses an RFC 3339 timestamp as the API server's `format: date-time` accepts it (a zone of Z or
 * ±hh:mm, optional fraction, 't' and 'z' in either case, no out-of-range date or time fields) to
 * a Date with millisecond precision; undefined for anything else. Stricter than the API server
 * only on absurd zone offsets (hours over 24 or minutes over 59), which it accepts: such a
 * timestamp is treated as invalid (fail closed).
 */
export function parseTimestamp(text: string): Date | undefined {
  const m = RFC3339_RE.exec(text);
  if (m === null) return undefined;
  const field = (i: number) => Number(m[i]);
  const [year, month, day, hour, minute, second] = [
    field(1),
    field(2),
    field(3),
    field(4),
    field(5),
    field(6),
  ];
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  const daysInMonth = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0;
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59) {
    return undefined;
  }
  let offsetMinutes = 0;
  if (m[8] !== undefined) {
    const offHour = field(9);
    const offMinute = field(10);
    if (offHour > 24 || offMinute > 59) return undefined; // Go allows a 24h offset
    offsetMinutes = (m[8] === '-' ? -1 : 1) * (offHour * 60 + offMinute);
  }
  const millis = m[7] === undefined ? 0 : Math.floor(Number(`0${m[7]}`) * 1000);
  const utc = new Date(0);
  utc.setUTCFullYear(year, month - 1, day);
  utc.setUTCHours(hour, minute - offsetMinutes, second, millis);
  return utc;
}

/** An RFC 3339 timestamp with a zone (Z or ±hh:mm), as metav1.Time and `format: date-time` hold. */
export const DateTimeSchema = z.string().refine((s) => parseTimestamp(s) !== undefined, {
  message: 'must be an RFC 3339 timestamp, e.g. 2030-01-01T00:00:00Z',
});

/** A qualified-name key that is not in the kubernetes.io / k8s.io domains. */
function ownKey() {
  return z
    .string()
    .max(317)
    .refine(isQualifiedName, { message: QUALIFIED_NAME_MESSAGE })
    .refine((k) => !isReservedKubernetesKey(k), { message: RESERVED_DOMAIN_MESSAGE });
}

const LabelKeySchema = ownKey()
  .refine((k) => k !== TOKEN_LABEL_KEY, {
    message: `the label key ${TOKEN_LABEL_KEY} is reserved: a joining node presents its flavor token under it`,
  })
  .refine((k) => k !== JOINED_LABEL_KEY, {
    message: `the label key ${JOINED_LABEL_KEY} is reserved: it marks every node that joined through nodeflavor`,
  });
const LabelValueSchema = z.string().max(63).refine(isLabelValue, { message: LABEL_VALUE_MESSAGE });
const AnnotationKeySchema = ownKey();
const AnnotationValueSchema = z.string().max(LIMITS.annotationValueLength);

function boundedRecord<K extends z.ZodType<string>, V extends z.ZodType>(key: K, value: V, max: number) {
  return z
    .record(key, value)
    .refine((r) => Object.keys(r).length <= max, { message: `must have at most ${max} entries` });
}

/** A list whose items are unique by the given keys (x-kubernetes-list-type: map). */
function uniqueBy<T>(keyOf: (item: T) => string, what: string) {
  return (items: T[], ctx: z.RefinementCtx) => {
    const seen = new Set<string>();
    items.forEach((item, i) => {
      const key = keyOf(item);
      if (seen.has(key)) ctx.addIssue({ code: 'custom', path: [i], message: `duplicate ${what}` });
      seen.add(key);
    });
  };
}

/** A condition in the standard metav1.Condition shape. */
const ConditionSchema = z.object({
  type: z.string().max(316).regex(CONDITION_TYPE_RE),
  status: z.enum(['True', 'False', 'Unknown']),
  observedGeneration: int64.min(0).optional(),
  lastTransitionTime: DateTimeSchema,
  reason: z.string().min(1).max(1024).regex(CONDITION_REASON_RE),
  message: z.string().max(32768),
});
export type Condition = z.infer<typeof ConditionSchema>;

const ConditionsSchema = z
  .array(ConditionSchema)
  .max(LIMITS.conditions)
  .superRefine(uniqueBy((c: Condition) => c.type, 'condition type'));

/**
 * Object metadata, loosely: the fields nodeflavor reads, every other field kept as is. Timestamps
 * are the JSON strings the API server sends (custom objects are not revived into Dates).
 */
const ObjectMetaSchema = z.looseObject({
  name: z.string().optional(),
  generateName: z.string().optional(),
  uid: z.string().optional(),
  resourceVersion: z.string().optional(),
  generation: int64.optional(),
  creationTimestamp: z.string().optional(),
  deletionTimestamp: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  finalizers: z.array(z.string()).optional(),
});

// ---------------------------------------------------------------------------------------------
// FlavorClass

export const TaintEffectSchema = z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']);

const TaintSchema = z.object({
  key: ownKey().refine((k) => k !== QUARANTINE_TAINT_KEY, {
    message: `the taint key ${QUARANTINE_TAINT_KEY} is reserved for the quarantine taint of unverified nodes`,
  }),
  value: LabelValueSchema.optional(),
  effect: TaintEffectSchema,
});
type Taint = z.infer<typeof TaintSchema>;

/** A measured boot state a flavor requires (ADR 0014): SHA-256 PCR values a TPM quote must show. */
export const MeasuredBootSchema = z.object({
  pcrs: z
    // 0–15: the static root of trust's PCRs (16 and 23 can be reset by any software, 17–22 are DRTM's).
    .array(z.object({ index: z.number().int().min(0).max(15), sha256: z.string().regex(/^[0-9a-f]{64}$/) }))
    .min(1)
    .max(24)
    .superRefine(uniqueBy((p: { index: number }) => String(p.index), 'PCR index')),
});
export type MeasuredBoot = z.infer<typeof MeasuredBootSchema>;

export const FlavorClassSpecSchema = z.object({
  /** Free text for humans; never applied to nodes. */
  description: z.string().max(LIMITS.descriptionLength).optional(),
  /** Labels every verified node of the flavor carries. */
  labels: boundedRecord(LabelKeySchema, LabelValueSchema, LIMITS.labels).optional(),
  /** Annotations every verified node of the flavor carries. */
  annotations: boundedRecord(AnnotationKeySchema, AnnotationValueSchema, LIMITS.annotations).optional(),
  /** Taints every verified node of the flavor carries; unique by (key, effect). */
  taints: z
    .array(TaintSchema)
    .max(LIMITS.taints)
    .superRefine(uniqueBy((t: Taint) => `${t.key}\u0000${t.effect}`, 'taint (key, effect)'))
    .optional(),
  /** Only TPM-attested joins, with a quote showing these PCR values, earn this flavor. */
  measuredBoot: MeasuredBootSchema.optional(),
});
export type FlavorClassSpec = z.infer<typeof FlavorClassSpecSchema>;

export const FlavorClassStatusSchema = z.object({
  /** Number of verified nodes that currently carry the flavor. */
  nodes: int32.min(0).optional(),
  conditions: ConditionsSchema.optional(),
  observedGeneration: int64.min(0).optional(),
});
export type FlavorClassStatus = z.infer<typeof FlavorClassStatusSchema>;

/** A FlavorClass; the flavor's name is metadata.name. */
export const FlavorClassSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(FLAVOR_CLASS_KIND),
  metadata: ObjectMetaSchema,
  spec: FlavorClassSpecSchema,
  status: FlavorClassStatusSchema.optional(),
});
export type FlavorClass = z.infer<typeof FlavorClassSchema>;

// ---------------------------------------------------------------------------------------------
// FlavoredToken

export const RevocationPolicySchema = z.enum(['Keep', 'StripNodes']);

export const TtlSchema = z
  .string()
  .max(LIMITS.ttlLength)
  .regex(TTL_RE, { message: 'must be a duration of h, m and s units, e.g. 30m, 1h or 1h30m' })
  .refine(
    (s) => {
      try {
        // Unrounded, as CEL's duration(self) > duration('0s') sees it; parseDuration checks the maximum.
        return durationMs(s) > 0 && parseDuration(s) >= 0;
      } catch {
        return false;
      }
    },
    { message: 'must be longer than zero (and at most 2562047h)' },
  );

/**
 * A TPM the token is bound to (ADR 0014): only the machine holding this endorsement key can turn
 * the token's material into join secrets. Public data: an EK public key is no secret.
 */
export const TokenAttestationSchema = z.object({
  /** The EK's public key, PEM SubjectPublicKeyInfo (RSA 2048, the TPM's standard EK). */
  ekPublicKey: z.string().max(LIMITS.ekPublicKeyLength).startsWith('-----BEGIN PUBLIC KEY-----'),
  /** The manufacturer CA that vouched for the EK, when the token was issued for an EK certificate. */
  ekCertificateIssuer: z.string().max(LIMITS.messageLength).optional(),
  /**
   * That EK certificate, PEM, followed by the intermediates presented with it: checked again
   * against the configured manufacturer CAs and CRLs at each challenge and answer.
   */
  ekCertificate: z
    .string()
    .max(LIMITS.ekCertificateLength)
    .startsWith('-----BEGIN CERTIFICATE-----')
    .optional(),
  /** A machine re-installed with the same TPM may join again under its name (the token's one use). */
  allowRejoin: z.boolean().default(false),
});
export type TokenAttestation = z.infer<typeof TokenAttestationSchema>;

export const FlavoredTokenSpecSchema = z
  .object({
    /** The FlavorClass the token grants. Immutable. */
    flavorClassName: z.string().max(253).regex(DNS_SUBDOMAIN_RE, { message: 'must be a DNS subdomain' }),
    /** Validity after creation (h/m/s duration). At most one of ttl and expiresAt. Immutable. */
    ttl: TtlSchema.optional(),
    /** Absolute expiry. At most one of ttl and expiresAt. Immutable. */
    expiresAt: DateTimeSchema.optional(),
    /** How many nodes may join (default 1); 0 = no count limit until expiry. Immutable. */
    maxUses: z.number().int().min(0).max(LIMITS.maxUses).default(DEFAULT_MAX_USES),
    /** Exact expected node name. At most one of nodeName and nodeNamePattern. Immutable. */
    nodeName: z
      .string()
      .max(LIMITS.nodeNameLength)
      .regex(DNS_SUBDOMAIN_RE, { message: 'must be a DNS subdomain' })
      .optional(),
    /** Glob of expected node names ('*' only). Immutable. */
    nodeNamePattern: z
      .string()
      .max(LIMITS.nodeNameLength)
      .regex(NODE_NAME_GLOB_RE, { message: "must hold only lowercase letters, digits, '.', '-' and '*'" })
      .optional(),
    /** Free text for humans. Mutable. */
    description: z.string().max(LIMITS.descriptionLength).optional(),
    /** What revoking or deleting the token does to nodes that joined with it. Mutable. */
    revocationPolicy: RevocationPolicySchema.default('Keep'),
    /** true revokes the token and keeps the record; cannot be set back to false. */
    revoked: z.boolean().default(false),
    /** The TPM whose holder alone may use the token (attested join). Immutable. */
    attestation: TokenAttestationSchema.optional(),
  })
  .superRefine((spec, ctx) => {
    if (spec.ttl !== undefined && spec.expiresAt !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['expiresAt'], message: 'set at most one of ttl and expiresAt' });
    }
    if (spec.nodeName !== undefined && spec.nodeNamePattern !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['nodeNamePattern'],
        message: 'set at most one of nodeName and nodeNamePattern',
      });
    }
  });
/** A FlavoredToken spec as written (defaulted fields optional). */
type FlavoredTokenSpecInput = z.input<typeof FlavoredTokenSpecSchema>;

const TokenBindingSchema = z.object({
  /** The node's name (CSR common name system:node:<name>). */
  nodeName: z.string().max(LIMITS.nodeNameLength),
  /** The CertificateSigningRequest the node made with the token. */
  csrName: z.string().max(253),
  /** When the controller bound the token to the node. */
  boundAt: DateTimeSchema,
  /** The Node's UID, once the Node exists. */
  nodeUID: z.string().max(LIMITS.nodeUIDLength).optional(),
  /** When the node's flavor token was verified and the flavor applied. */
  verifiedAt: DateTimeSchema.optional(),
  /** A token bound to a TPM: the number of the proof (attestation) this join used. */
  attestation: int32.min(1).optional(),
  /** Why the node is not verified, while it is not (cleared once it is). */
  failure: z
    .object({
      reason: z.string().max(LIMITS.reasonLength).regex(REASON_RE),
      message: z.string().max(LIMITS.messageLength),
      since: DateTimeSchema,
    })
    .optional(),
});
export type TokenBinding = z.infer<typeof TokenBindingSchema>;

/** A CSR made with the token that was not bound, and why (the reason is also the Event's). */
const TokenRejectionSchema = z.object({
  csrName: z.string().max(253),
  nodeName: z.string().max(LIMITS.nodeNameLength).optional(),
  reason: z.string().max(LIMITS.reasonLength).regex(REASON_RE),
  message: z.string().max(LIMITS.messageLength),
  at: DateTimeSchema,
});
export type TokenRejection = z.infer<typeof TokenRejectionSchema>;

export const FlavoredTokenStatusSchema = z.object({
  /** The bootstrap token's public ID; never a secret. */
  tokenID: z.string().regex(TOKEN_ID_RE).optional(),
  expiresAt: DateTimeSchema.optional(),
  /** How many nodes have joined with the token so far. */
  uses: int32.min(0).optional(),
  /** One entry per node name (x-kubernetes-list-type: map keyed by nodeName). */
  bindings: z
    .array(TokenBindingSchema)
    .max(LIMITS.bindings)
    .superRefine(uniqueBy((b: TokenBinding) => b.nodeName, 'binding nodeName'))
    .optional(),
  /** The latest CSRs made with the token that were not bound (newest last). */
  rejections: z
    .array(TokenRejectionSchema)
    .max(LIMITS.rejections)
    .superRefine(uniqueBy((r: TokenRejection) => r.csrName, 'rejection csrName'))
    .optional(),
  conditions: ConditionsSchema.optional(),
  /** A token bound to a TPM: which of its machine's proofs (attestations) were used (ADR 0014). */
  attestation: z
    .object({
      /** The latest proof a binding used (kept when the binding is released): a new one needs a later proof. */
      bound: int32.min(1).optional(),
      /** The latest proof whose bootstrap Secret the controller deleted (a later proof minted a new one). */
      deleted: int32.min(1).optional(),
    })
    .optional(),
  observedGeneration: int64.min(0).optional(),
});
export type FlavoredTokenStatus = z.infer<typeof FlavoredTokenStatusSchema>;

/** An object as the API server returns it (a watch, a list, a write's answer): these are always set. */
export type Stored<T extends { metadata: object }> = T & {
  metadata: { name: string; uid: string; resourceVersion: string; creationTimestamp: string };
};

/**
 * Parses an object the API server returned against its schema (defaults applied), and checks the
 * metadata the server always sets; undefined when it does not conform (the CRD and the code
 * drifted: the API server validated it, so in practice this does not happen).
 */
export function parseStored<S extends z.ZodType<{ metadata: object }>>(
  schema: S,
  raw: unknown,
): Stored<z.output<S>> | undefined {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) return undefined;
  const metadata = parsed.data.metadata as Partial<Stored<{ metadata: object }>['metadata']>;
  const set = (v: unknown) => typeof v === 'string' && v !== '';
  if (
    !set(metadata.name) ||
    !set(metadata.uid) ||
    !set(metadata.resourceVersion) ||
    !set(metadata.creationTimestamp)
  )
    return undefined;
  return parsed.data as Stored<z.output<S>>;
}

/** A FlavoredToken; the issuer labels it with TOKEN_ID_LABEL. It never holds a secret. */
export const FlavoredTokenSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(FLAVORED_TOKEN_KIND),
  metadata: ObjectMetaSchema,
  spec: FlavoredTokenSpecSchema,
  status: FlavoredTokenStatusSchema.optional(),
});
export type FlavoredToken = z.infer<typeof FlavoredTokenSchema>;
/** A FlavoredToken as read from the API server (the one type the controller and the issuer share). */
export type StoredFlavoredToken = Stored<FlavoredToken>;
export type FlavoredTokenInput = z.input<typeof FlavoredTokenSchema>;

// ---------------------------------------------------------------------------------------------
// NodeNameClaim

/** The token whose binding holds a node name. */
const ClaimHolderSchema = z.object({
  tokenName: z.string().max(253),
  tokenUID: z.string().max(128),
  tokenID: z.string().regex(TOKEN_ID_RE),
  csrName: z.string().max(253),
  claimedAt: DateTimeSchema,
});
export type ClaimHolder = z.infer<typeof ClaimHolderSchema>;

export const NodeNameClaimSpecSchema = z.object({
  /** Absent once released: the name may be claimed again, and is still quarantined at registration. */
  holder: ClaimHolderSchema.optional(),
  releasedAt: DateTimeSchema.optional(),
});

/** Why a join's node is not verified (the reason is the Warning Event's). */
const JoinFailureSchema = z.object({
  reason: z.string().max(LIMITS.reasonLength).regex(REASON_RE),
  message: z.string().max(LIMITS.messageLength),
  since: DateTimeSchema,
});
export type JoinFailure = z.infer<typeof JoinFailureSchema>;

/**
 * The join the claim carries (the current one, or the last once released): its token, its
 * request, and what became of it after the approval (ADR 0016).
 */
const JoinSchema = z.object({
  tokenName: z.string().max(253),
  tokenID: z.string().regex(TOKEN_ID_RE),
  /** The request that made the join (a retry of the same join is approved on spec.holder.csrName). */
  csrName: z.string().max(253),
  /** The Node that registered under this join, once seen. */
  nodeUID: z.string().max(LIMITS.nodeUIDLength).optional(),
  registeredAt: DateTimeSchema.optional(),
  /** When the node's flavor token was verified and the flavor applied. */
  verifiedAt: DateTimeSchema.optional(),
  /** Why the node is not verified, while it is not. */
  failure: JoinFailureSchema.optional(),
  /**
   * The token was consumed by its joins and its bootstrap Secret deleted before this join's Node
   * was recorded (the deletion is done once, then recorded here).
   */
  secretDeleted: z.boolean().optional(),
});
export type Join = z.infer<typeof JoinSchema>;

export const JOIN_HISTORY_EVENTS = [
  'Claimed',
  'Retried',
  'Rebound',
  'Registered',
  'Verified',
  'Refused',
  'Released',
] as const;
export type JoinHistoryEvent = (typeof JOIN_HISTORY_EVENTS)[number];

/** One step of a name's joins, as `kubectl describe nodenameclaim` shows them (newest last). */
const JoinHistoryEntrySchema = z.object({
  at: DateTimeSchema,
  event: z.enum(JOIN_HISTORY_EVENTS),
  tokenID: z.string().regex(TOKEN_ID_RE).optional(),
  csrName: z.string().max(253).optional(),
  nodeUID: z.string().max(LIMITS.nodeUIDLength).optional(),
  reason: z.string().max(LIMITS.reasonLength).regex(REASON_RE).optional(),
  message: z.string().max(LIMITS.messageLength).optional(),
});
export type JoinHistoryEntry = z.infer<typeof JoinHistoryEntrySchema>;

export const NodeNameClaimStatusSchema = z.object({
  join: JoinSchema.optional(),
  history: z.array(JoinHistoryEntrySchema).max(LIMITS.joinHistory).optional(),
});
export type NodeNameClaimStatus = z.infer<typeof NodeNameClaimStatusSchema>;

/**
 * A node name claimed through nodeflavor (ADR 0011), and the record of the join that claimed it
 * (ADR 0016): its name is the node name. Written only by the controller's join reconciler.
 */
export const NodeNameClaimSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(NODE_NAME_CLAIM_KIND),
  metadata: ObjectMetaSchema,
  spec: NodeNameClaimSpecSchema,
  status: NodeNameClaimStatusSchema.optional(),
});
export type NodeNameClaim = z.infer<typeof NodeNameClaimSchema>;

// ---------------------------------------------------------------------------------------------
// Durations and expiry

const UNIT_MS: Readonly<Record<string, number>> = { h: 3_600_000, m: 60_000, s: 1_000 };
/** The longest duration Go (and so Kubernetes CEL's duration()) can represent, in whole ms. */
export const MAX_DURATION_MS = 9_223_372_036_854;
/** DEFAULT_TTL in milliseconds. */
export const DEFAULT_TTL_MS = 24 * 3_600_000;

/**
 * Parses a Go-style duration restricted to the units h, m and s ('1h30m', '90s', '1.5h') into
 * milliseconds (rounded to the nearest ms). Throws on anything else: an empty string, a sign, a
 * missing number or unit, other units (d, ms, us, ns, ...), or more than MAX_DURATION_MS.
 */
export function parseDuration(text: string): number {
  const ms = Math.round(durationMs(text));
  if (ms > MAX_DURATION_MS) {
    throw new Error(`invalid duration ${JSON.stringify(text)}: longer than the maximum of 2562047h47m16s`);
  }
  return ms;
}

/** The duration in (possibly fractional) milliseconds; throws as parseDuration does but for the maximum. */
function durationMs(text: string): number {
  if (typeof text !== 'string' || text === '') {
    throw new Error('invalid duration "": expected e.g. 30m, 1h or 1h30m');
  }
  const component = /([0-9]+(?:\.[0-9]+)?)?([^0-9.]*)/y;
  let total = 0;
  let pos = 0;
  while (pos < text.length) {
    component.lastIndex = pos;
    const m = component.exec(text);
    const number = m?.[1];
    const unit = m?.[2] ?? '';
    if (m === null || number === undefined) {
      throw new Error(`invalid duration ${JSON.stringify(text)}: expected a number at offset ${pos}`);
    }
    if (unit === '') {
      throw new Error(
        `invalid duration ${JSON.stringify(text)}: missing unit after ${number} (use h, m or s)`,
      );
    }
    const unitMs = UNIT_MS[unit];
    if (unitMs === undefined) {
      throw new Error(
        `invalid duration ${JSON.stringify(text)}: unit ${JSON.stringify(unit)} is not supported (use h, m or s, e.g. 24h)`,
      );
    }
    total += Number(number) * unitMs;
    pos = component.lastIndex;
  }
  return total;
}

/**
 * When a token with this spec expires: spec.expiresAt if set, else `now` + spec.ttl, else `now` +
 * DEFAULT_TTL (24h). Pass the object's creation time (metadata.creationTimestamp) as `now` so
 * that the answer is the same every time; the issuer records it in status.expiresAt. Throws if
 * both ttl and expiresAt are set or either is malformed.
 */
/**
 * A record's expiry: the controller's status.expiresAt once written, else what it will write (from
 * the spec and the creation time; `now` stands in for a record not created yet).
 */
export function recordExpiresAt(
  token: {
    spec: Pick<FlavoredTokenSpecInput, 'ttl' | 'expiresAt'>;
    status?: { expiresAt?: string };
    metadata: { creationTimestamp?: string };
  },
  now: Date,
): Date {
  if (token.status?.expiresAt) return new Date(token.status.expiresAt);
  return tokenExpiry(
    token.spec,
    token.metadata.creationTimestamp ? new Date(token.metadata.creationTimestamp) : now,
  );
}

export function tokenExpiry(spec: Pick<FlavoredTokenSpecInput, 'ttl' | 'expiresAt'>, now: Date): Date {
  if (spec.ttl !== undefined && spec.expiresAt !== undefined) {
    throw new Error('set at most one of ttl and expiresAt');
  }
  if (spec.expiresAt !== undefined) {
    const expiresAt = parseTimestamp(spec.expiresAt);
    if (expiresAt === undefined) {
      throw new Error(`invalid expiresAt ${JSON.stringify(spec.expiresAt)}: expected an RFC 3339 timestamp`);
    }
    return expiresAt;
  }
  const base = now.getTime();
  if (Number.isNaN(base)) throw new Error('invalid date for now');
  return new Date(base + parseDuration(spec.ttl ?? DEFAULT_TTL));
}

// ---------------------------------------------------------------------------------------------
// Node names

/**
 * Whether a node of this name may join with a token of this spec: exactly spec.nodeName if set;
 * the whole name matching the glob spec.nodeNamePattern if set, where '*' matches any run
 * (possibly empty) of [a-z0-9.-] and every other character matches itself; true when neither is
 * set. Fails closed: a malformed pattern, or a name holding any character outside [a-z0-9.-]
 * (which no pattern character can match), never matches.
 */
export function matchesNodeName(
  spec: Pick<FlavoredTokenSpecInput, 'nodeName' | 'nodeNamePattern'>,
  nodeName: string,
): boolean {
  if (spec.nodeName !== undefined && spec.nodeName !== nodeName) return false;
  if (spec.nodeNamePattern !== undefined) {
    const pattern = spec.nodeNamePattern;
    if (pattern.length > LIMITS.nodeNameLength || !NODE_NAME_GLOB_RE.test(pattern)) return false;
    if (!NODE_NAME_CHARS_RE.test(nodeName)) return false;
    return globMatch(pattern, nodeName);
  }
  return true;
}

/** Anchored glob match with '*' as the only wildcard; O(pattern × name), no backtracking blow-up. */
function globMatch(pattern: string, name: string): boolean {
  let p = 0;
  let n = 0;
  let star = -1;
  let resume = 0;
  while (n < name.length) {
    if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      resume = n;
    } else if (p < pattern.length && pattern[p] === name[n]) {
      p++;
      n++;
    } else if (star !== -1) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === '*') p++;
  return p === pattern.length;
}
