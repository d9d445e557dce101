// kubectl-flavor's usage handling, which never needs a cluster: exit 2 and one line for every
// usage error, checked before the kubeconfig is even read. The commands themselves run against
// a real API server in test/e2e/issuer.test.ts.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { nodesTable } from '../../src/cli/flavor-output.ts';
import { main } from '../../src/cli/kubectl-flavor.ts';
import type { NodeFacts } from '../../src/flavor/verdict.ts';

const TPM_FIXTURE = (name: string) => join(import.meta.dirname, 'fixtures', 'tpm', name);

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { stdout: (text) => out.push(text), stderr: (text) => err.push(text) });
  return { code, stdout: out.join(''), stderr: err.join('') };
}

describe('kubectl-flavor usage', () => {
  it('prints help and exits 0', async () => {
    for (const args of [['--help'], ['-h'], ['help'], ['issue', '--help']]) {
      const result = await cli(...args);
      assert.equal(result.code, 0);
      assert.match(result.stdout, /^Usage: kubectl flavor <command>/);
    }
  });

  const usageErrors: [string[], RegExp][] = [
    [[], /a command is required/],
    [['frobnicate'], /unknown command 'frobnicate'/],
    [['issue'], /--flavor is required/],
    [['issue', '--flavor'], /argument missing|--flavor/],
    [['issue', '--flavor', 'sweet', '-o', 'xml'], /-o xml is not one of yaml, json, join, cloud-init/],
    [['issue', '--flavor', 'sweet', '--ttl', '1d'], /^kubectl-flavor: --ttl: /],
    [
      ['issue', '--flavor', 'sweet', '--ttl', '1h', '--expires-at', '2030-01-01T00:00:00Z'],
      /--expires-at: set at most one/,
    ],
    [['issue', '--flavor', 'sweet', '--max-uses', 'many'], /--max-uses must be a whole number/],
    [['issue', '--flavor', 'Sweet!'], /--flavor: must be a FlavorClass name/],
    [
      ['issue', '--flavor', 'sweet', '--node-name', 'a', '--node-name-pattern', 'a*'],
      /--node-name-pattern: set at most one/,
    ],
    [['issue', '--flavor', 'sweet', '--key-secret', 'justaname'], /--key-secret must be NAMESPACE\/NAME/],
    [['issue', '--flavor', 'sweet', '--bogus'], /Unknown option '--bogus'/],
    [['issue', '--flavor', 'sweet', '--discovery', 'magic'], /--discovery must be one of file, token/],
    [
      ['issue', '--flavor', 'sweet', '--allow-rejoin'],
      /--allow-rejoin needs --ek-certificate or --ek-public-key/,
    ],
    [
      ['issue', '--flavor', 'sweet', '--ek-certificate', '/nonexistent/ek.pem'],
      /--ek-certificate \/nonexistent\/ek.pem: ENOENT/,
    ],
    [
      ['issue', '--flavor', 'sweet', '--ek-public-key', TPM_FIXTURE('ek.pub')],
      /--ek-public-key: must be PEM/,
    ],
    [
      [
        'issue',
        '--flavor',
        'sweet',
        '--ek-certificate',
        TPM_FIXTURE('manufacturer-a-root.pem'),
        '--allow-rejoin',
      ],
      /--node-name: is required with attestation.allowRejoin/,
    ],
    [
      ['issue', '--flavor', 'sweet', '--attestation-url', 'http://issuer'],
      /--attestation-url must be a plain https URL/,
    ],
    [['discovery', '-o', 'join'], /-o join is not one of kubeconfig, json, yaml/],
    [['discovery', '--flavor', 'sweet'], /flag --flavor does not apply to 'discovery'/],
    [['discovery', 'extra'], /unexpected argument 'extra'/],
    [['list', '--discovery', 'file'], /flag --discovery does not apply to 'list'/],
    [['list', '--flavor', 'sweet'], /flag --flavor does not apply to 'list'/],
    [['list', '-o', 'wide'], /-o wide is not one of table, json, yaml/],
    [['revoke'], /revoke takes exactly one token/],
    [['revoke', 'a', 'b'], /revoke takes exactly one token/],
    [['nodes', 'extra'], /unexpected argument 'extra'/],
    [['explain'], /explain takes a node name, or node NAME, or token ID/],
    [['explain', 'a', 'b'], /explain takes a node name/],
    [['explain', 'node'], /explain node needs a name/],
    [['explain', 'token', 'Bad_Name'], /'Bad_Name' is not a node name or token/],
    [['explain', 'edge-1', '-o', 'json'], /flag --output does not apply to 'explain'/],
    [['keys'], /keys needs a command \(list, add, activate, retire, init\)/],
    [['keys', 'rotate'], /unknown keys command 'rotate'/],
    [['keys', 'activate'], /keys activate takes exactly one key id/],
    [['keys', 'retire', 'a', 'b'], /keys retire takes exactly one key id/],
    [['keys', 'retire', 'NOTANID'], /'NOTANID' is not a key id/],
    [['keys', 'add', 'extra'], /unexpected argument 'extra'/],
    [['keys', 'add', '-o', 'json'], /flag --output does not apply to 'keys add'/],
    [['keys', 'list', '-o', 'wide'], /-o wide is not one of table, json, yaml/],
    [['keys', 'list', '--flavor', 'x'], /flag --flavor does not apply to 'keys'/],
    [['keys', 'list', '--key-secret', 'x'], /--key-secret must be NAMESPACE\/NAME/],
  ];
  for (const [args, message] of usageErrors) {
    it(`exits 2 with one line for: ${args.join(' ') || '(nothing)'}`, async () => {
      const result = await cli(...args, '--kubeconfig', '/nonexistent/kubeconfig');
      assert.equal(result.code, 2, result.stderr);
      assert.equal(result.stdout, '');
      assert.equal(result.stderr.split('\n').length, 2, 'one line and its newline');
      assert.match(result.stderr, /^kubectl-flavor: /);
      assert.match(result.stderr, message);
    });
  }

  it('exits 1 with one line for a runtime error (a missing kubeconfig)', async () => {
    const result = await cli('list', '--kubeconfig', '/nonexistent/kubeconfig');
    assert.equal(result.code, 1);
    assert.equal(
      result.stderr,
      'kubectl-flavor: kubeconfig /nonexistent/kubeconfig does not exist: check --kubeconfig\n',
    );
  });
});

describe('kubectl-flavor nodes table', () => {
  const node = (name: string, extra: Partial<NodeFacts>): NodeFacts => ({
    name,
    uid: `uid-${name}`,
    createdAt: new Date(0),
    labels: {},
    annotations: {},
    taints: [],
    ...extra,
  });

  it('shows the verification record, a node waiting in quarantine, and an unmanaged node', () => {
    const record = { tokenID: 'abc123', flavorClass: 'sweet', verifiedAt: '2030-01-01T00:00:00Z' };
    const text = nodesTable([
      node('c-plain', {}),
      node('a-verified', { annotations: { 'nodeflavor.io/verified': JSON.stringify(record) } }),
      node('b-waiting', { taints: [{ key: 'nodeflavor.io/unverified', effect: 'NoSchedule' }] }),
    ]);
    assert.deepEqual(
      text.split('\n').map((line) => line.split(/\s+/)),
      [
        ['NODE', 'FLAVOR', 'STATE', 'VERIFIED-AT', 'TOKEN-ID', 'REASON'],
        ['a-verified', 'sweet', 'verified', '2030-01-01T00:00:00Z', 'abc123', '<none>'],
        ['b-waiting', '<none>', 'unverified', '<none>', '<none>', '<none>'],
        ['c-plain', '<none>', 'unmanaged', '<none>', '<none>', '<none>'],
        [''],
      ],
    );
  });
});
