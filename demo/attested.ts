// The demo's attested join (ADR 0014): two machines with software TPMs of one manufacturer. A
// sweet token is bound to machine C's TPM (its EK certificate); its material holds no secret.
// Copied to machine D, the material earns nothing; on C, the script proves the TPM and C joins.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RealNode, RealNodeHost } from '../test/e2e/realnode/real-node.ts';
import { runAttestScript } from '../test/e2e/support/attestation.ts';
import type { E2EEnvironment } from '../test/e2e/support/environment.ts';
import { waitAllFlavored } from '../test/e2e/support/operator-fixture.ts';
import { createEkAndAk, manufactureTpm, type RunningTpm, startTpm } from '../test/e2e/support/swtpm.ts';
import { issueThroughApi, nodeTable } from './steps.ts';

export async function attestedJoin(options: {
  env: E2EEnvironment;
  host: RealNodeHost;
  dir: string;
  url: string;
  ca: string;
  bearer: string;
  realNodes: RealNode[];
  tpms: RunningTpm[];
  say: (line: string) => void;
}): Promise<void> {
  const { env, host, dir, url, ca, bearer, realNodes, tpms, say } = options;
  say('attested join: machines C and D get software TPMs from one manufacturer (swtpm + swtpm_localca)');
  const manufacturer = join(dir, 'tpm-manufacturer');
  const machine = async (name: string) => {
    const state = join(dir, `tpm-${name}`);
    mkdirSync(state, { recursive: true });
    const made = await manufactureTpm({ caDir: manufacturer, stateDir: state });
    const tpm = await startTpm(state);
    tpms.push(tpm);
    return { tpm, made, keys: await createEkAndAk(tpm.tcti, join(state, 'keys')), dir: state };
  };
  const c = await machine('c');
  const d = await machine('d');
  // What the operator was started with: the issuer's CA for the script, the TPM manufacturer's CAs.
  writeFileSync(join(dir, 'issuer-ca.pem'), ca);
  writeFileSync(join(dir, 'tpm-manufacturers.pem'), c.made.manufacturerCertsPem.join('\n'));
  const base64 = c.keys.ekCert.bytes
    .toString('base64')
    .match(/.{1,64}/g)
    ?.join('\n');
  const ekCertificate = `-----BEGIN CERTIFICATE-----\n${base64}\n-----END CERTIFICATE-----\n`;
  const issued = await issueThroughApi(url, ca, bearer, 'sweet', { attestation: { ekCertificate } });
  const parsed = JSON.parse(issued.body) as { bootstrapToken: string | null; cloudInit: string };
  console.log(
    `    POST /v1/tokens {attestation: C's EK certificate} → ${issued.id}: bootstrapToken ${parsed.bootstrapToken}, a ${parsed.cloudInit.length}-byte cloud-init holding no secret`,
  );
  const run = (on: typeof c, what: string) =>
    runAttestScript({
      script: issued.attestScript ?? '',
      joinTemplate: issued.joinConfiguration,
      issuerCaPem: ca,
      tcti: on.tpm.tcti,
      dir: join(on.dir, what),
    });

  say('the material copied to machine D (another TPM) runs nodeflavor-attest');
  const copied = await run(d, 'copied');
  console.log(`    exit ${copied.code}: ${copied.stderr.trim()}`);
  if (copied.code === 0) throw new Error('the copied material was not refused');

  say('on machine C, nodeflavor-attest proves the TPM, then a real kubeadm join runs');
  const attested = await run(c, 'join');
  if (attested.code !== 0) throw new Error(`attestation on C failed: ${attested.stderr}`);
  console.log(`    ${attested.stdout.trim()}`);
  const node = await host.startNode({
    name: 'node-c',
    joinConfiguration: readFileSync(attested.joinConfigPath, 'utf8'),
    discoveryKubeconfig: issued.discoveryKubeconfig,
  });
  realNodes.push(node);
  await node.joined();
  await waitAllFlavored(env, 'sweet', ['node-a', 'node-c'], 60_000);
  console.log('');
  console.log(await nodeTable(env));
  console.log('');
}
