// The stand-in provider of the Cluster API e2e runs a Machine's bootstrap data; what it accepts and
// refuses (test/e2e/capi/cloud-init.ts). The sample is CABPK v1.14's worker template
// (bootstrap/kubeadm/pkg/cloudinit/node.go) as rendered for a filled KubeadmConfig.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseBootstrapData } from '../e2e/capi/cloud-init.ts';

const rendered = (
  runcmd = "  - 'kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete'",
  extraFile = '',
) => `## template: jinja
#cloud-config

write_files:
-   path: /etc/kubernetes/nodeflavor-discovery.conf
    owner: root:root
    permissions: '0644'
    content: |
      apiVersion: v1
      kind: Config
${extraFile}-   path: /run/kubeadm/kubeadm-join-config.yaml
    owner: root:root
    permissions: '0640'
    content: |
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: JoinConfiguration
      discovery:
        file:
          kubeConfigPath: /etc/kubernetes/nodeflavor-discovery.conf
        tlsBootstrapToken: abc123.0123456789abcdef
-   path: /run/cluster-api/placeholder
    owner: root:root
    permissions: '0640'
    content: "This placeholder file is used to create the /run/cluster-api sub directory"
runcmd:
${runcmd}
`;

describe('parseBootstrapData: what the stand-in provider runs of a Machine’s cloud-init', () => {
  test("CABPK's worker data: the join configuration, the discovery file, nothing of Cluster API's markers", () => {
    const parsed = parseBootstrapData(rendered());
    assert.match(parsed.joinConfiguration, /kind: JoinConfiguration/);
    assert.deepEqual(
      parsed.files.map((f) => `${f.path} ${f.permissions}`),
      ['/etc/kubernetes/nodeflavor-discovery.conf 0644'],
    );
  });

  test('a verbosity flag on kubeadm join is fine', () => {
    const runcmd =
      "  - 'kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml --v 5 && echo success > /run/cluster-api/bootstrap-success.complete'";
    assert.doesNotThrow(() => parseBootstrapData(rendered(runcmd)));
  });

  const refused: Record<string, { data: string; message: RegExp }> = {
    'commands besides the join (it would not run them)': {
      data: rendered(
        `${"  - 'kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml && echo success > /run/cluster-api/bootstrap-success.complete'"}\n  - 'echo extra'`,
      ),
      message: /runs only CABPK's kubeadm join/,
    },
    'jinja templating (cloud-init would render it; the stand-in does not)': {
      data: rendered(
        undefined,
        '-   path: /etc/hostname\n    content: "{{ ds.meta_data.local_hostname }}"\n',
      ),
      message: /jinja templating is not supported/,
    },
    'an encoded file': {
      data: rendered(undefined, '-   path: /etc/x\n    encoding: base64\n    content: eA==\n'),
      message: /encoding base64 is not supported/,
    },
    'Ignition or anything else': { data: '{"ignition": {}}', message: /not a cloud-config/ },
    'no join configuration': {
      data: '#cloud-config\nwrite_files: []\nruncmd: []\n',
      message: /writes no \/run\/kubeadm\/kubeadm-join-config.yaml/,
    },
  };
  for (const [name, { data, message }] of Object.entries(refused))
    test(`refused: ${name}`, () => assert.throws(() => parseBootstrapData(data), message));
});
