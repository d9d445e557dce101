// nodeflavor capi [--kubeconfig PATH] [flags]: the Cluster API controller, run in the management
// cluster (docs/cluster-api.md). Gives every Machine of a flavored MachineDeployment its own
// single-use token from its workload cluster's issuer, and reports whether its node is verified.
// Exit codes as `nodeflavor run`: 0 clean shutdown, 1 runtime failure, 2 bad usage or configuration.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import pino from 'pino';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { CapiConfigSchema, parseCapiConfig } from '../capi/config.ts';
import { startCapiController } from '../capi/controller.ts';
import { loadKubeConfig } from '../runtime/config.ts';
import { observeKubeRequests } from '../runtime/fetch.ts';
import { kubeRequestCounter } from '../runtime/kube-request-metrics.ts';
import { electorFor, soleLeadership } from '../runtime/leader.ts';
import { splitAddress, startOpsServer } from '../runtime/ops-server.ts';
import { settingsFlagParser } from './run-flags.ts';

export const CAPI_USAGE = `usage: nodeflavor capi [--kubeconfig PATH] [--namespace NS] [--token-ttl 24h]
                       [--status-poll-interval 10s] [--no-leader-elect] [flags]
Runs in the Cluster API management cluster. Flags are the settings in src/capi/config.ts in
kebab-case; NODEFLAVOR_<SETTING> environment variables work too.`;

const parseCapiFlags = settingsFlagParser(CapiConfigSchema.shape);

export async function runCapi(args: string[]): Promise<number> {
  let config: ReturnType<typeof parseCapiConfig>;
  try {
    config = parseCapiConfig(parseCapiFlags(args, process.env));
  } catch (error) {
    process.stderr.write(`nodeflavor capi: ${(error as Error).message}\n${CAPI_USAGE}\n`);
    return 2;
  }
  const log = pino({
    level: config.logLevel,
    base: { component: 'nodeflavor-capi' },
    redact: { paths: ['*.token', '*.authorization', 'req.headers.authorization'], censor: '[redacted]' },
  });
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  observeKubeRequests(kubeRequestCounter(registry));

  let controller: ReturnType<typeof startCapiController> | undefined;
  const { host, port } = splitAddress(config.metricsAddress);
  const ops = await startOpsServer({
    host,
    port,
    registry,
    checks: [
      {
        name: 'caches',
        ready: () => controller !== undefined && controller.unsyncedCaches().length === 0,
        reason: () =>
          `waiting for the first list of ${controller?.unsyncedCaches().join(', ') ?? 'everything'}`,
      },
    ],
  });

  const kubeConfig = loadKubeConfig(config.kubeconfig, { requestTimeoutMs: config.kubeRequestTimeout });
  const identity = `${hostname()}-${randomBytes(4).toString('hex')}`;
  const elector = config.leaderElect ? electorFor(kubeConfig, config, identity, log, true) : undefined;
  controller = startCapiController({
    kubeConfig,
    config,
    registry,
    log,
    leadership: elector ?? soleLeadership(),
  });
  void controller.synced.then(() => elector?.start());
  log.info(
    { namespace: config.namespace, tokenTtl: config.tokenTtl, metrics: config.metricsAddress, identity },
    'nodeflavor capi running',
  );

  return new Promise((resolve) => {
    const shutdown = async (signal: string) => {
      log.info({ signal }, 'shutting down');
      await controller?.stop();
      await elector?.stop(); // after the queues: releasing the Lease hands over at once
      ops.close();
      resolve(0);
    };
    process.once('SIGTERM', () => void shutdown('SIGTERM'));
    process.once('SIGINT', () => void shutdown('SIGINT'));
  });
}
