// What `kubeadm init` creates so that nodes can join with a bootstrap token: the bootstrap RBAC
// and the anonymously readable kube-public/cluster-info ConfigMap (see kubeadm's
// phases/bootstraptoken/{node,clusterinfo}).
import { stringify } from 'yaml';

export const DEFAULT_NODE_TOKEN_GROUP = 'system:bootstrappers:kubeadm:default-node-token';

type KubeObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
} & Record<string, unknown>;

function clusterRoleBinding(
  name: string,
  clusterRole: string,
  subject: { kind: string; name: string },
): KubeObject {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRole },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', ...subject }],
  };
}

/** The cluster-info kubeconfig: CA and server only, as kubeadm writes it. */
export function clusterInfoKubeconfig(server: string, caPem: string): string {
  return stringify({
    apiVersion: 'v1',
    clusters: [
      { cluster: { 'certificate-authority-data': Buffer.from(caPem).toString('base64'), server }, name: '' },
    ],
    contexts: null,
    'current-context': '',
    kind: 'Config',
    preferences: {},
    users: null,
  });
}

export function kubeadmBootstrapObjects(server: string, caPem: string): KubeObject[] {
  const group = { kind: 'Group', name: DEFAULT_NODE_TOKEN_GROUP };
  return [
    clusterRoleBinding('kubeadm:kubelet-bootstrap', 'system:node-bootstrapper', group),
    clusterRoleBinding(
      'kubeadm:node-autoapprove-bootstrap',
      'system:certificates.k8s.io:certificatesigningrequests:nodeclient',
      group,
    ),
    clusterRoleBinding(
      'kubeadm:node-autoapprove-certificate-rotation',
      'system:certificates.k8s.io:certificatesigningrequests:selfnodeclient',
      { kind: 'Group', name: 'system:nodes' },
    ),
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'kubeadm:get-nodes' },
      rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get'] }],
    },
    clusterRoleBinding('kubeadm:get-nodes', 'kubeadm:get-nodes', group),
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'cluster-info', namespace: 'kube-public' },
      data: { kubeconfig: clusterInfoKubeconfig(server, caPem) },
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'kubeadm:bootstrap-signer-clusterinfo', namespace: 'kube-public' },
      rules: [
        { apiGroups: [''], resources: ['configmaps'], resourceNames: ['cluster-info'], verbs: ['get'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'kubeadm:bootstrap-signer-clusterinfo', namespace: 'kube-public' },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'Role',
        name: 'kubeadm:bootstrap-signer-clusterinfo',
      },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'system:anonymous' }],
    },
  ];
}
