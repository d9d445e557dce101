// What `kubeadm init` creates so that nodes can join with a bootstrap token: the bootstrap RBAC,
// the anonymously readable kube-public/cluster-info ConfigMap (see kubeadm's
// phases/bootstraptoken/{node,clusterinfo}), and the kubeadm-config and kubelet-config
// ConfigMaps a real `kubeadm join` downloads, with their RBAC (phases/uploadconfig,
// phases/kubelet).
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

export interface ClusterNetworking {
  serviceSubnet: string;
  podSubnet: string;
  dnsDomain: string;
}

/** Where kubeadm's nodes read the cluster's kubelet configuration and their own defaults. */
export const KUBELET_CONFIG_MAP = 'kubelet-config';
export const KUBEADM_CONFIG_MAP = 'kubeadm-config';

/**
 * The cluster-wide KubeletConfiguration `kubeadm join` writes to /var/lib/kubelet/config.yaml.
 * Tuned for the hosts the real-node tests run on (see ../shared/REALNODE.md): cgroup v1 with the
 * cgroupfs driver, no QOS cgroups or allocatable enforcement (the VM lacks the capabilities), swap
 * tolerated. `enforceNodeAllocatable` must be ["none"]: kubeadm's round trip drops an empty list,
 * which then defaults to ["pods"] and fails validation without QOS cgroups.
 */
export function kubeletConfiguration(networking: ClusterNetworking): Record<string, unknown> {
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: '/etc/kubernetes/pki/ca.crt' },
    },
    authorization: { mode: 'Webhook' },
    cgroupDriver: 'cgroupfs',
    cgroupsPerQOS: false,
    enforceNodeAllocatable: ['none'],
    failCgroupV1: false,
    failSwapOn: false,
    clusterDomain: networking.dnsDomain,
    clusterDNS: [],
    rotateCertificates: true,
    staticPodPath: '/etc/kubernetes/manifests',
    // No image garbage collection or eviction: the node's disk is the host's, shared by the tests.
    imageGCHighThresholdPercent: 100,
    evictionHard: { 'memory.available': '0%', 'nodefs.available': '0%', 'imagefs.available': '0%' },
  };
}

/** The ClusterConfiguration kubeadm uploads at init (v1beta4, as kubeadm 1.37 writes it). */
export function clusterConfiguration(
  kubernetesVersion: string,
  controlPlaneEndpoint: string,
  networking: ClusterNetworking,
): Record<string, unknown> {
  return {
    apiVersion: 'kubeadm.k8s.io/v1beta4',
    kind: 'ClusterConfiguration',
    kubernetesVersion,
    controlPlaneEndpoint,
    clusterName: 'kubernetes',
    certificatesDir: '/etc/kubernetes/pki',
    networking,
  };
}

/** Roles that let joining nodes (kubeadm's bootstrap group) and joined nodes read a ConfigMap. */
function configMapReader(roleName: string, configMap: string): KubeObject[] {
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: roleName, namespace: 'kube-system' },
      rules: [{ apiGroups: [''], resources: ['configmaps'], resourceNames: [configMap], verbs: ['get'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: roleName, namespace: 'kube-system' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: roleName },
      subjects: [
        { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: DEFAULT_NODE_TOKEN_GROUP },
        { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'system:nodes' },
      ],
    },
  ];
}

/** kube-system/kubeadm-config and kubelet-config with the Roles kubeadm binds to them. */
export function kubeadmJoinConfigObjects(
  kubernetesVersion: string,
  controlPlaneEndpoint: string,
  networking: ClusterNetworking,
): KubeObject[] {
  return [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: KUBEADM_CONFIG_MAP, namespace: 'kube-system' },
      data: {
        ClusterConfiguration: stringify(
          clusterConfiguration(kubernetesVersion, controlPlaneEndpoint, networking),
        ),
      },
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: KUBELET_CONFIG_MAP, namespace: 'kube-system' },
      data: { kubelet: stringify(kubeletConfiguration(networking)) },
    },
    ...configMapReader('kubeadm:nodes-kubeadm-config', KUBEADM_CONFIG_MAP),
    ...configMapReader('kubeadm:kubelet-config', KUBELET_CONFIG_MAP),
  ];
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
