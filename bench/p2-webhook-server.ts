// P2's webhook server on its own, in its own process: startWebhookServer (the HTTPS endpoint
// `nodeflavor run` serves, minus the Kubernetes side: TLS from a throwaway CA, keys from a fixed
// FlavorClass), logging as `nodeflavor run` does (pino JSON, level info, synchronous writes) to a
// file. Writes {port, caPem, pid} to --ready-file once listening. With --profile-dir, SIGUSR2
// starts and stops a CPU profile (p2-signal-profiler.ts); SIGTERM closes the server and exits.
//   node --import tsx bench/p2-webhook-server.ts --ready-file F --log-file L [--profile-dir D]
import { writeFileSync } from 'node:fs';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { protectedKeysFromFlavorClasses } from '../src/flavor/admission.ts';
import { createCertificateAuthority, issueCertificate } from '../src/pki/certs.ts';
import { AdmissionMetrics } from '../src/webhook/metrics.ts';
import { startWebhookServer } from '../src/webhook/server.ts';
import { P2_ADMIN_GROUP, P2_FLAVOR_KEYS } from './p2-reviews.ts';
import { profileOnSignal } from './p2-signal-profiler.ts';

function arg(name: string, fallback?: string): string {
  const at = process.argv.indexOf(`--${name}`);
  const value = at >= 0 ? process.argv[at + 1] : fallback;
  if (value === undefined) throw new Error(`--${name} is required`);
  return value;
}

const readyFile = arg('ready-file');
const logFile = arg('log-file');
const profileDir = arg('profile-dir', '');
const profiler = profileDir === '' ? undefined : profileOnSignal(profileDir, 'webhook-server');

const ca = await createCertificateAuthority('p2-webhook-bench-ca', 3_600_000);
const serving = await issueCertificate(ca, {
  commonName: 'nodeflavor-webhook',
  ipAddresses: ['127.0.0.1'],
  usage: 'server',
  validFor: 3_600_000,
});
const logger = pino(
  {
    level: 'info',
    base: { component: 'nodeflavor' },
    redact: {
      paths: ['*.token', '*.secret', '*.authorization', '*.key', 'req.headers.authorization'],
      censor: '[redacted]',
    },
  },
  pino.destination({ dest: logFile, sync: true }),
).child({ component: 'admission' });
const protectedKeys = protectedKeysFromFlavorClasses([P2_FLAVOR_KEYS]);
const policy = {
  controllerUsernames: ['system:serviceaccount:nodeflavor:nodeflavor'],
  adminGroups: [P2_ADMIN_GROUP],
  protectedKeys,
};
const server = await startWebhookServer({
  host: '127.0.0.1',
  port: 0,
  certificate: serving,
  policy: () => policy,
  metrics: new AdmissionMetrics(new Registry()),
  logger,
});
writeFileSync(readyFile, JSON.stringify({ port: server.port, caPem: ca.certPem, pid: process.pid }));

process.once('SIGTERM', () => {
  void (async () => {
    await profiler?.flush();
    await server.close();
    process.exit(0);
  })();
});
