// The CRDs of the test's infrastructure and control-plane stand-ins: LocalCluster, LocalMachine,
// LocalMachineTemplate (InfraCluster / InfraMachine contract) and LocalControlPlane (ControlPlane
// contract, for a control plane that already runs: the local one). Each carries the label that
// tells Cluster API which contract version it implements (`cluster.x-k8s.io/v1beta2: v1alpha1`);
// spec and status keep whatever the contract puts there.
export const INFRA_GROUP = 'infrastructure.e2e.nodeflavor.io';
export const CONTROL_PLANE_GROUP = 'controlplane.e2e.nodeflavor.io';
export const LOCAL_VERSION = 'v1alpha1';

function crd(group: string, kind: string, plural: string) {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${plural}.${group}`,
      labels: { 'cluster.x-k8s.io/v1beta2': LOCAL_VERSION },
    },
    spec: {
      group,
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
      scope: 'Namespaced',
      versions: [
        {
          name: LOCAL_VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
              },
            },
          },
        },
      ],
    },
  };
}

export function localProviderCrds() {
  return [
    crd(INFRA_GROUP, 'LocalCluster', 'localclusters'),
    crd(INFRA_GROUP, 'LocalMachine', 'localmachines'),
    crd(INFRA_GROUP, 'LocalMachineTemplate', 'localmachinetemplates'),
    crd(CONTROL_PLANE_GROUP, 'LocalControlPlane', 'localcontrolplanes'),
  ];
}
