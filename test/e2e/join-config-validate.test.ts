// Every JoinConfiguration the issuer can render (file or token discovery, quarantine taint on or
// off, the default or a custom token label key, IPv4, IPv6 or DNS endpoints, inside cloud-init or
// alone) must be accepted by `kubeadm config validate` of the pinned kubeadm: a node admin's
// `kubeadm join --config` is the first thing that reads it. kubeadm checks that a file-discovery
// kubeConfigPath exists on disk, so those variants point at a discovery kubeconfig in a temp dir;
// the default path (/etc/kubernetes, not writable here without touching the host) is checked to
// be kubeadm's only objection, and test/e2e/real-nodes.test.ts joins with it for real. No cluster
// needed, only the kubeadm binary `make binaries` builds.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { parseBootstrapToken } from '../../src/flavor/bootstrap-token.ts';
import { Secret } from '../../src/flavor/secret.ts';
import { createCertificateAuthority } from '../../src/pki/certs.ts';
import { DEFAULT_DISCOVERY_KUBECONFIG_PATH } from '../../src/tokenissuer/issuance/discovery-kubeconfig.ts';
import { type JoinMaterialInput, renderJoinMaterial } from '../../src/tokenissuer/issuance/join-material.ts';
import { nodeBinaryPaths, versions } from './cluster/versions.ts';

const run = promisify(execFile);
const kubeadm = nodeBinaryPaths().kubeadm;

const ca = await createCertificateAuthority('validate-ca', 3_600_000);
const base: JoinMaterialInput = {
  apiServerEndpoint: '10.0.0.1:6443',
  caCertHash: `sha256:${'0f'.repeat(32)}`,
  caCertPem: ca.certPem,
  token: parseBootstrapToken('abcdef.0123456789abcdef'),
  flavorToken: new Secret('oxmcc5gbgduo3u7umkvuqjcd6le7qqsfspzaixipbvqavipzmhua'),
  expiresAt: new Date('2030-01-02T03:04:05Z'),
};

interface CloudInit {
  write_files: { path: string; content: string }[];
  runcmd: string[][];
}

const variants: [string, Partial<JoinMaterialInput>][] = [
  ['the default (quarantine taint, nodeflavor.io/token)', {}],
  ['without the quarantine taint', { quarantineTaint: null }],
  ['a custom token label key', { tokenLabelKey: 'example.com/join-token' }],
  ['a DNS endpoint', { apiServerEndpoint: 'api.example.com:443' }],
  ['an IPv6 endpoint', { apiServerEndpoint: '[fd00::1]:6443' }],
];

describe(`kubeadm ${versions.KUBERNETES_VERSION} accepts every JoinConfiguration the issuer renders`, () => {
  let dir: string;
  before(() => {
    assert.ok(existsSync(kubeadm), `${kubeadm} is missing: run 'make binaries'`);
    dir = mkdtempSync(join(tmpdir(), 'nodeflavor-kubeadm-validate-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  async function validate(name: string, config: string): Promise<void> {
    const file = join(dir, `${name}.yaml`);
    writeFileSync(file, config, { mode: 0o600 });
    const { stdout, stderr } = await run(kubeadm, ['config', 'validate', '--config', file]);
    assert.match(`${stdout}${stderr}`, /ok/i);
  }

  for (const [what, overrides] of variants) {
    it(`${what}, file discovery: alone, and both files as the cloud-init writes them`, async () => {
      const path = join(dir, 'nodeflavor-discovery.conf');
      rmSync(path, { force: true });
      const material = renderJoinMaterial({ ...base, ...overrides, discoveryKubeconfigPath: path });
      await assert.rejects(
        validate('no-file', material.joinConfiguration),
        /not a valid HTTPS URL or a file/,
      );
      writeFileSync(path, material.discoveryKubeconfig);
      await validate('alone', material.joinConfiguration);
      // The cloud-init writes the discovery kubeconfig first, then the JoinConfiguration, then joins.
      rmSync(path);
      const cloudInit = parse(material.cloudInit) as CloudInit;
      assert.deepEqual(
        cloudInit.write_files.map((f) => f.path),
        [path, '/etc/kubernetes/nodeflavor-join.yaml'],
      );
      for (const file of cloudInit.write_files.slice(0, 1)) writeFileSync(file.path, file.content);
      assert.equal(readFileSync(path, 'utf8'), material.discoveryKubeconfig);
      assert.equal(cloudInit.write_files[1]?.content, material.joinConfiguration);
      await validate('cloud-init', cloudInit.write_files[1]?.content ?? '');
      assert.deepEqual(cloudInit.runcmd, [
        ['kubeadm', 'join', '--config', '/etc/kubernetes/nodeflavor-join.yaml'],
      ]);
    });

    it(`${what}, token discovery: alone and inside the cloud-init`, async () => {
      const material = renderJoinMaterial({ ...base, ...overrides, discovery: 'token' });
      await validate('alone', material.joinConfiguration);
      const cloudInit = parse(material.cloudInit) as CloudInit;
      assert.equal(cloudInit.write_files.length, 1);
      assert.equal(cloudInit.write_files[0]?.content, material.joinConfiguration);
      await validate('cloud-init', cloudInit.write_files[0]?.content ?? '');
    });
  }

  it(`the default discovery path: kubeadm's one objection on a machine without the file is that file`, async (t) => {
    const material = renderJoinMaterial(base);
    if (existsSync(DEFAULT_DISCOVERY_KUBECONFIG_PATH)) {
      t.diagnostic(`${DEFAULT_DISCOVERY_KUBECONFIG_PATH} exists on this machine: validated as is`);
      await validate('default-path', material.joinConfiguration);
      return;
    }
    const failure = await validate('default-path', material.joinConfiguration).then(
      () => assert.fail('kubeadm accepted a discovery file that does not exist'),
      (error: { stderr?: string }) => error.stderr ?? '',
    );
    const problems = failure.split('\n').filter((line) => line.startsWith('error: '));
    assert.deepEqual(problems, [
      `error: discovery.file.kubeConfigPath: Invalid value: "${DEFAULT_DISCOVERY_KUBECONFIG_PATH}": not a valid HTTPS URL or a file on disk`,
    ]);
  });

  it('refuses a broken one, so the checks above can fail', async () => {
    const material = renderJoinMaterial(base);
    await assert.rejects(
      validate(
        'broken',
        material.joinConfiguration.replace('kind: "JoinConfiguration"', 'kind: "JoinConfig"'),
      ),
    );
    await assert.rejects(
      validate('v1beta3', material.joinConfiguration.replace('v1beta4', 'v1beta3')),
      /old API spec|v1beta3/,
    );
  });
});
