// The optional parts of `nodeflavor run` besides the controller: the admission webhook and the
// token-issuer API. Each returns a readiness check and a stop function.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Config } from '../config.ts';
import type { ReadinessCheck } from '../ops/server.ts';

export interface RunningPart {
  check: ReadinessCheck;
  stop: () => Promise<void>;
}

export async function startOptionalParts(_options: {
  kubeConfig: KubeConfig;
  config: Config;
  registry: Registry;
  log: Logger;
}): Promise<RunningPart[]> {
  return [];
}
