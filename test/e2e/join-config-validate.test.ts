// Every JoinConfiguration the issuer can render (quarantine taint on or off, the default or a custom
// token label key, IPv4, IPv6 or DNS endpoints, inside cloud-init or alone) must be accepted by
// `kubeadm config validate` of the pinned kubeadm: a node admin's `kubeadm join --config` is the
// first thing that reads it. No cluster needed, only the kubeadm binary `make binaries` builds.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { parseBootstrapToken } from '../../src/flavor/bootstrap-token.ts';
import { Secret } from '../../src/flavor/secret.ts';
import { type JoinMaterialInput, renderJoinMaterial } from '../../src/tokenissuer/join-material.ts';
import { nodeBinaryPaths, versions } from './cluster/versions.ts';

const run = promisify(execFile);
const kubeadm = nodeBinaryPaths().kubeadm;

const base: JoinMaterialInput = {
  apiServerEndpoint: '10.0.0.1:6443',
  caCertHash: `sha256:${'0f'.repeat(32)}`,
  token: parseBootstrapToken('abcdef.0123456789abcdef'),
  flavorToken: new Secret('oxmcc5gbgduo3u7umkvuqjcd6le7qqsfspzaixipbvqavipzmhua'),
  expiresAt: new Date('2030-01-02T03:04:05Z'),
};

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
    it(`${what}: alone and inside the cloud-init`, async () => {
      const material = renderJoinMaterial({ ...base, ...overrides });
      await validate('alone', material.joinConfiguration);
      const cloudInit = parse(material.cloudInit) as { write_files: { content: string }[] };
      assert.equal(cloudInit.write_files[0]?.content, material.joinConfiguration);
      await validate('cloud-init', cloudInit.write_files[0]?.content ?? '');
    });
  }

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
