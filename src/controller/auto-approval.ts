// Whether kube-controller-manager would auto-approve the kubelet client CSRs of our bootstrap
// group: its csrapproving controller approves a CSR when the requester may `create`
// certificatesigningrequests/nodeclient. For kubeadm's group it may (for any node name, which
// is what lets a token holder squat a name); for nodeflavor's own group it must not, or our
// approver is not the only one. Checked once at start: a loud warning and a metric, not a refusal
// (a cluster may keep auto-approval on purpose; docs/threat-model.md says what that leaves open).
import type { Logger } from 'pino';
import type { Gauge } from 'prom-client';
import type { KubeReviews } from '../kube/reviews.ts';

/** A bootstrap token's user as the API server builds it, with the configured extra group. */
function bootstrapRequester(bootstrapGroup: string) {
  return {
    username: 'system:bootstrap:nfprobe',
    groups: ['system:bootstrappers', bootstrapGroup, 'system:authenticated'],
    extra: {},
  };
}

export async function checkAutoApproval(
  reviews: KubeReviews,
  bootstrapGroup: string,
  gauge: Gauge,
  log: Logger,
): Promise<void> {
  try {
    const autoApproved = await reviews.userCan(bootstrapRequester(bootstrapGroup), {
      group: 'certificates.k8s.io',
      resource: 'certificatesigningrequests',
      subresource: 'nodeclient',
      verb: 'create',
    });
    gauge.set(autoApproved ? 1 : 0);
    if (autoApproved)
      log.warn(
        { bootstrapGroup },
        `kube-controller-manager auto-approves kubelet CSRs of bootstrap group ${bootstrapGroup} for any node name: a token holder can get a certificate for another node's name (nodeflavor still binds no flavor to it). Use nodeflavor's own group (--bootstrap-group system:bootstrappers:nodeflavor, chart joins.bootstrapGroup) and bind it to no nodeclient ClusterRole`,
      );
  } catch (error) {
    log.warn(
      { err: (error as Error).message },
      'could not check whether the bootstrap group is auto-approved',
    );
  }
}
