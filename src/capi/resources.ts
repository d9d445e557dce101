// The Cluster API objects `nodeflavor capi` reads and writes, typed as far as it uses them, and the
// names it adds to them (annotations, finalizer, conditions). Cluster API v1beta2 (v1.11 and
// later): KubeadmConfig (bootstrap.cluster.x-k8s.io), Machine and Cluster (cluster.x-k8s.io).
// Only what this controller reads is typed; writes start from the object as the API server
// returned it, so nothing it does not know is ever dropped.
import { z } from 'zod';

export const CAPI_GROUP = 'cluster.x-k8s.io';
export const CAPI_VERSION = 'v1beta2';
export const BOOTSTRAP_GROUP = 'bootstrap.cluster.x-k8s.io';
export const KUBEADM_CONFIG_KIND = 'KubeadmConfig';
export const MACHINE_KIND = 'Machine';
export const MACHINE_POOL_KIND = 'MachinePool';
export const KUBEADM_CONTROL_PLANE_KIND = 'KubeadmControlPlane';

/** Cluster API's own names. */
export const PAUSED_ANNOTATION = 'cluster.x-k8s.io/paused';
export const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';
export const CONTROL_PLANE_LABEL = 'cluster.x-k8s.io/control-plane';
export const MACHINE_POOL_LABEL = 'cluster.x-k8s.io/pool-name';

/**
 * What a user sets, on `MachineDeployment.spec.template.metadata.annotations` (Cluster API copies
 * it to every Machine and KubeadmConfig of the deployment): the FlavorClass its Machines join as.
 */
export const FLAVOR_CLASS_ANNOTATION = 'nodeflavor.io/flavor-class';
/**
 * Optional, beside it: `machine` pins each Machine's token to the Machine's name and has kubeadm
 * register the node under that name (for infrastructure that names hosts after Machines).
 */
export const NODE_NAME_ANNOTATION = 'nodeflavor.io/node-name';
export const NODE_NAME_FROM_MACHINE = 'machine';

/** Written by the controller on a KubeadmConfig it filled: the public ID of its token. */
export const TOKEN_ID_ANNOTATION = 'nodeflavor.io/token-id';
/**
 * Written when an issuance had to start over under a new Idempotency-Key (the old key was refused:
 * older than the issuer's idempotency TTL, or its token revoked before the fill): the attempt number.
 */
export const ISSUANCE_ATTEMPT_ANNOTATION = 'nodeflavor.io/issuance-attempt';
/** Keeps a KubeadmConfig until its token is revoked (a Machine gone before its node joined). */
export const CAPI_FINALIZER = 'nodeflavor.io/capi-revoke-token';

/** The condition on a KubeadmConfig: whether its token is in place, or why it waits. */
export const TOKEN_CONDITION = 'NodeFlavorToken';
/** The condition on a Machine, for spec.readinessGates: its node is verified as its flavor. */
export const VERIFIED_CONDITION = 'NodeFlavorVerified';

/** Why a KubeadmConfig (and its Machine) waits, or what happened: the condition reason and Event reason. */
export const Reason = {
  Issued: 'Issued',
  WaitingForMachine: 'WaitingForMachine',
  WaitingForControlPlane: 'WaitingForControlPlane',
  IssuerNotConfigured: 'IssuerNotConfigured',
  IssuerUnreachable: 'IssuerUnreachable',
  IssuerRefused: 'IssuerRefused',
  FlavorClassNotFound: 'FlavorClassNotFound',
  FlavorNotAllowed: 'FlavorNotAllowed',
  InvalidAnnotation: 'InvalidAnnotation',
  NotPaused: 'NotPaused',
  MachinePoolUnsupported: 'MachinePoolUnsupported',
  RenderedBeforeFill: 'RenderedBeforeFill',
  WaitingForToken: 'WaitingForToken',
  WaitingForNode: 'WaitingForNode',
  Verifying: 'Verifying',
  WaitingForNodeRef: 'WaitingForNodeRef',
  Verified: 'Verified',
  VerificationFailed: 'VerificationFailed',
  NodeMismatch: 'NodeMismatch',
  FlavorChanged: 'FlavorChanged',
  TokenExpired: 'TokenExpired',
  TokenRevoked: 'TokenRevoked',
} as const;
export type Reason = (typeof Reason)[keyof typeof Reason];

/** Reasons that need a human: their Events are Warnings (the rest are progress, or Normal). */
export const WARNING_REASONS: ReadonlySet<string> = new Set([
  Reason.IssuerNotConfigured,
  Reason.IssuerUnreachable,
  Reason.IssuerRefused,
  Reason.FlavorClassNotFound,
  Reason.FlavorNotAllowed,
  Reason.InvalidAnnotation,
  Reason.NotPaused,
  Reason.MachinePoolUnsupported,
  Reason.RenderedBeforeFill,
  Reason.VerificationFailed,
  Reason.NodeMismatch,
  Reason.FlavorChanged,
  Reason.TokenExpired,
  Reason.TokenRevoked,
]);

const ConditionSchema = z.object({
  type: z.string(),
  status: z.enum(['True', 'False', 'Unknown']),
  reason: z.string().optional(),
  message: z.string().optional(),
  lastTransitionTime: z.string().optional(),
  observedGeneration: z.number().optional(),
});
export type CapiCondition = z.infer<typeof ConditionSchema>;

const OwnerReferenceSchema = z.object({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  uid: z.string(),
  controller: z.boolean().optional(),
});
export type OwnerReference = z.infer<typeof OwnerReferenceSchema>;

const MetadataSchema = z.object({
  name: z.string(),
  namespace: z.string().default(''),
  uid: z.string().default(''),
  resourceVersion: z.string().optional(),
  generation: z.number().optional(),
  deletionTimestamp: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  finalizers: z.array(z.string()).optional(),
  ownerReferences: z.array(OwnerReferenceSchema).optional(),
});

/** A KubeadmConfig as cached: its metadata and the status fields the controller reads (no spec). */
export const CachedKubeadmConfigSchema = z.object({
  metadata: MetadataSchema,
  status: z
    .object({
      dataSecretName: z.string().optional(),
      initialization: z.object({ dataSecretCreated: z.boolean().optional() }).optional(),
      conditions: z.array(ConditionSchema).optional(),
    })
    .optional(),
});
export type CachedKubeadmConfig = z.infer<typeof CachedKubeadmConfigSchema>;

export const CachedMachineSchema = z.object({
  metadata: MetadataSchema,
  spec: z
    .object({
      clusterName: z.string().optional(),
      bootstrap: z
        .object({
          configRef: z
            .object({ apiGroup: z.string().optional(), kind: z.string(), name: z.string() })
            .optional(),
        })
        .optional(),
    })
    .optional(),
  status: z
    .object({
      nodeRef: z.object({ name: z.string() }).optional(),
      conditions: z.array(ConditionSchema).optional(),
    })
    .optional(),
});
export type CachedMachine = z.infer<typeof CachedMachineSchema>;

export const CachedClusterSchema = z.object({
  metadata: MetadataSchema,
  status: z
    .object({
      initialization: z.object({ controlPlaneInitialized: z.boolean().optional() }).optional(),
      conditions: z.array(ConditionSchema).optional(),
    })
    .optional(),
});
export type CachedCluster = z.infer<typeof CachedClusterSchema>;

/** The Cluster a KubeadmConfig or Machine belongs to (Cluster API's own label). */
export function clusterNameOf(object: {
  metadata: { labels?: Record<string, string> | undefined };
}): string | undefined {
  return object.metadata.labels?.[CLUSTER_NAME_LABEL];
}

/** Whether the Cluster's control plane is up (v1beta2 status, or its condition). */
export function controlPlaneInitialized(cluster: CachedCluster): boolean {
  if (cluster.status?.initialization?.controlPlaneInitialized === true) return true;
  return (cluster.status?.conditions ?? []).some(
    (c) => c.type === 'ControlPlaneInitialized' && c.status === 'True',
  );
}

/** The controlling owner (the one Cluster API sets: a Machine, a MachineSet, a MachinePool, ...). */
export function controllerOf(object: {
  metadata: { ownerReferences?: OwnerReference[] | undefined };
}): OwnerReference | undefined {
  const owners = object.metadata.ownerReferences ?? [];
  return owners.find((o) => o.controller === true) ?? owners[0];
}

export function conditionOf(
  object: { status?: { conditions?: CapiCondition[] | undefined } | undefined },
  type: string,
): CapiCondition | undefined {
  return object.status?.conditions?.find((c) => c.type === type);
}
