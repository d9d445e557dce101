// The Machine reconciler of `nodeflavor capi`: the one writer of a flavored Machine's
// NodeFlavorVerified condition (for spec.readinessGates, and for a MachineHealthCheck to replace a
// Machine whose node stays quarantined). Until its KubeadmConfig has a token it mirrors why it
// waits; then it asks the workload cluster's issuer about the token, and verification.ts decides.
// A Machine not settled yet asks again every --status-poll-interval. An issuer that cannot answer
// never turns a verified Machine unverified: that would take Ready away from every Machine at once.

import { involvedObject } from './cluster-api.ts';
import { writeCondition } from './condition-writer.ts';
import type { CapiContext } from './context.ts';
import { filledTokenId, flavorOf, isControlPlane } from './decide.ts';
import { IssuerCallError } from './issuer-client.ts';
import {
  type CachedMachine,
  conditionOf,
  KUBEADM_CONFIG_KIND,
  MACHINE_KIND,
  Reason,
  TOKEN_CONDITION,
  VERIFIED_CONDITION,
} from './resources.ts';
import { verifyMachine } from './verification.ts';

/** The Machine's own outcomes that need a human (the config's waits are told on the config). */
const MACHINE_WARNINGS: ReadonlySet<string> = new Set([
  Reason.VerificationFailed,
  Reason.NodeMismatch,
  Reason.FlavorChanged,
  Reason.TokenExpired,
  Reason.TokenRevoked,
]);

export async function reconcileMachine(ctx: CapiContext, key: string): Promise<void> {
  const machine = ctx.caches.machines.get(key);
  if (!machine || machine.metadata.deletionTimestamp !== undefined || isControlPlane(machine)) return;
  const flavor = flavorOf(machine);
  if (flavor === undefined) return;
  const { namespace } = machine.metadata;
  const ref = machine.spec?.bootstrap?.configRef;
  const config =
    ref?.kind === KUBEADM_CONFIG_KIND ? ctx.caches.configs.get(`${namespace}/${ref.name}`) : undefined;
  if (!config) {
    await setVerified(ctx, machine, 'False', Reason.WaitingForToken, 'waiting for its KubeadmConfig');
    return;
  }
  const tokenId = filledTokenId(config);
  if (tokenId === undefined) {
    const waiting = conditionOf(config, TOKEN_CONDITION);
    await setVerified(
      ctx,
      machine,
      'False',
      (waiting?.reason as Reason | undefined) ?? Reason.WaitingForToken,
      waiting?.message ?? 'waiting for nodeflavor to give its KubeadmConfig a token',
    );
    return;
  }
  const clusterKey = `${namespace}/${machine.spec?.clusterName ?? ''}`;
  const issuer = ctx.issuerFor(clusterKey);
  const current = conditionOf(machine, VERIFIED_CONDITION);
  if (!issuer.ok) {
    if (current?.status !== 'True')
      await setVerified(ctx, machine, 'False', Reason.IssuerNotConfigured, issuer.message);
    ctx.requeueMachine(key, ctx.config.statusPollInterval);
    return;
  }
  // Asked within the poll interval about the same token, flavor and Node: the answer is the same
  // until the workload cluster moves on, which only the next poll can tell.
  const nodeRef = machine.status?.nodeRef?.name;
  const check = { at: ctx.now().getTime(), tokenId, flavor, nodeRef };
  const last = ctx.statusChecks.get(machine.metadata.uid);
  const wait = last ? last.at + ctx.config.statusPollInterval - check.at : 0;
  if (last && wait > 0 && last.tokenId === tokenId && last.flavor === flavor && last.nodeRef === nodeRef) {
    ctx.requeueMachine(key, wait);
    return;
  }
  ctx.statusChecks.set(machine.metadata.uid, check);
  let token: Awaited<ReturnType<typeof issuer.client.status>>;
  try {
    token = await issuer.client.status(`ft-${tokenId}`);
  } catch (error) {
    if (!(error instanceof IssuerCallError)) throw error;
    if (error.failure === 'notFound') {
      await setVerified(
        ctx,
        machine,
        'False',
        Reason.TokenRevoked,
        `token ${tokenId} no longer exists in the workload cluster`,
      );
      return;
    }
    if (error.failure !== 'rateLimited' && current?.status !== 'True')
      await setVerified(ctx, machine, 'False', Reason.IssuerUnreachable, error.message);
    ctx.requeueMachine(key, error.retryAfterMs ?? ctx.config.statusPollInterval);
    return;
  }
  const verdict = verifyMachine({ flavor, tokenId, token, nodeRefName: nodeRef });
  await setVerified(ctx, machine, verdict.status, verdict.reason, verdict.message);
  if (!verdict.settled) ctx.requeueMachine(key, ctx.config.statusPollInterval);
}

async function setVerified(
  ctx: CapiContext,
  machine: CachedMachine,
  status: 'True' | 'False',
  reason: Reason,
  message: string,
): Promise<void> {
  const written = await writeCondition(ctx, MACHINE_KIND, machine, {
    type: VERIFIED_CONDITION,
    status,
    reason,
    message,
  });
  if (!written) return;
  // The config's waits have their Events on the config; the Machine's own outcomes have them here.
  if (written.previous?.reason === reason) return;
  if (reason === Reason.Verified)
    ctx.events.emit(involvedObject(MACHINE_KIND, machine), 'Normal', VERIFIED_CONDITION, message);
  else if (MACHINE_WARNINGS.has(reason))
    ctx.events.emit(involvedObject(MACHINE_KIND, machine), 'Warning', reason, message);
}
