// The Cluster API objects of a test: one workload Cluster that is the local control plane itself
// (self-hosted: its `<cluster>-kubeconfig` is the admin kubeconfig, its `<cluster>-ca` the local
// CA), and MachineDeployments of LocalMachines joined by kubeadm. Cluster API's defaulting
// webhooks are not registered here, so these objects carry what those webhooks would add
// (labels, selector, rollout strategy), as `clusterctl generate` output does.
import { versions } from '../cluster/versions.ts';
import { HOLD_ANNOTATION } from './local-provider.ts';
import { CONTROL_PLANE_GROUP, INFRA_GROUP, LOCAL_VERSION } from './local-provider-crds.ts';

const CAPI = 'cluster.x-k8s.io/v1beta2';
const BOOTSTRAP = 'bootstrap.cluster.x-k8s.io/v1beta2';
const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';
const DEPLOYMENT_NAME_LABEL = 'cluster.x-k8s.io/deployment-name';

const b64 = (text: string) => Buffer.from(text).toString('base64');

export interface WorkloadCluster {
  namespace: string;
  name: string;
  /** host:port of the API server. */
  endpoint: { host: string; port: number };
  adminKubeconfig: string;
  caCertPem: string;
  caKeyPem: string;
}

/** The Cluster, its stand-in infrastructure and control plane, and the Secrets Cluster API reads. */
export function workloadClusterObjects(cluster: WorkloadCluster): object[] {
  const { namespace, name } = cluster;
  const labels = { [CLUSTER_NAME_LABEL]: name };
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'cluster.x-k8s.io/secret',
      metadata: { name: `${name}-kubeconfig`, namespace, labels },
      data: { value: b64(cluster.adminKubeconfig) },
    },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'cluster.x-k8s.io/secret',
      metadata: { name: `${name}-ca`, namespace, labels },
      data: { 'tls.crt': b64(cluster.caCertPem), 'tls.key': b64(cluster.caKeyPem) },
    },
    {
      apiVersion: `${INFRA_GROUP}/${LOCAL_VERSION}`,
      kind: 'LocalCluster',
      metadata: { name, namespace },
      spec: { controlPlaneEndpoint: cluster.endpoint },
    },
    {
      apiVersion: `${CONTROL_PLANE_GROUP}/${LOCAL_VERSION}`,
      kind: 'LocalControlPlane',
      metadata: { name, namespace },
      spec: { controlPlaneEndpoint: cluster.endpoint },
    },
    {
      apiVersion: CAPI,
      kind: 'Cluster',
      metadata: { name, namespace, labels },
      spec: {
        controlPlaneEndpoint: cluster.endpoint,
        infrastructureRef: { apiGroup: INFRA_GROUP, kind: 'LocalCluster', name },
        controlPlaneRef: { apiGroup: CONTROL_PLANE_GROUP, kind: 'LocalControlPlane', name },
      },
    },
  ];
}

/** A KubeadmConfigTemplate for workers; `paused` puts Cluster API's pause in what it stamps out. */
export function kubeadmConfigTemplate(namespace: string, name: string, options: { paused?: boolean } = {}) {
  return {
    apiVersion: BOOTSTRAP,
    kind: 'KubeadmConfigTemplate',
    metadata: { name, namespace },
    spec: {
      template: {
        ...(options.paused ? { metadata: { annotations: { 'cluster.x-k8s.io/paused': '' } } } : {}),
        spec: { joinConfiguration: { nodeRegistration: { kubeletExtraArgs: [{ name: 'v', value: '1' }] } } },
      },
    },
  };
}

/** A LocalMachineTemplate; `hold` keeps its machines from booting (a slow cloud). */
export function localMachineTemplate(namespace: string, name: string, options: { hold?: boolean } = {}) {
  return {
    apiVersion: `${INFRA_GROUP}/${LOCAL_VERSION}`,
    kind: 'LocalMachineTemplate',
    metadata: { name, namespace },
    spec: {
      template: {
        ...(options.hold ? { metadata: { annotations: { [HOLD_ANNOTATION]: 'true' } } } : {}),
        spec: {},
      },
    },
  };
}

export interface MachineDeploymentOptions {
  namespace: string;
  cluster: string;
  name: string;
  replicas: number;
  kubeadmConfigTemplate: string;
  localMachineTemplate: string;
  /** spec.template.metadata.annotations (nodeflavor.io/flavor-class, nodeflavor.io/node-name). */
  annotations?: Record<string, string>;
  readinessGates?: string[];
}

export function machineDeployment(options: MachineDeploymentOptions) {
  const { namespace, cluster, name } = options;
  const labels = { [CLUSTER_NAME_LABEL]: cluster, [DEPLOYMENT_NAME_LABEL]: name };
  return {
    apiVersion: CAPI,
    kind: 'MachineDeployment',
    metadata: { name, namespace, labels: { [CLUSTER_NAME_LABEL]: cluster } },
    spec: {
      clusterName: cluster,
      replicas: options.replicas,
      selector: { matchLabels: labels },
      rollout: { strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } },
      template: {
        metadata: { labels, ...(options.annotations ? { annotations: options.annotations } : {}) },
        spec: {
          clusterName: cluster,
          version: versions.KUBERNETES_VERSION,
          bootstrap: {
            configRef: {
              apiGroup: 'bootstrap.cluster.x-k8s.io',
              kind: 'KubeadmConfigTemplate',
              name: options.kubeadmConfigTemplate,
            },
          },
          infrastructureRef: {
            apiGroup: INFRA_GROUP,
            kind: 'LocalMachineTemplate',
            name: options.localMachineTemplate,
          },
          ...(options.readinessGates
            ? { readinessGates: options.readinessGates.map((conditionType) => ({ conditionType })) }
            : {}),
        },
      },
    },
  };
}
