// The admission guard of `nodeflavor run`, wired: the serving certificate (self-managed or
// cert-manager), the HTTPS webhook, and the registration that points the API server at it (and/or
// the ValidatingAdmissionPolicy twin), all following the protected keys as FlavorClasses change.
// Order matters: the keys are known before anything is judged, and the server answers before the
// registration sends the API server to it. With several replicas every one serves the webhook,
// and only the leader writes the registration (AdmissionRegistrar).

import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { type Config, controllerUsername } from '../config.ts';
import type { AdmissionPolicy, ProtectedKeys } from '../flavor/admission.ts';
import { readClaim } from '../kube/node-name-claims.ts';
import type { ProtectedKeysSource } from '../kube/protected-keys-source.ts';
import type { CertificateSource, ServingCertificate } from '../pki/certificate-source.ts';
import { DEFAULT_SERVING_LIFETIME_MS, servingNames } from '../pki/serving-bundle.ts';
import { prepareKubeConfig } from '../runtime/config.ts';
import { faultValue } from '../runtime/failpoints.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import type { Leadership } from '../runtime/leader.ts';
import { AdmissionRegistrar, clusterRoleOwner } from './admission-registration.ts';
import { CertManagerTls } from './cert-manager-tls.ts';
import { desiredRegistration, type OwnerReference, REGISTRATION_REVISION } from './desired-registration.ts';
import { AdmissionMetrics } from './metrics.ts';
import { SelfManagedTls } from './self-managed-tls.ts';
import { startWebhookServer, type WebhookServer } from './server.ts';
import { WebhookTlsStore } from './webhook-tls-store.ts';

export type { ProtectedKeysSource } from '../kube/protected-keys-source.ts';

/** Below the registration's 5 s webhook timeout (quarantine-registration.ts). */
const CLAIM_READ_TIMEOUT_MS = 3_000;

interface AdmissionOptions {
  kubeConfig: KubeConfig;
  config: Config;
  registry: Registry;
  logger: Logger;
  /** The keys to protect; the controller feeds it from its FlavorClass cache. */
  protectedKeys: ProtectedKeysSource;
  /** Lifetime of a self-managed serving certificate (renewed at 2/3). Default 30 days. */
  servingCertificateLifetimeMs?: number;
  /** The process's leadership: only the leader writes the registration. Absent: always writes. */
  leadership?: Leadership;
}

export interface RunningAdmission {
  /** Resolves once the guard is in force: webhook serving (if any) and registration applied. */
  ready: Promise<void>;
  isReady(): boolean;
  /** What the guard is waiting for, while it is not ready (for /readyz). */
  notReadyReason(): string | undefined;
  /** The webhook's bound port, once listening (undefined in policy mode). */
  port(): number | undefined;
  /** Stops serving and reconciling; the registration stays (other replicas still serve it). */
  stop(): Promise<void>;
}

export function startAdmission(options: AdmissionOptions): RunningAdmission {
  const { config, logger: parent } = options;
  prepareKubeConfig(options.kubeConfig);
  const logger = parent.child({ component: 'admission' });
  const metrics = new AdmissionMetrics(options.registry);
  const withWebhook = config.admissionMode !== 'policy';
  let server: WebhookServer | undefined;
  let certificates: CertificateSource | undefined;
  let registrar: AdmissionRegistrar | undefined;
  let unsubscribe: undefined | (() => void);
  let stopped = false;
  let ready = false;
  let waitingFor = 'the FlavorClass watch (the protected keys)';

  const policy = policyCache(config, () => options.protectedKeys.protectedKeys());

  const run = async (): Promise<void> => {
    await options.protectedKeys.ready;
    if (stopped) return;
    if (withWebhook) {
      waitingFor = 'the serving certificate';
      certificates = certificateSource(options, logger);
      const first = await certificates.start();
      if (stopped) return;
      waitingFor = 'the webhook server to listen';
      const { host, port } = listenAddress(config.webhookAddress);
      server = await startWebhookServer({
        host,
        port,
        certificate: first,
        policy,
        metrics,
        logger,
        // Read from the API server for each registration it judges: never a cached answer. Within
        // the API server's wait for the webhook (5 s): a hung read is refused (the kubelet retries,
        // perhaps on another replica), not left to the API server's timeout.
        nameClaimed: async (nodeName) =>
          (await readClaim(options.kubeConfig, nodeName, { timeoutMs: CLAIM_READ_TIMEOUT_MS })) !== undefined,
      });
      if (stopped) {
        await server.close();
        return;
      }
      const serve = (next: ServingCertificate) => {
        server?.setCertificate(next);
        noteCertificate(metrics, next.notAfter);
        registrar?.refresh(); // the caBundle follows a new CA
      };
      noteCertificate(metrics, first.notAfter);
      certificates.onChange(serve);
      // A renewal that landed while the server was starting would otherwise wait for the next one.
      const latest = certificates.current();
      if (latest !== undefined && latest.serial !== first.serial) serve(latest);
      logger.info({ address: config.webhookAddress, port: server.port }, 'admission webhook serving');
    }
    waitingFor = 'the registration owner';
    const owner = await registrationOwner(options, logger);
    if (stopped) return;
    // A fault test stands in an older release by its revision (failpoints.ts).
    const revision = Number(faultValue('registration-revision') ?? REGISTRATION_REVISION);
    registrar = new AdmissionRegistrar({
      kubeConfig: options.kubeConfig,
      logger,
      resyncMs: config.resync,
      revision,
      ...(options.leadership ? { leadership: options.leadership } : {}),
      onDeferred: (deferred) => metrics.registrationDeferred.set(deferred ? 1 : 0),
      desired: () =>
        desiredRegistration(
          config,
          options.protectedKeys.protectedKeys(),
          certificates?.current()?.caPem,
          owner,
          revision,
        ),
    });
    const subscription = options.protectedKeys.onChange(() => registrar?.refresh());
    if (typeof subscription === 'function') unsubscribe = subscription as () => void;
    await registrar.start();
    if (stopped) return;
    ready = true;
    logger.info({ mode: config.admissionMode, name: config.webhookConfigName }, 'admission guard registered');
  };

  return {
    ready: run(),
    isReady: () => ready && !stopped,
    notReadyReason: () => {
      if (stopped) return 'stopped';
      if (ready) return undefined;
      return registrar ? registrar.notAppliedReason : `waiting for ${waitingFor}`;
    },
    port: () => server?.port,
    stop: async () => {
      stopped = true;
      ready = false;
      unsubscribe?.();
      registrar?.stop();
      certificates?.stop();
      await server?.close();
    },
  };
}

/**
 * The registration's owner, when one is configured. Unreadable (RBAC, a typo), the guard still
 * registers, unowned: refusing to guard would be worse than a registration that outlives an
 * uninstall, and the error says what to fix.
 */
async function registrationOwner(
  options: AdmissionOptions,
  logger: Logger,
): Promise<OwnerReference | undefined> {
  const name = options.config.registrationOwner;
  if (name === undefined) return undefined;
  try {
    return await clusterRoleOwner(options.kubeConfig, name);
  } catch (error) {
    logger.error(
      { owner: name, err: (error as Error).message },
      'cannot read the registration owner: the admission registration will not be deleted with it',
    );
    return undefined;
  }
}

function certificateSource(options: AdmissionOptions, logger: Logger): CertificateSource {
  const { config } = options;
  const store = new WebhookTlsStore(options.kubeConfig, config.namespace, config.tlsSecret);
  if (config.tlsMode === 'cert-manager') return new CertManagerTls({ store, logger });
  const names = servingNames({
    service: config.webhookService,
    namespace: config.namespace,
    ...(config.webhookUrl === undefined ? {} : { url: config.webhookUrl }),
  });
  const servingLifetimeMs = options.servingCertificateLifetimeMs ?? DEFAULT_SERVING_LIFETIME_MS;
  return new SelfManagedTls({ store, wanted: { names, servingLifetimeMs }, logger });
}

/** The decision policy, rebuilt only when the key source hands out another key set. */
function policyCache(config: Config, keys: () => ProtectedKeys): () => AdmissionPolicy {
  const controllerUsernames = [controllerUsername(config)];
  let cached: AdmissionPolicy | undefined;
  return () => {
    const protectedKeys = keys();
    if (cached?.protectedKeys !== protectedKeys) {
      cached = { controllerUsernames, adminGroups: config.adminGroups, protectedKeys };
    }
    return cached;
  };
}

/** ':9443' → all interfaces; '127.0.0.1:0', '[::1]:9443'. */
export function listenAddress(address: string): { host?: string; port: number } {
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  const port = Number(address.slice(colon + 1));
  return host === '' ? { port } : { host, port };
}

function noteCertificate(metrics: AdmissionMetrics, notAfter: Date): void {
  metrics.certificateNotAfter.set(notAfter.getTime() / 1000);
  metrics.certificateChanges.inc();
}
