// The configuration of `nodeflavor capi`, parsed once at start-up (flags, then NODEFLAVOR_*
// environment variables, then these defaults) and passed down, as `nodeflavor run`'s is.
import { z } from 'zod';
import { address, ConfigSchema, durationMs, leaderElectionRules, parseSettings } from '../config.ts';
import { TtlSchema } from '../flavor/resources.ts';

export const DEFAULT_CAPI_NAMESPACE = 'nodeflavor-capi';

export const CapiConfigSchema = z.object({
  kubeconfig: z.string().optional(),
  /** Its own namespace, in the management cluster: its Lease and the issuer access Secrets. */
  namespace: z.string().min(1).default(DEFAULT_CAPI_NAMESPACE),
  leaderElect: ConfigSchema.shape.leaderElect,
  leaderElectionId: z.string().min(1).default('nodeflavor-capi'),
  leaderElectLeaseDuration: ConfigSchema.shape.leaderElectLeaseDuration,
  leaderElectRenewDeadline: ConfigSchema.shape.leaderElectRenewDeadline,
  leaderElectRetryPeriod: ConfigSchema.shape.leaderElectRetryPeriod,
  kubeRequestTimeout: ConfigSchema.shape.kubeRequestTimeout,
  metricsAddress: address.default(':8080'),
  /**
   * How long each Machine's token is valid: long enough for the slowest provisioning (a bare-metal
   * host may take hours), at most the issuer's maxTtl. A Machine not joined by then is reported
   * (TokenExpired) and a MachineHealthCheck replaces it.
   */
  tokenTtl: TtlSchema.default('24h'),
  /** How often a Machine whose node is not verified yet asks the issuer about its token. */
  statusPollInterval: durationMs.refine((ms) => ms >= 200, 'must be at least 200ms').default(10_000),
  /** Every object is reconciled again this often, whatever happened. */
  resync: durationMs.refine((ms) => ms >= 1000, 'must be at least 1s').default(600_000),
  workers: z.number().int().min(1).max(64).default(4),
  logLevel: ConfigSchema.shape.logLevel,
});

export type CapiConfig = z.output<typeof CapiConfigSchema>;

export function parseCapiConfig(raw: Record<string, unknown>): CapiConfig {
  return parseSettings(CapiConfigSchema.superRefine(leaderElectionRules), raw);
}
