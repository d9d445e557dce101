// The join material of a token bound to a TPM (ADR 0014): no secret in it, nothing that tells a
// flavor apart, a JoinConfiguration template that becomes exactly the plain token's configuration
// once the script fills it in, and a script bash accepts. The script is also run here, against
// stand-ins for tpm2-tools and curl that play a real exchange with the issuer's functions, so the
// openssl pipeline it uses is checked against src/flavor/attestation-exchange.ts.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, createHmac, createPublicKey } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse } from 'yaml';
import {
  answerProof,
  credentialSecret,
  decodeTicket,
  openJoinSecrets,
} from '../../src/flavor/attestation-exchange.ts';
import { parseBootstrapToken } from '../../src/flavor/bootstrap-token.ts';
import { newKeyRing } from '../../src/flavor/keyring.ts';
import { Secret } from '../../src/flavor/secret.ts';
import { ekSpkiDer } from '../../src/flavor/tpm/ek-identity.ts';
import {
  ATTEST_SCRIPT_PATH,
  ATTESTATION_URL_PATTERN,
  BOOTSTRAP_TOKEN_PLACEHOLDER,
  FLAVOR_TOKEN_PLACEHOLDER,
  ISSUER_CA_PATH,
  JOIN_TEMPLATE_PATH,
  renderAttestScript,
} from '../../src/tokenissuer/attestation/attest-script.ts';
import { type AttestationDeps, answer, challenge } from '../../src/tokenissuer/attestation/attestation.ts';
import { AttestationSettingsSchema, IssuanceSettingsSchema } from '../../src/tokenissuer/config.ts';
import { type IssuanceDeps, issueToken } from '../../src/tokenissuer/issuance/issue.ts';
import {
  type AttestedMaterialInput,
  renderAttestedJoinMaterial,
  renderJoinMaterial,
} from '../../src/tokenissuer/issuance/join-material.ts';
import { OPENAPI_DOCUMENT } from '../../src/tokenissuer/openapi.ts';
import { issueResponse } from '../../src/tokenissuer/response.ts';
import { skipUnless } from '../support/skip.ts';
import { clusterInfoKubeconfig, FakeTokenKube } from './support/issuer-fakes.ts';
import { seededRandomBytes } from './support/random.ts';

const fixture = (name: string) => readFileSync(join(import.meta.dirname, 'fixtures', 'tpm', name));
const EK_PUB = fixture('ek.pub');
const AK_PUB = fixture('ak.pub');
const EK_SPKI = ekSpkiDer({ tpm2bPublic: EK_PUB });
const EK_PEM = createPublicKey({ key: EK_SPKI, format: 'der', type: 'spki' })
  .export({ type: 'spki', format: 'pem' })
  .toString();
const ISSUER_URL = 'https://issuer.example.com:8443/nodeflavor';
const CA_CERT_HASH = `sha256:${'0f'.repeat(32)}`;
const CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIBtestCA\n-----END CERTIFICATE-----\n';
const ISSUER_CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIBissuerCA\n-----END CERTIFICATE-----\n';
const NOW = new Date('2030-01-01T00:00:00Z');

const BOOTSTRAP_TOKEN_LIKE = /[a-z0-9]{6}\.[a-z0-9]{16}(?![a-z0-9])/;
const FLAVOR_TOKEN_LIKE = /(?<![a-z2-7])[a-z2-7]{52}(?![a-z2-7])/;

function attestedInput(overrides: Partial<AttestedMaterialInput> = {}): AttestedMaterialInput {
  return {
    apiServerEndpoint: '10.0.0.1:6443',
    caCertHash: CA_CERT_HASH,
    caCertPem: CA_PEM,
    tokenId: 'abcdef',
    expiresAt: new Date('2030-01-02T03:04:05.678Z'),
    issuerUrl: ISSUER_URL,
    ...overrides,
  };
}

/** Every field's byte length (null stays null): what an observer of the material could tell apart. */
const shape = (value: object) =>
  Object.fromEntries(
    Object.entries(value).map(([key, field]) => [
      key,
      typeof field === 'string' ? Buffer.byteLength(field) : field === null ? null : typeof field,
    ]),
  );

async function issuer() {
  const kube = new FakeTokenKube(await clusterInfoKubeconfig());
  kube.addFlavor('a');
  kube.addFlavor('a-flavor-with-a-much-longer-name');
  const ring = newKeyRing(seededRandomBytes('material-ring'));
  const settings = IssuanceSettingsSchema.parse({ attestation: { url: ISSUER_URL } });
  const issuance: IssuanceDeps = {
    kube,
    keyRing: async () => ring,
    settings,
    now: () => NOW,
    randomBytes: seededRandomBytes('material'),
  };
  const attestation: AttestationDeps = {
    kube,
    keyRing: async () => ring,
    settings,
    now: () => NOW,
    randomBytes: seededRandomBytes('material-attest'),
  };
  return { kube, ring, issuance, attestation };
}

describe('attested join material', () => {
  it('has the same keys and byte lengths for every token, whatever the flavor (material and issue answer)', async () => {
    const { issuance } = await issuer();
    const short = await issueToken(issuance, { flavorClassName: 'a', attestation: { ekPublicKey: EK_PEM } });
    const long = await issueToken(issuance, {
      flavorClassName: 'a-flavor-with-a-much-longer-name',
      attestation: { ekPublicKey: EK_PEM },
    });
    assert.notEqual(short.tokenId, long.tokenId);
    assert.deepEqual(Object.keys(short.material), Object.keys(long.material));
    assert.deepEqual(shape(short.material), shape(long.material));
    const [shortAnswer, longAnswer] = [issueResponse(short), issueResponse(long)];
    assert.deepEqual(Object.keys(shortAnswer), Object.keys(longAnswer));
    assert.deepEqual(shape(shortAnswer), shape(longAnswer));
    assert.equal(shortAnswer.bootstrapToken, null);
    assert.equal(shortAnswer.flavorToken, null);
    for (const text of [JSON.stringify(shortAnswer), JSON.stringify(longAnswer)])
      assert.ok(!text.includes('flavor-with') && !/"a"/.test(text), 'the flavor is not named');
    // The answer differs between the two tokens only where the token ID (and the record) is.
    const masked = (text: string, id: string) => text.replaceAll(id, 'XXXXXX');
    assert.equal(
      masked(short.material.attestScript ?? '', short.tokenId),
      masked(long.material.attestScript ?? '', long.tokenId),
    );
    assert.equal(short.material.joinConfiguration, long.material.joinConfiguration);
  });

  it('renders the same keys and lengths for any token ID, with and without a pinned issuer CA', () => {
    for (const extra of [{}, { issuerCaPem: ISSUER_CA_PEM }, { discovery: 'token' as const }]) {
      const one = renderAttestedJoinMaterial(attestedInput({ tokenId: 'abcdef', ...extra }));
      const two = renderAttestedJoinMaterial(attestedInput({ tokenId: '0z9y8x', ...extra }));
      assert.deepEqual(shape(one), shape(two));
    }
  });

  it('the template holds the two placeholders, no token, and becomes the plain configuration once filled in', () => {
    for (const discovery of ['file', 'token'] as const) {
      const material = renderAttestedJoinMaterial(attestedInput({ discovery }));
      const template = material.joinConfiguration;
      assert.ok(template.includes(BOOTSTRAP_TOKEN_PLACEHOLDER), discovery);
      assert.ok(template.includes(`nodeflavor.io/token=${FLAVOR_TOKEN_PLACEHOLDER}`), discovery);
      for (const text of [
        template,
        material.cloudInit,
        material.attestScript ?? '',
        JSON.stringify(material),
      ]) {
        assert.doesNotMatch(text, BOOTSTRAP_TOKEN_LIKE);
        assert.doesNotMatch(text, FLAVOR_TOKEN_LIKE);
      }
      const token = 'abcdef.0123456789abcdef';
      const flavorToken = 'oxmcc5gbgduo3u7umkvuqjcd6le7qqsfspzaixipbvqavipzmhua';
      const plain = renderJoinMaterial({
        ...attestedInput({ discovery }),
        token: parseBootstrapToken(token),
        flavorToken: new Secret(flavorToken),
      });
      // What the script's sed does.
      const filled = template
        .replaceAll(BOOTSTRAP_TOKEN_PLACEHOLDER, token)
        .replaceAll(FLAVOR_TOKEN_PLACEHOLDER, flavorToken);
      assert.equal(filled, plain.joinConfiguration, discovery);
    }
  });

  it('the cloud-init installs the template (0600), the script (0700) and the issuer CA when pinned, and runs the script', () => {
    const material = renderAttestedJoinMaterial(attestedInput({ issuerCaPem: ISSUER_CA_PEM }));
    assert.equal(material.joinCommand, ATTEST_SCRIPT_PATH);
    const cloud = parse(material.cloudInit.replace(/^#cloud-config\n/, '')) as {
      write_files: { path: string; permissions: string; owner: string; content: string }[];
      runcmd: string[][];
    };
    assert.ok(material.cloudInit.startsWith('#cloud-config\n'));
    const files = Object.fromEntries(cloud.write_files.map((f) => [f.path, f]));
    assert.deepEqual(Object.keys(files), [
      '/etc/kubernetes/nodeflavor-discovery.conf',
      ISSUER_CA_PATH,
      JOIN_TEMPLATE_PATH,
      ATTEST_SCRIPT_PATH,
    ]);
    assert.equal(files[JOIN_TEMPLATE_PATH]?.permissions, '0600');
    assert.equal(files[JOIN_TEMPLATE_PATH]?.content, material.joinConfiguration);
    assert.equal(files[ATTEST_SCRIPT_PATH]?.permissions, '0700');
    assert.equal(files[ATTEST_SCRIPT_PATH]?.content, material.attestScript);
    assert.equal(files[ISSUER_CA_PATH]?.content, ISSUER_CA_PEM);
    assert.ok(cloud.write_files.every((f) => f.owner === 'root:root'));
    assert.deepEqual(cloud.runcmd, [[ATTEST_SCRIPT_PATH]]);
    assert.ok(material.attestScript?.includes(`NODEFLAVOR_ISSUER_CA-${ISSUER_CA_PATH}}`));

    const unpinned = renderAttestedJoinMaterial(attestedInput());
    assert.ok(!unpinned.cloudInit.includes(ISSUER_CA_PATH));
    assert.ok(unpinned.attestScript?.includes(`CA="\${NODEFLAVOR_ISSUER_CA-}"`));
  });

  it('bash -n accepts the script, pinned or not, with any token ID', () => {
    for (const extra of [
      {},
      { issuerCaPem: ISSUER_CA_PEM },
      { tokenId: '000000', issuerUrl: 'https://[::1]:8443' },
    ]) {
      const script = renderAttestedJoinMaterial(attestedInput(extra)).attestScript ?? '';
      assert.ok(script.startsWith('#!/bin/bash\n'));
      const checked = spawnSync('bash', ['-n'], { input: script, encoding: 'utf8' });
      assert.equal(checked.status, 0, checked.stderr);
    }
  });

  it('refuses an issuer URL a shell or sed would read specially, and a malformed token ID', () => {
    const base = {
      tokenId: 'abcdef',
      pinnedCa: false,
      joinConfigPath: '/etc/kubernetes/nodeflavor-join.yaml',
    };
    for (const issuerUrl of [
      "https://issuer.example.com/'; rm -rf /; '",
      'https://issuer.example.com/a b',
      'https://issuer.example.com/"x"',
      'https://issuer.example.com/$(id)',
      'https://issuer.example.com/`id`',
      'https://issuer.example.com/\nid',
      'https://issuer.example.com/a&b',
      'http://issuer.example.com',
      'issuer.example.com',
    ]) {
      assert.throws(() => renderAttestScript({ ...base, issuerUrl }), /is not a plain https URL/, issuerUrl);
      assert.equal(AttestationSettingsSchema.safeParse({ url: issuerUrl }).success, false, issuerUrl);
      assert.doesNotMatch(issuerUrl, ATTESTATION_URL_PATTERN);
    }
    assert.throws(() => renderAttestedJoinMaterial(attestedInput({ issuerUrl: 'https://x.example/a b' })));
    for (const tokenId of ['ABCDEF', 'abc', "abc'de", 'abcdefg'])
      assert.throws(() => renderAttestScript({ ...base, issuerUrl: ISSUER_URL, tokenId }), /token ID/);
    assert.ok(
      renderAttestScript({ ...base, issuerUrl: `${ISSUER_URL}/` }).includes(`ISSUER='${ISSUER_URL}'`),
    );
  });

  it('the OpenAPI document names exactly the keys the answers have', async () => {
    const schemas = OPENAPI_DOCUMENT.components.schemas as unknown as Record<
      string,
      { required: string[]; properties: Record<string, unknown> }
    >;
    const { issuance } = await issuer();
    const attested = issueResponse(
      await issueToken(issuance, { flavorClassName: 'a', attestation: { ekPublicKey: EK_PEM } }),
    );
    const plain = issueResponse(await issueToken(issuance, { flavorClassName: 'a' }));
    for (const body of [attested, plain]) {
      assert.deepEqual([...(schemas.IssuedToken?.required ?? [])].sort(), Object.keys(body).sort());
      assert.deepEqual(Object.keys(schemas.IssuedToken?.properties ?? {}).sort(), Object.keys(body).sort());
    }
    assert.deepEqual(schemas.AttestationChallenge?.required, ['ticket', 'credential', 'deadline', 'quote']);
    assert.deepEqual(schemas.AttestationAnswer?.required, ['salt', 'ciphertext', 'mac', 'joinBy']);
    const paths = OPENAPI_DOCUMENT.paths as unknown as Record<
      string,
      Record<string, { security?: unknown[]; responses: Record<string, unknown> }>
    >;
    for (const step of ['challenge', 'answer']) {
      const operation = paths[`/v1/attestations/{tokenId}/${step}`]?.post;
      assert.ok(operation, step);
      assert.deepEqual(operation.security, [], `${step} takes no credentials`);
      for (const status of ['200', '400', '403', '404', '409', '410', '429'])
        assert.ok(operation.responses[status], `${step} documents ${status}`);
      assert.equal(operation.responses['401'], undefined, `${step} never answers 401`);
    }
  });
});

const noOpenssl = spawnSync('openssl', ['version']).status === 0 ? false : 'openssl is not installed';

describe('the attest script, run against stand-ins for tpm2-tools and curl', {
  skip: skipUnless('the attest script run', noOpenssl),
}, () => {
  let dir = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'nodeflavor-attest-script-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** tpm2-tools and curl as small scripts: the TPM's secret is given, the issuer's answers are canned. */
  function stubs(
    root: string,
    secretHex: string,
    credential: string,
    replies: { challenge: string; answer: string },
  ) {
    const bin = join(root, 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(root, 'ek.pub'), EK_PUB);
    writeFileSync(join(root, 'ak.pub'), AK_PUB);
    writeFileSync(join(root, 'secret.bin'), Buffer.from(secretHex, 'hex'));
    writeFileSync(join(root, 'cred.blob'), Buffer.from(credential, 'base64'));
    writeFileSync(join(root, 'challenge.reply'), replies.challenge);
    writeFileSync(join(root, 'answer.reply'), replies.answer);
    const script = (name: string, body: string) => {
      writeFileSync(join(bin, name), `#!/bin/bash\nset -euo pipefail\nROOT='${root}'\n${body}\n`);
      chmodSync(join(bin, name), 0o755);
    };
    // Each writes what the real tool writes to the files it is given.
    script(
      'tpm2_createek',
      'while [ $# -gt 0 ]; do case "$1" in -u) cp "$ROOT/ek.pub" "$2"; shift;; -c) : >"$2"; shift;; esac; shift; done',
    );
    script(
      'tpm2_createak',
      'while [ $# -gt 0 ]; do case "$1" in -u) cp "$ROOT/ak.pub" "$2"; shift;; -c|-n) : >"$2"; shift;; esac; shift; done',
    );
    // The TPM: only the credential the issuer made activates, to the secret only it can recover.
    script(
      'tpm2_activatecredential',
      'while [ $# -gt 0 ]; do case "$1" in -i) in="$2"; shift;; -o) out="$2"; shift;; esac; shift; done\n' +
        'cmp -s "$in" "$ROOT/cred.blob" || exit 1\ncp "$ROOT/secret.bin" "$out"',
    );
    for (const name of ['tpm2_flushcontext', 'tpm2_startauthsession', 'tpm2_policysecret'])
      script(name, 'exit 0');
    // curl -sS --max-time 30 [--cacert CA] -o OUT -w '%{http_code}' -H ... --data-binary @BODY URL
    script(
      'curl',
      'echo "$*" >>"$ROOT/curl.log"\n' +
        'while [ $# -gt 1 ]; do case "$1" in -o) out="$2"; shift;; --data-binary) body=$(printf %s "$2" | cut -c2-); shift;; esac; shift; done\n' +
        'url="$1"; step=$(basename "$url")\ncp "$body" "$ROOT/$step.sent"\ncp "$ROOT/$step.reply" "$out"\n' +
        'if [ -f "$ROOT/$step.expect" ] && ! cmp -s "$body" "$ROOT/$step.expect"; then printf 403; else printf 200; fi',
    );
    return bin;
  }

  async function exchange() {
    const t = await issuer();
    const issued = await issueToken(t.issuance, {
      flavorClassName: 'a',
      attestation: { ekPublicKey: EK_PEM },
    });
    const challenged = await challenge(t.attestation, issued.tokenId, {
      ekPublic: EK_PUB.toString('base64'),
      akPublic: AK_PUB.toString('base64'),
    });
    const ticket = decodeTicket(challenged.ticket);
    assert.ok(ticket);
    const secret = credentialSecret(
      t.ring.active,
      ticket,
      createHash('sha256').update(EK_SPKI).digest('hex'),
    );
    const proof = answerProof(secret, challenged.ticket);
    const answered = await answer(t.attestation, issued.tokenId, { ticket: challenged.ticket, proof });
    return { ...t, issued, challenged, secret, proof, answered };
  }

  function run(name: string, script: string, bin: string, env: Record<string, string> = {}) {
    const root = join(dir, name);
    const scriptPath = join(root, 'nodeflavor-attest');
    writeFileSync(scriptPath, script, { mode: 0o700 });
    mkdirSync(join(root, 'tmp'), { recursive: true });
    return spawnSync('bash', [scriptPath, '--prepare-only'], {
      encoding: 'utf8',
      env: {
        PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`,
        TMPDIR: join(root, 'tmp'),
        NODEFLAVOR_JOIN_TEMPLATE: join(root, 'template.yaml'),
        NODEFLAVOR_JOIN_CONFIG: join(root, 'out', 'join.yaml'),
        ...env,
      },
    });
  }

  /** A real exchange, and the stand-ins that replay it to the script in run `name`. */
  async function replayedExchange(name: string) {
    const x = await exchange();
    const root = join(dir, name);
    const bin = stubs(root, x.secret.reveal(), x.challenged.credential, {
      challenge: JSON.stringify(x.challenged),
      answer: JSON.stringify(x.answered),
    });
    return { x, root, bin };
  }

  it('proves the TPM, opens the sealed answer with openssl, and writes the JoinConfiguration', async () => {
    const { x, root, bin } = await replayedExchange('ok');
    // The issuer answers only the body a node that recovered S would send.
    writeFileSync(
      join(root, 'answer.expect'),
      JSON.stringify({ ticket: x.challenged.ticket, proof: x.proof }),
    );
    writeFileSync(join(root, 'template.yaml'), x.issued.material.joinConfiguration);
    const ca = join(root, 'issuer-ca.pem');
    const result = run('ok', x.issued.material.attestScript ?? '', bin, { NODEFLAVOR_ISSUER_CA: ca });
    assert.equal(result.status, 0, `${result.stdout}\n${result.stderr}`);
    assert.match(result.stdout, /nodeflavor-attest: attested; join configuration written to /);

    const opened = openJoinSecrets(x.secret, x.answered);
    assert.ok(opened);
    const stored = x.kube.secrets.get(x.issued.tokenId);
    assert.equal(opened.bootstrapToken.reveal(), `${x.issued.tokenId}.${stored?.secret}`);
    const written = readFileSync(join(root, 'out', 'join.yaml'), 'utf8');
    assert.equal(
      written,
      x.issued.material.joinConfiguration
        .replaceAll(BOOTSTRAP_TOKEN_PLACEHOLDER, opened.bootstrapToken.reveal())
        .replaceAll(FLAVOR_TOKEN_PLACEHOLDER, opened.flavorToken.reveal()),
    );
    assert.ok(written.includes(`nodeflavor.io/token=${opened.flavorToken.reveal()}`));
    // What it sent: the TPM's keys, then the ticket and the proof, never the secret.
    assert.deepEqual(JSON.parse(readFileSync(join(root, 'challenge.sent'), 'utf8')), {
      ekPublic: EK_PUB.toString('base64'),
      akPublic: AK_PUB.toString('base64'),
    });
    const sent = `${readFileSync(join(root, 'challenge.sent'), 'utf8')}${readFileSync(join(root, 'answer.sent'), 'utf8')}`;
    assert.ok(!sent.includes(x.secret.reveal()));
    const log = readFileSync(join(root, 'curl.log'), 'utf8');
    assert.ok(log.includes(`--cacert ${ca}`), log);
    assert.ok(log.includes(`${ISSUER_URL}/v1/attestations/${x.issued.tokenId}/challenge`), log);
    assert.ok(log.includes(`${ISSUER_URL}/v1/attestations/${x.issued.tokenId}/answer`), log);
    assert.deepEqual(readdirSync(join(root, 'tmp')), [], 'its working directory (the TPM secret) is gone');
  });

  it('refuses an answer whose MAC does not verify under its secret, and writes nothing', async () => {
    const x = await exchange();
    const root = join(dir, 'bad-mac');
    const flipped = `${x.answered.mac.slice(0, -1)}${x.answered.mac.endsWith('0') ? '1' : '0'}`;
    const bin = stubs(root, x.secret.reveal(), x.challenged.credential, {
      challenge: JSON.stringify(x.challenged),
      answer: JSON.stringify({ ...x.answered, mac: flipped }),
    });
    writeFileSync(join(root, 'template.yaml'), x.issued.material.joinConfiguration);
    const result = run('bad-mac', x.issued.material.attestScript ?? '', bin, { NODEFLAVOR_ISSUER_CA: '' });
    assert.equal(result.status, 1);
    assert.match(result.stderr, /the issuer's answer does not verify under this TPM's secret/);
    assert.ok(!readFileSync(join(root, 'curl.log'), 'utf8').includes('--cacert'), 'no CA: the system trust');
    assert.equal(spawnSync('test', ['-e', join(root, 'out', 'join.yaml')]).status, 1);
  });

  it("says why when the issuer refuses the challenge, in the issuer's words", async () => {
    const x = await exchange();
    const root = join(dir, 'refused');
    const bin = stubs(root, x.secret.reveal(), x.challenged.credential, {
      challenge: JSON.stringify({ error: { code: 'Forbidden', message: 'this machine is not the one' } }),
      answer: '{}',
    });
    writeFileSync(join(root, 'challenge.expect'), 'never what is sent');
    writeFileSync(join(root, 'template.yaml'), x.issued.material.joinConfiguration);
    const result = run('refused', x.issued.material.attestScript ?? '', bin);
    assert.equal(result.status, 1);
    assert.match(
      result.stderr,
      /^nodeflavor-attest: challenge refused \(HTTP 403\): this machine is not the one$/m,
    );
  });

  // Issue 32: while the script runs, another user of the machine can read every process's command
  // line (/proc/<pid>/cmdline). Every program the script runs is wrapped to log its arguments.
  it('puts no secret on any command line: not the credential secret, a key derived from it, nor a token', async () => {
    const { x, root, bin } = await replayedExchange('argv');
    const wrapped = ['openssl', 'sed', 'cut', 'tr', 'od', 'mktemp', 'mv', 'mkdir', 'dirname', 'rm', 'cat'];
    for (const tool of wrapped) {
      const real = spawnSync('bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
      if (!real) continue;
      writeFileSync(
        join(bin, tool),
        `#!/bin/bash\nprintf '%s %s\\n' ${tool} "$*" >>'${join(root, 'argv.log')}'\nexec ${real} "$@"\n`,
      );
      chmodSync(join(bin, tool), 0o755);
    }
    writeFileSync(join(root, 'template.yaml'), x.issued.material.joinConfiguration);
    const result = run('argv', x.issued.material.attestScript ?? '', bin, { NODEFLAVOR_ISSUER_CA: '' });
    assert.equal(result.status, 0, `${result.stdout}\n${result.stderr}`);
    const opened = openJoinSecrets(x.secret, x.answered);
    assert.ok(opened);
    const argv = readFileSync(join(root, 'argv.log'), 'utf8');
    assert.match(argv, /^openssl dgst/m, 'the wrapper saw openssl');
    const hmac = (key: string, text: string) =>
      createHmac('sha256', Buffer.from(key, 'hex')).update(text, 'ascii').digest('hex');
    const secrets = {
      'the credential secret': x.secret.reveal(),
      'the encryption key': hmac(x.secret.reveal(), 'encrypt'),
      'the MAC key': hmac(x.secret.reveal(), 'mac'),
      'the bootstrap token': opened.bootstrapToken.reveal(),
      'the bootstrap token secret': opened.bootstrapToken.reveal().split('.')[1] ?? '',
      'the flavor token': opened.flavorToken.reveal(),
    };
    for (const [what, value] of Object.entries(secrets))
      assert.ok(!argv.includes(value), `${what} was on a command line:\n${argv}`);
  });
});
