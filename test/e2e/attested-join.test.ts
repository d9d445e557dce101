// Attested joins on real nodes with software TPMs (ADR 0014): a token bound to one machine's TPM
// (its EK certificate, from a configured manufacturer) hands out material with no secret in it;
// the machine holding that TPM runs the material's script (tpm2-tools against a real swtpm),
// proves itself to the issuer and joins with a real kubeadm, kubelet and containerd, and the
// controller flavors it through the ordinary chain of trust. The same material on a machine with
// another TPM, a machine that lies about its EK, a replayed exchange and a late answer get
// nothing, each with a clear refusal (HTTP answer, Warning Event, metric, the token's status).
// Issue 32: the issuer knows manufacturer A's root only, the EK certificate comes with its
// intermediate as a vendor's chain does, and an administrator's CRL revoking that intermediate
// refuses its machines at the next challenge; a FlavoredToken written directly (no issuer seal)
// earns nothing, neither join secrets nor a measured-boot flavor; a machine and a clone of its
// TPM state answering at the same instant: one wins, the other 409.
// Its own control plane, as the real-node suite has: real nodes need the kubeadm ConfigMaps.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ATTESTED_ANNOTATION } from '../../src/flavor/attestation-decision.ts';
import {
  answerProof,
  decodeTicket,
  openJoinSecrets,
  type SealedJoinSecrets,
} from '../../src/flavor/attestation-exchange.ts';
import { deriveFlavorToken } from '../../src/flavor/flavor-token.ts';
import { QUARANTINE_TAINT_KEY, TOKEN_ID_LABEL, TOKEN_LABEL_KEY } from '../../src/flavor/resources.ts';
import { Secret } from '../../src/flavor/secret.ts';
import { ekSpkiDer } from '../../src/flavor/tpm/ek-identity.ts';
import { loadKeyRing } from '../../src/kube/keyring-store.ts';
import { createCertificateAuthority } from '../../src/pki/certs.ts';
import { kubeJson } from '../../src/runtime/fetch.ts';
import type { TokenStatusView } from '../../src/tokenissuer/issuance/issue.ts';
import type { IssueResponse } from '../../src/tokenissuer/response.ts';
import type { RunningIssuer } from '../../src/tokenissuer/server.ts';
import { type ChainCa, caFromPem, certificateOf, makeCrl } from '../support/ek-chain.ts';
import { skipUnless } from '../support/skip.ts';
import { applyObjects } from './cluster/apply.ts';
import { freePort } from './cluster/ports.ts';
import { parseJoinConfiguration } from './kubelet-sim/join-config.ts';
import { SimulatedKubelet } from './kubelet-sim/kubelet.ts';
import { type RealNode, RealNodeHost, realNodesUnsupported } from './realnode/real-node.ts';
import { postJson, runAttestScript } from './support/attestation.ts';
import { createBootstrapToken, joinConfiguration } from './support/bootstrap.ts';
import {
  clusterRoleBindingObject,
  serviceAccountObject,
  serviceAccountToken,
  startTestIssuer,
  useFlavorClassesRole,
} from './support/issuer.ts';
import { kubectlFlavor } from './support/kubectl-flavor-cli.ts';
import { applyFlavorClass, OPERATOR_NAMESPACE } from './support/nodeflavor.ts';
import { FLAVOR_LABEL, operatorFixture, waitAllFlavored } from './support/operator-fixture.ts';
import {
  activateCredential,
  createEkAndAk,
  type EkAndAk,
  manufactureTpm,
  type RunningTpm,
  startTpm,
  swtpmMissing,
  tpm2,
} from './support/swtpm.ts';
import { waitFor } from './support/wait.ts';

const unsupported = skipUnless(
  'the attested-join suite (test/e2e/attested-join.test.ts)',
  realNodesUnsupported() ?? swtpmMissing(),
);
const PORTAL = 'attested-portal';
const KEY_SECRET = 'nodeflavor-hmac-keys';
/** Short, so the late-answer test waits for little; a swtpm activates a credential in well under a second. */
const CHALLENGE_SECONDS = 5;

interface Machine {
  tpm: RunningTpm;
  keys: EkAndAk;
  /** Where its EK and AK contexts are (what activateCredential loads). */
  keysDir: string;
  dir: string;
}

describe('attested joins: real nodes with software TPMs', { skip: unsupported }, () => {
  const fx = operatorFixture({
    logPrefix: 'attested',
    controlPlane: {},
    flavorClasses: {
      sweet: {
        labels: { [FLAVOR_LABEL]: 'sweet' },
        taints: [{ key: 'nodeflavor.io/dedicated', value: 'sweet', effect: 'NoSchedule' }],
      },
      sour: { labels: { [FLAVOR_LABEL]: 'sour' } },
    },
  });
  let issuer: RunningIssuer;
  let issuerCa: string;
  let bearer: string;
  let host: RealNodeHost | undefined;
  const nodes: RealNode[] = [];
  /** TPMs of manufacturer A (configured): the bound machine and another machine; of B (unknown). */
  let bound: Machine;
  let other: Machine;
  let foreign: Machine;
  let keyRingVersion: string | undefined;
  /** Manufacturer A: its root (the only certificate the issuer is configured with) and its intermediate. */
  let rootA: ChainCa;
  let intermediateA: string;
  let crlFile: string;
  let manufacturerFile: string;
  let issuerCaFile: string;

  const url = (path: string) => `${issuer.url}${path}`;

  async function machine(name: string, caDir: string): Promise<Machine> {
    const dir = join(fx.logs, name);
    mkdirSync(dir, { recursive: true });
    await manufactureTpm({ caDir, stateDir: join(dir, 'state') });
    const tpm = await startTpm(join(dir, 'state'));
    const keysDir = join(dir, 'keys');
    const keys = await createEkAndAk(tpm.tcti, keysDir);
    return { tpm, keys, keysDir, dir };
  }

  const pem = (der: Buffer) =>
    `-----BEGIN CERTIFICATE-----\n${der
      .toString('base64')
      .match(/.{1,64}/g)
      ?.join('\n')}\n-----END CERTIFICATE-----\n`;

  /** The EK certificate as an administrator pastes a vendor's: followed by the intermediate it came from. */
  const ekChain = (m: Machine) => `${pem(m.keys.ekCert.bytes)}${intermediateA}`;

  async function issue(
    flavor: string,
    attestation: Record<string, unknown>,
  ): Promise<{ status: number; body: IssueResponse & { error?: { message: string } }; text: string }> {
    return postJson<IssueResponse & { error?: { message: string } }>(
      url('/v1/tokens'),
      issuerCa,
      { flavorClassName: flavor, ttl: '1h', attestation },
      bearer,
    );
  }

  async function tokenView(id: string): Promise<TokenStatusView> {
    const answer = await fetchJson(`/v1/tokens/${id}`);
    return answer as TokenStatusView;
  }

  function fetchJson(path: string): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const req = request(
        url(path),
        { ca: issuerCa, headers: { Authorization: `Bearer ${bearer}` } },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk) => {
            text += chunk;
          });
          res.on('end', () => resolve(JSON.parse(text)));
        },
      );
      req.on('error', reject);
      req.end();
    });
  }

  async function bootstrapSecret(tokenId: string) {
    return fx.env.core
      .readNamespacedSecret({ namespace: 'kube-system', name: `bootstrap-token-${tokenId}` })
      .catch(() => undefined);
  }

  async function refusalEvents(tokenName: string): Promise<string[]> {
    const events = await fx.env.core.listNamespacedEvent({
      namespace: 'default',
      fieldSelector: `involvedObject.name=${tokenName},reason=AttestationRefused`,
    });
    return events.items.map((e) => e.message ?? '');
  }

  async function attestationCount(outcome: string): Promise<number> {
    const metric = await issuer.registry.getSingleMetric('nodeflavor_issuer_attestations_total')?.get();
    return metric?.values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
  }

  /** The machine's side of the exchange done by hand (what the script does), for the replay tests. */
  async function challengeFrom(m: Machine, tokenId: string, ekPub: Buffer = m.keys.ekPub.bytes) {
    return postJson<{ ticket: string; credential: string; deadline: string; message?: string }>(
      url(`/v1/attestations/${tokenId}/challenge`),
      issuerCa,
      { ekPublic: ekPub.toString('base64'), akPublic: m.keys.akPub.bytes.toString('base64') },
    );
  }

  /** The material's script on machine `m` (its TPM), trusting `caPem` for the issuer. */
  const runMaterial = (issued: IssueResponse, m: Machine, what: string, caPem = issuerCa) =>
    runAttestScript({
      script: issued.attestScript ?? '',
      joinTemplate: issued.joinConfiguration,
      issuerCaPem: caPem,
      tcti: m.tpm.tcti,
      dir: join(m.dir, what),
    });

  /** A real node joining with what the script wrote: kubeadm join, the kubelet, containerd. */
  async function joinRealNode(
    name: string,
    joinConfigPath: string,
    issued: IssueResponse,
  ): Promise<RealNode> {
    host ??= await RealNodeHost.start(fx.plane?.server ?? fx.env.server);
    const node = await host.startNode({
      name,
      joinConfiguration: readFileSync(joinConfigPath, 'utf8'),
      discoveryKubeconfig: issued.discoveryKubeconfig,
    });
    nodes.push(node);
    await node.joined();
    return node;
  }

  before(async () => {
    await fx.ready();
    const manufacturerA = join(fx.logs, 'manufacturer-a');
    const manufacturerB = join(fx.logs, 'manufacturer-b');
    [bound, other, foreign] = await Promise.all([
      machine('bound', manufacturerA),
      machine('other', manufacturerA),
      machine('foreign', manufacturerB),
    ]);
    manufacturerFile = join(fx.logs, 'tpm-manufacturers.pem');
    const aCerts = await manufactureTpm({ caDir: manufacturerA, stateDir: join(fx.logs, 'spare-a') });
    // Only the root is configured: a vendor's intermediate comes with each EK certificate.
    const [rootPem = '', intermediatePem = ''] = aCerts.manufacturerCertsPem;
    writeFileSync(manufacturerFile, rootPem);
    intermediateA = intermediatePem;
    rootA = await caFromPem(
      rootPem,
      readFileSync(join(manufacturerA, 'swtpm-localca-rootca-privkey.pem'), 'utf8'),
    );
    crlFile = join(fx.logs, 'tpm-manufacturer-crls.pem');
    writeFileSync(crlFile, (await makeCrl(rootA, [])).toString('pem'));

    const ca = await createCertificateAuthority('attested-e2e-ca', 3_600_000);
    issuerCa = ca.certPem;
    const caFile = join(fx.logs, 'issuer-ca.pem');
    writeFileSync(caFile, issuerCa);
    issuerCaFile = caFile;
    const port = await freePort();
    ({ issuer } = await startTestIssuer(
      fx.env,
      {
        listen: { host: '127.0.0.1', port },
        logLevel: 'warn',
        issuance: {
          attestation: {
            url: `https://127.0.0.1:${port}`,
            issuerCaFile: caFile,
            manufacturerCaFile: manufacturerFile,
            manufacturerCrlFile: crlFile,
            challengeSeconds: CHALLENGE_SECONDS,
            perAddress: { capacity: 1000, refillPerSecond: 100 },
          },
        },
      },
      { ca },
    ));
    await applyObjects(fx.env.kubeconfigPath, [
      serviceAccountObject(PORTAL, OPERATOR_NAMESPACE),
      useFlavorClassesRole(PORTAL),
      clusterRoleBindingObject(PORTAL, PORTAL, PORTAL, OPERATOR_NAMESPACE),
    ]);
    bearer = await serviceAccountToken(fx.env, OPERATOR_NAMESPACE, PORTAL);
    fx.start();
    const ring = await fx.env.core.readNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: KEY_SECRET });
    keyRingVersion = ring.metadata?.resourceVersion;
  });

  after(async () => {
    for (const node of nodes) await node.stop();
    await host?.stop();
    await issuer?.close();
    await Promise.all([bound, other, foreign].map((m) => m?.tpm.stop()));
  });

  it('refuses to bind a token to an EK certificate from an unknown manufacturer, and writes nothing', async () => {
    const before = await fx.env.core.listNamespacedSecret({ namespace: 'kube-system' });
    const answer = await issue('sweet', { ekCertificate: pem(foreign.keys.ekCert.bytes) });
    assert.equal(answer.status, 400, answer.text);
    assert.match(answer.body.error?.message ?? '', /not among the configured TPM manufacturer CAs/);
    const after = await fx.env.core.listNamespacedSecret({ namespace: 'kube-system' });
    assert.equal(after.items.length, before.items.length);
  });

  it("every flavor's attested material has the same shape and length, and holds no secret", async () => {
    const sweet = await issue('sweet', { ekCertificate: ekChain(bound) });
    const sour = await issue('sour', { ekCertificate: ekChain(bound) });
    assert.equal(sweet.status, 201, sweet.text);
    assert.equal(sour.status, 201, sour.text);
    assert.equal(Buffer.byteLength(sweet.text), Buffer.byteLength(sour.text));
    assert.deepEqual(Object.keys(sweet.body), Object.keys(sour.body));
    for (const key of Object.keys(sweet.body) as (keyof IssueResponse)[])
      assert.equal(String(sweet.body[key]).length, String(sour.body[key]).length, `length of ${key}`);
    for (const issued of [sweet.body, sour.body]) {
      assert.equal(issued.attested, true);
      assert.equal(issued.bootstrapToken, null);
      assert.equal(issued.flavorToken, null);
      assert.equal(
        await bootstrapSecret(issued.tokenID),
        undefined,
        'no bootstrap Secret before attestation',
      );
      assert.doesNotMatch(
        issued.cloudInit,
        /[a-z0-9]{6}\.[a-z0-9]{16}/,
        'no bootstrap token in the material',
      );
    }
  });

  it('the bound machine proves its TPM, joins with a real kubeadm and kubelet, and is flavored', async () => {
    const issued = await issue('sweet', { ekCertificate: ekChain(bound) });
    assert.equal(issued.status, 201, issued.text);
    const run = await runMaterial(issued.body, bound, 'join');
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /attested; join configuration written/);
    const secret = await bootstrapSecret(issued.body.tokenID);
    assert.ok(secret, 'the attestation minted the bootstrap Secret');

    await joinRealNode('attested-1', run.joinConfigPath, issued.body);
    await waitAllFlavored(fx.env, 'sweet', ['attested-1']);
    const flavored = await fx.env.core.readNode({ name: 'attested-1' });
    assert.ok(flavored.spec?.taints?.some((t) => t.key === 'nodeflavor.io/dedicated'));
    const view = await waitFor(
      async () => {
        const v = await tokenView(issued.body.id);
        return v.phase === 'Verified' ? v : undefined;
      },
      { what: 'the token to read Verified', timeoutMs: 60_000 },
    );
    assert.equal(view.attestation?.attestations, 1);
    assert.deepEqual(
      view.nodes.map((n) => n.nodeName),
      ['attested-1'],
    );

    // Used: the same material earns nothing more (it was not issued with allowRejoin).
    const again = await runMaterial(issued.body, bound, 'join-again');
    assert.equal(again.code, 1);
    assert.match(again.stderr, /challenge refused \(HTTP 409\).*used by its machine already/);
  });

  it('a machine re-installed with the same TPM joins again under its name and flavor (allowRejoin)', async () => {
    const name = 'rejoin-1';
    const issued = await postJson<IssueResponse & { error?: { message: string } }>(
      url('/v1/tokens'),
      issuerCa,
      {
        flavorClassName: 'sweet',
        ttl: '1h',
        nodeName: name,
        attestation: { ekCertificate: ekChain(bound), allowRejoin: true },
      },
      bearer,
    );
    assert.equal(issued.status, 201, issued.text);
    const joinOnce = async (attempt: string) => {
      const run = await runMaterial(issued.body, bound, `rejoin-${attempt}`);
      assert.equal(run.code, 0, run.stderr);
      const node = await joinRealNode(name, run.joinConfigPath, issued.body);
      await waitAllFlavored(fx.env, 'sweet', [name]);
      return node;
    };
    const first = await joinOnce('first');
    const firstUid = (await fx.env.core.readNode({ name })).metadata?.uid;
    // Re-installed: the machine's disk is gone (its kubelet, certificates and containerd with it),
    // and the admin deletes its Node as kubeadm's docs say to before a node joins again.
    await first.stop();
    nodes.splice(nodes.indexOf(first), 1);
    await fx.env.core.deleteNode({ name });
    await waitFor(async () => !(await fx.env.core.readNode({ name }).catch(() => undefined)), {
      what: `Node ${name} to be gone`,
      timeoutMs: 30_000,
    });
    const second = await joinOnce('second');
    const rejoined = await fx.env.core.readNode({ name });
    assert.notEqual(rejoined.metadata?.uid, firstUid, 'a new Node, flavored again');
    assert.equal((await tokenView(issued.body.id)).attestation?.attestations, 2);

    // Re-installed again, its Node kept this time: down long enough that the node lifecycle
    // controller would have marked it NotReady (set here as it would, so as not to wait its grace
    // period), it comes back to its own Node, whose flavor and verification stay.
    await second.stop();
    nodes.splice(nodes.indexOf(second), 1);
    const now = new Date().toISOString();
    await kubeJson(fx.env.kubeConfig, 'PATCH', `/api/v1/nodes/${name}/status`, {
      contentType: 'application/strategic-merge-patch+json',
      body: {
        status: {
          conditions: [
            {
              type: 'Ready',
              status: 'Unknown',
              reason: 'NodeStatusUnknown',
              lastHeartbeatTime: now,
              lastTransitionTime: now,
            },
          ],
        },
      },
    });
    await joinOnce('third');
    const kept = await fx.env.core.readNode({ name });
    assert.equal(kept.metadata?.uid, rejoined.metadata?.uid, 'the same Node, still flavored');
    const view = await tokenView(issued.body.id);
    assert.equal(view.attestation?.attestations, 3);
    assert.equal(view.phase, 'Verified');
  });

  it('the same material on a machine with another TPM gets nothing, and a clear refusal', async () => {
    const issued = await issue('sweet', { ekCertificate: ekChain(bound) });
    const refusedBefore = await attestationCount('EKMismatch');
    const run = await runMaterial(issued.body, other, 'copied');
    assert.equal(run.code, 1);
    assert.match(run.stderr, /challenge refused \(HTTP 403\): this machine's TPM is not the one token/);
    assert.equal(await bootstrapSecret(issued.body.tokenID), undefined);
    assert.equal(await attestationCount('EKMismatch'), refusedBefore + 1);
    const events = await waitFor(
      async () => {
        const found = await refusalEvents(issued.body.id);
        return found.length > 0 ? found : undefined;
      },
      { what: 'the AttestationRefused Event', timeoutMs: 15_000 },
    );
    assert.match(events[0] ?? '', /^EKMismatch: /);
    const view = await tokenView(issued.body.id);
    assert.equal(view.attestation?.lastRefusal?.reason, 'EKMismatch');
    assert.equal(view.attestation?.attestations, 0);
  });

  it('a machine that presents the bound EK but holds another TPM cannot answer', async () => {
    const issued = await issue('sour', { ekPublicKey: ekPublicPem(bound) });
    assert.equal(issued.status, 201, issued.text);
    // It copied the bound TPM's EK public key (public data), with an AK of its own TPM.
    const challenged = await challengeFrom(other, issued.body.tokenID, bound.keys.ekPub.bytes);
    assert.equal(challenged.status, 200, challenged.text);
    await assert.rejects(
      activateCredential(other.tpm.tcti, other.keysDir, Buffer.from(challenged.body.credential, 'base64')),
      'another TPM cannot activate a credential made for the bound EK',
    );
    const guessed = await postJson(url(`/v1/attestations/${issued.body.tokenID}/answer`), issuerCa, {
      ticket: challenged.body.ticket,
      proof: randomBytes(32).toString('hex'),
    });
    assert.equal(guessed.status, 403, guessed.text);
    assert.equal(await bootstrapSecret(issued.body.tokenID), undefined);
    const view = await tokenView(issued.body.id);
    assert.equal(view.attestation?.lastRefusal?.reason, 'BadProof');
  });

  it('a recorded exchange replayed gets nothing, and neither does a late answer', async () => {
    const issued = await issue('sour', { ekCertificate: ekChain(bound) });
    const tokenId = issued.body.tokenID;
    const work = bound.keysDir;
    const challenged = await challengeFrom(bound, tokenId);
    assert.equal(challenged.status, 200, challenged.text);
    const secret = await activateCredential(
      bound.tpm.tcti,
      work,
      Buffer.from(challenged.body.credential, 'base64'),
    );
    const recovered = new Secret(secret.toString('hex'));
    const answerBody = {
      ticket: challenged.body.ticket,
      proof: answerProof(recovered, challenged.body.ticket),
    };
    const answered = await postJson<SealedJoinSecrets>(
      url(`/v1/attestations/${tokenId}/answer`),
      issuerCa,
      answerBody,
    );
    assert.equal(answered.status, 200, answered.text);
    const opened = openJoinSecrets(recovered, answered.body);
    const minted = await bootstrapSecret(tokenId);
    assert.ok(opened && minted);
    const mintedSecret = Buffer.from(minted.data?.['token-secret'] ?? '', 'base64').toString();
    assert.equal(opened.bootstrapToken.reveal(), `${tokenId}.${mintedSecret}`);

    const replayedBefore = await attestationCount('Replayed');
    const replayed = await postJson(url(`/v1/attestations/${tokenId}/answer`), issuerCa, answerBody);
    assert.equal(replayed.status, 409, replayed.text);
    assert.equal(await attestationCount('Replayed'), replayedBefore + 1);
    const after = await bootstrapSecret(tokenId);
    assert.equal(
      after?.metadata?.resourceVersion,
      minted.metadata?.resourceVersion,
      'the replay minted nothing',
    );
    // Replaying the challenge request gets a fresh credential: worth nothing without the TPM.
    const rechallenged = await challengeFrom(bound, tokenId);
    assert.notEqual(rechallenged.body.credential, challenged.body.credential);

    // A fresh challenge, answered past its deadline.
    const ticket = decodeTicket(rechallenged.body.ticket);
    assert.ok(ticket);
    const lateSecret = await activateCredential(
      bound.tpm.tcti,
      work,
      Buffer.from(rechallenged.body.credential, 'base64'),
    );
    await waitFor(() => Date.now() > ticket.deadline + 1000, {
      what: 'the challenge deadline to pass',
      timeoutMs: (CHALLENGE_SECONDS + 5) * 1000,
      intervalMs: 200,
    });
    const lateBefore = await attestationCount('LateAnswer');
    const late = await postJson(url(`/v1/attestations/${tokenId}/answer`), issuerCa, {
      ticket: rechallenged.body.ticket,
      proof: answerProof(new Secret(lateSecret.toString('hex')), rechallenged.body.ticket),
    });
    assert.equal(late.status, 410, late.text);
    assert.equal(
      (await bootstrapSecret(tokenId))?.metadata?.resourceVersion,
      minted.metadata?.resourceVersion,
    );
    assert.equal(await attestationCount('LateAnswer'), lateBefore + 1);
    // Recorded on the token at most once a minute: the replay a moment ago is the record.
    assert.equal((await tokenView(issued.body.id)).attestation?.lastRefusal?.reason, 'Replayed');
  });

  it('a flavor that requires a measured boot state: only a TPM whose quoted PCR 7 matches earns it', async () => {
    // What a measured boot would have extended PCR 7 with (a software TPM measures no boot itself).
    const measurement = createHash('sha256').update('nodeflavor e2e: the expected boot loader').digest();
    const expected = createHash('sha256').update(Buffer.alloc(32)).update(measurement).digest('hex');
    await applyFlavorClass(fx.env, 'measured', {
      labels: { [FLAVOR_LABEL]: 'measured' },
      measuredBoot: { pcrs: [{ index: 7, sha256: expected }] },
    });
    const plain = await postJson<IssueResponse & { error?: { message: string } }>(
      url('/v1/tokens'),
      issuerCa,
      { flavorClassName: 'measured', ttl: '1h' },
      bearer,
    );
    assert.equal(plain.status, 400, plain.text);
    assert.match(plain.body.error?.message ?? '', /requires a measured boot state/);

    const issued = await issue('measured', { ekCertificate: ekChain(bound) });
    assert.equal(issued.status, 201, issued.text);
    // PCR 7 as the TPM started (all zeros): not the required state.
    const unmeasured = await runMaterial(issued.body, bound, 'unmeasured');
    assert.equal(unmeasured.code, 1);
    assert.match(
      unmeasured.stderr,
      /answer refused \(HTTP 403\): .*requires a measured boot state \(sha256:7\): PCR 7 is 0{64}/,
    );
    assert.equal(await bootstrapSecret(issued.body.tokenID), undefined);
    assert.equal((await tokenView(issued.body.id)).attestation?.lastRefusal?.reason, 'PCRMismatch');

    await tpm2(bound.tpm.tcti, ['pcrextend', `7:sha256=${measurement.toString('hex')}`]);
    const measured = await runMaterial(issued.body, bound, 'measured');
    assert.equal(measured.code, 0, measured.stderr);
    await joinRealNode('measured-1', measured.joinConfigPath, issued.body);
    await waitAllFlavored(fx.env, 'measured', ['measured-1']);
  });

  it('the key ring and the TLS rules are unchanged: the script trusts only the pinned issuer CA', async () => {
    const issued = await issue('sour', { ekCertificate: ekChain(bound) });
    const stranger = await createCertificateAuthority('not-the-issuer', 3_600_000);
    const run = await runMaterial(issued.body, bound, 'wrong-ca', stranger.certPem);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /cannot reach the issuer/);
    assert.equal(await bootstrapSecret(issued.body.tokenID), undefined);
    const ring = await fx.env.core.readNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: KEY_SECRET });
    assert.equal(ring.metadata?.resourceVersion, keyRingVersion, 'attestations never touch the key ring');
  });
  it('kubectl flavor issue with an administrator kubeconfig seals its record too: its machine attests', async () => {
    const ekFile = join(fx.logs, 'bound-ek-chain.pem');
    writeFileSync(ekFile, ekChain(bound));
    const cli = await kubectlFlavor(fx.env.kubeconfigPath, [
      'issue',
      '--flavor',
      'sour',
      '--ttl',
      '1h',
      '--ek-certificate',
      ekFile,
      '--attestation-url',
      issuer.url,
      '--attestation-ca-file',
      issuerCaFile,
      '--tpm-manufacturer-ca-file',
      manufacturerFile,
      '--tpm-manufacturer-crl-file',
      crlFile,
      '--key-secret',
      `${OPERATOR_NAMESPACE}/${KEY_SECRET}`,
      '-o',
      'json',
    ]);
    assert.equal(cli.code, 0, cli.stderr);
    const issued = JSON.parse(cli.stdout) as IssueResponse;
    assert.equal(issued.attested, true);
    const record = await kubeJson<{ metadata: { annotations?: Record<string, string> } }>(
      fx.env.kubeConfig,
      'GET',
      `/apis/nodeflavor.io/v1alpha1/flavoredtokens/${issued.id}`,
    );
    assert.match(record.metadata.annotations?.['nodeflavor.io/attestation-seal'] ?? '', /^[0-9a-f]{8}\./);
    const run = await runMaterial(issued, bound, 'cli');
    assert.equal(run.code, 0, run.stderr);
    assert.ok(await bootstrapSecret(issued.tokenID), 'the attestation minted the bootstrap Secret');
  });

  // Issue 32, item 1: the issuer's attestation routes answer only records it sealed. This suite
  // registers no admission policy, so a record written directly reaches them: as if the policy
  // were missing or bypassed.
  it('a FlavoredToken written directly for the bound machine (no issuer seal): its machine gets no credential, no Secret', async () => {
    const tokenId = randomBytes(3).toString('hex');
    await kubeJson(fx.env.kubeConfig, 'POST', '/apis/nodeflavor.io/v1alpha1/flavoredtokens', {
      body: {
        apiVersion: 'nodeflavor.io/v1alpha1',
        kind: 'FlavoredToken',
        metadata: { name: `ft-${tokenId}`, labels: { [TOKEN_ID_LABEL]: tokenId } },
        spec: { flavorClassName: 'sweet', ttl: '1h', attestation: { ekPublicKey: ekPublicPem(bound) } },
      },
    });
    const refusedBefore = await attestationCount('Unsealed');
    const challenged = await challengeFrom(bound, tokenId);
    assert.equal(challenged.status, 403, challenged.text);
    assert.match(challenged.text, /not established by the issuer \(no valid seal\)/);
    assert.equal(await bootstrapSecret(tokenId), undefined);
    assert.equal(await attestationCount('Unsealed'), refusedBefore + 1);
  });

  it('no measured-boot flavor on an EK certificate issuer written by hand (no issuer seal), a Secret and flavor token notwithstanding', async () => {
    const flavor = 'measured-forged';
    await applyFlavorClass(fx.env, flavor, {
      labels: { [FLAVOR_LABEL]: flavor },
      measuredBoot: { pcrs: [{ index: 7, sha256: createHash('sha256').update(flavor).digest('hex') }] },
    });
    // Everything but the issuer's seal: a record naming a manufacturer CA, a proof recorded on it,
    // a bootstrap Secret in nodeflavor's group, and the flavor token the key ring derives.
    const token = await createBootstrapToken(fx.env, { groups: 'system:bootstrappers:nodeflavor' });
    await kubeJson(fx.env.kubeConfig, 'POST', '/apis/nodeflavor.io/v1alpha1/flavoredtokens', {
      body: {
        apiVersion: 'nodeflavor.io/v1alpha1',
        kind: 'FlavoredToken',
        metadata: {
          name: `ft-${token.id}`,
          labels: { [TOKEN_ID_LABEL]: token.id },
          annotations: {
            [ATTESTED_ANNOTATION]: JSON.stringify({
              ticket: Date.now() - 2000,
              count: 1,
              at: new Date(Date.now() - 2000).toISOString(),
            }),
          },
        },
        spec: {
          flavorClassName: flavor,
          ttl: '1h',
          attestation: { ekPublicKey: ekPublicPem(bound), ekCertificateIssuer: 'CN=swtpm-localca' },
        },
      },
    });
    const ring = await loadKeyRing(fx.env.kubeConfig, {
      namespace: OPERATOR_NAMESPACE,
      name: KEY_SECRET,
      createIfMissing: false,
    });
    const flavorToken = deriveFlavorToken(ring.active, token.id, flavor).reveal();
    const name = 'forged-measured-1';
    const kubelet = new SimulatedKubelet(
      name,
      parseJoinConfiguration(
        joinConfiguration(fx.env, token.token, {
          nodeLabels: { [TOKEN_LABEL_KEY]: flavorToken },
          taints: [{ key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' }],
        }),
      ),
      { timeoutMs: 60_000 },
    );
    fx.kubelets.push(kubelet);
    await kubelet.join();
    await waitFor(
      async () => {
        const events = await fx.env.core.listNamespacedEvent({
          namespace: 'default',
          fieldSelector: `involvedObject.name=${name},reason=AttestationRequired`,
        });
        return events.items.length > 0;
      },
      { what: 'the AttestationRequired Warning Event on the Node', timeoutMs: 60_000 },
    );
    const node = await fx.env.core.readNode({ name });
    assert.equal(node.metadata?.labels?.[FLAVOR_LABEL], undefined, 'no measured-boot flavor');
    assert.ok(
      node.spec?.taints?.some((t) => t.key === QUARANTINE_TAINT_KEY),
      'still quarantined',
    );
  });

  // Issue 32, item 3: two answers for one token at the same instant, from the machine and a clone
  // of its TPM state (the same EK, its own AK): one wins, the other is told to ask again.
  it('a machine and a clone of its TPM state answer at the same instant: one gets the join secrets, the other 409', async () => {
    const cloneDir = join(fx.logs, 'clone');
    mkdirSync(cloneDir, { recursive: true });
    cpSync(join(bound.dir, 'state'), join(cloneDir, 'state'), { recursive: true });
    const tpm = await startTpm(join(cloneDir, 'state'));
    try {
      const clone: Machine = {
        tpm,
        keys: await createEkAndAk(tpm.tcti, join(cloneDir, 'keys')),
        keysDir: join(cloneDir, 'keys'),
        dir: cloneDir,
      };
      assert.deepEqual(clone.keys.ekPub.bytes, bound.keys.ekPub.bytes, 'the clone has the same EK');
      const issued = await issue('sour', { ekCertificate: ekChain(bound) });
      const tokenId = issued.body.tokenID;
      const challenges = await Promise.all([challengeFrom(bound, tokenId), challengeFrom(clone, tokenId)]);
      const answers = await Promise.all(
        ([bound, clone] as const).map(async (m, i) => {
          const challenged = challenges[i];
          assert.equal(challenged?.status, 200, challenged?.text);
          const recovered = await activateCredential(
            m.tpm.tcti,
            m.keysDir,
            Buffer.from(challenged?.body.credential ?? '', 'base64'),
          );
          const secret = new Secret(recovered.toString('hex'));
          const ticket = challenged?.body.ticket ?? '';
          return { secret, body: { ticket, proof: answerProof(secret, ticket) } };
        }),
      );
      const answered = await Promise.all(
        answers.map((a) =>
          postJson<SealedJoinSecrets>(url(`/v1/attestations/${tokenId}/answer`), issuerCa, a.body),
        ),
      );
      assert.deepEqual(
        answered.map((a) => a.status).sort(),
        [200, 409],
        answered.map((a) => a.text).join('\n'),
      );
      const won = answered.findIndex((a) => a.status === 200);
      const opened = openJoinSecrets(
        answers[won]?.secret as Secret,
        answered[won]?.body as SealedJoinSecrets,
      );
      const minted = await bootstrapSecret(tokenId);
      const mintedSecret = Buffer.from(minted?.data?.['token-secret'] ?? '', 'base64').toString();
      assert.equal(
        opened?.bootstrapToken.reveal(),
        `${tokenId}.${mintedSecret}`,
        "the winner's Secret is the one that exists",
      );
      assert.match(
        answered[1 - won]?.text ?? '',
        /another attestation was recorded after it was made|answered already/,
      );
      assert.equal((await tokenView(issued.body.id)).attestation?.attestations, 1);
    } finally {
      await tpm.stop();
    }
  });

  // Issue 32, item 4: the issuer knows manufacturer A's root only; an administrator's CRL that
  // revokes A's intermediate refuses its machines at the next challenge (no restart: the file is
  // re-read when it changes), and new tokens for them. Last: it leaves A revoked until restored.
  it("an intermediate revoked by an administrator's CRL: its machines are refused at the next challenge, without a restart", async () => {
    const issued = await issue('sour', { ekCertificate: ekChain(bound) });
    assert.equal(issued.status, 201, issued.text);
    const clean = readFileSync(crlFile, 'utf8');
    writeFileSync(crlFile, (await makeCrl(rootA, [certificateOf(intermediateA)])).toString('pem'));
    try {
      const refused = await waitFor(
        async () => {
          const challenged = await challengeFrom(bound, issued.body.tokenID);
          return challenged.status === 403 ? challenged : undefined;
        },
        { what: 'the revocation to take effect', timeoutMs: 60_000, intervalMs: 1000 },
      );
      assert.match(refused.text, /revoked: CA \\"CN=swtpm-localca\\"/);
      assert.equal(await bootstrapSecret(issued.body.tokenID), undefined);
      assert.equal(
        (await tokenView(issued.body.id)).attestation?.lastRefusal?.reason,
        'EKCertificateRefused',
      );
      const again = await issue('sour', { ekCertificate: ekChain(bound) });
      assert.equal(again.status, 400, again.text);
      assert.match(again.body.error?.message ?? '', /revoked: CA "CN=swtpm-localca"/);
    } finally {
      writeFileSync(crlFile, clean);
    }
  });
});

function ekPublicPem(m: Machine): string {
  const der = ekSpkiDer({ tpm2bPublic: m.keys.ekPub.bytes });
  return `-----BEGIN PUBLIC KEY-----\n${der
    .toString('base64')
    .match(/.{1,64}/g)
    ?.join('\n')}\n-----END PUBLIC KEY-----\n`;
}
