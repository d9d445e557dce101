// The optional parts of `nodeflavor run` besides the controller: the admission guard and the
// token-issuer API. Each returns at once with a readiness check (saying what it waits for) and a
// stop function, and starts in the background: nothing here holds up /healthz.
import type { Server as HttpsServer } from 'node:https';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { type Config, issuerConfigFor } from '../config.ts';
import { CaConfigMapStore } from '../kube/ca-configmap.ts';
import type { FlavorClassCache } from '../kube/flavor-classes.ts';
import type { KeyRingWatch } from '../kube/keyring-watch.ts';
import { protectedKeysFrom } from '../kube/protected-keys-source.ts';
import type { TokenCaches } from '../kube/token-caches.ts';
import type { CertificateSource } from '../pki/certificate-source.ts';
import { DEFAULT_SERVING_LIFETIME_MS, servingNames } from '../pki/serving-bundle.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import type { Leadership } from '../runtime/leader.ts';
import type { ReadinessCheck } from '../runtime/ops-server.ts';
import { publishServingCa } from '../tokenissuer/ca-publisher.ts';
import { startTokenIssuer } from '../tokenissuer/server.ts';
import { CertManagerTls } from '../webhook/cert-manager-tls.ts';
import { listenAddress, startAdmission } from '../webhook/index.ts';
import { SelfManagedTls } from '../webhook/self-managed-tls.ts';
import { WebhookTlsStore } from '../webhook/webhook-tls-store.ts';

interface RunningPart {
  check: ReadinessCheck;
  stop: () => Promise<void>;
}

interface PartOptions {
  kubeConfig: KubeConfig;
  config: Config;
  registry: Registry;
  log: Logger;
  /** The process's one key ring (the controller shares it). */
  keyRing?: KeyRingWatch;
  /** The process's leadership: only the leader writes shared objects (the admission registration). */
  leadership?: Leadership;
  /** The process's one FlavorClass cache (the controller reads it too). */
  classes: FlavorClassCache;
  /** The process's token and join-record caches (the controller reads them too). */
  tokenCaches?: TokenCaches;
}

export function startOptionalParts(options: PartOptions): RunningPart[] {
  const parts: RunningPart[] = [];
  if (options.config.webhook) parts.push(startAdmissionPart(options));
  if (options.config.issuer) parts.push(startIssuerPart(options));
  return parts;
}

function startAdmissionPart(options: PartOptions): RunningPart {
  const { log, leadership } = options;
  const keys = protectedKeysFrom(options.classes);
  const admission = startAdmission({
    kubeConfig: options.kubeConfig,
    config: options.config,
    registry: options.registry,
    logger: log,
    protectedKeys: keys,
    ...(leadership ? { leadership } : {}),
  });
  let failed: string | undefined;
  admission.ready.catch((error: Error) => {
    failed = error.message;
    log.error({ err: error.message }, 'admission guard failed to start');
  });
  return {
    check: {
      name: 'admission',
      ready: () => admission.isReady(),
      reason: () => (failed ? `failed to start: ${failed}` : admission.notReadyReason()),
    },
    stop: async () => {
      await admission.stop();
      keys.stop();
    },
  };
}

/** The issuer's serving certificate: the same self-managed (or cert-manager) Secret scheme as the webhook. */
function issuerCertificates(kubeConfig: KubeConfig, config: Config, log: Logger): CertificateSource {
  const store = new WebhookTlsStore(kubeConfig, config.namespace, config.issuerTlsSecret);
  if (config.tlsMode === 'cert-manager') return new CertManagerTls({ store, logger: log });
  // Loopback names too, so a port-forward or an out-of-cluster run verifies against the same CA.
  const names = servingNames({
    service: config.issuerService,
    namespace: config.namespace,
    url: 'https://127.0.0.1',
  });
  return new SelfManagedTls({
    store,
    wanted: { names, servingLifetimeMs: DEFAULT_SERVING_LIFETIME_MS },
    logger: log,
  });
}

function startIssuerPart(options: PartOptions): RunningPart {
  let running: RunningPart | undefined;
  let stopped = false;
  let waiting = 'waiting for its serving certificate';
  const starting = runIssuer(options).then(
    async (part) => {
      if (stopped) await part.stop();
      else running = part;
    },
    (error: Error) => {
      waiting = `failed to start: ${error.message}`;
      options.log.error({ err: error.message }, 'token issuer failed to start');
    },
  );
  return {
    check: {
      name: 'issuer',
      ready: () => running?.check.ready() ?? false,
      reason: () => (running ? running.check.reason?.() : waiting),
    },
    stop: async () => {
      stopped = true;
      await starting;
      await running?.stop();
    },
  };
}

async function runIssuer({
  kubeConfig,
  config,
  registry,
  log,
  keyRing,
  classes,
  tokenCaches,
}: PartOptions): Promise<RunningPart> {
  const certificates = issuerCertificates(kubeConfig, config, log.child({ component: 'issuer-tls' }));
  const first = await certificates.start();
  const { host, port } = listenAddress(config.issuerAddress);
  const issuerConfig = issuerConfigFor(config, {
    listen: { host, port },
    tls: { certPem: first.certPem, keyPem: first.keyPem },
  });
  const issuer = await startTokenIssuer(issuerConfig, kubeConfig, {
    logger: log,
    registry,
    classes,
    ...(tokenCaches ? { tokenCaches } : {}),
    ...(keyRing ? { keyRing } : {}),
  });
  // Renewed certificates are served without a restart.
  certificates.onChange((next) =>
    (issuer.app.server as unknown as HttpsServer).setSecureContext({ cert: next.certPem, key: next.keyPem }),
  );
  // Portals learn the CA from this ConfigMap, never from the Secret (which holds the CA key).
  const caPublisher = publishServingCa(
    certificates,
    new CaConfigMapStore(kubeConfig, config.namespace, config.issuerCaConfigMap),
    log.child({ component: 'issuer-tls' }),
  );
  log.info({ url: issuer.url }, 'token issuer serving');
  return {
    check: { name: 'issuer', ready: () => issuer.ready(), reason: () => issuer.notReadyReason() },
    stop: async () => {
      caPublisher.stop();
      certificates.stop();
      await issuer.close();
    },
  };
}
