// The KubeadmConfig reconciler of `nodeflavor capi`: gathers the facts from the caches, asks
// decideConfig (decide.ts) once, and carries the answer out. The one writer of its NodeFlavorToken
// condition, its finalizer and its fill.
//
// Order of writes, so that a crash anywhere leaves nothing a retry cannot finish:
//   1. the finalizer (a Machine deleted from here on gets its token revoked);
//   2. POST /v1/tokens with Idempotency-Key = the config's UID: a retry after a crash, or after the
//      fill lost a race, gets the same token back, never a second one (ADR 0005);
//   3. one Update, from a fresh read with its resourceVersion: the fill, the token ID, the pause
//      lifted. A config that changed meanwhile (rendered, deleted, no longer paused, another
//      flavor) is not filled, and the token just issued is revoked at once.
// A token whose answer was lost for good (the issuer refuses to replay its key: older than its
// idempotency TTL, or revoked) is found by its description among this caller's own tokens and
// revoked, and the issuance starts over under a new key.
import { KubeError } from '../runtime/kube-error.ts';
import { involvedObject, type RawObject, readKubeadmConfig, updateKubeadmConfig } from './cluster-api.ts';
import { writeCondition } from './condition-writer.ts';
import { type CapiContext, RetryLater } from './context.ts';
import {
  type ConfigDecision,
  decideConfig,
  filledTokenId,
  flavorOf,
  isRendered,
  issuanceAttempt,
  tokenDescription,
} from './decide.ts';
import { filledKubeadmConfig } from './fill.ts';
import { type IssuedToken, IssuerCallError, type IssuerClient } from './issuer-client.ts';
import {
  CAPI_FINALIZER,
  type CachedKubeadmConfig,
  CachedKubeadmConfigSchema,
  clusterNameOf,
  controllerOf,
  ISSUANCE_ATTEMPT_ANNOTATION,
  KUBEADM_CONFIG_KIND,
  MACHINE_KIND,
  PAUSED_ANNOTATION,
  Reason,
  TOKEN_CONDITION,
  WARNING_REASONS,
} from './resources.ts';

type Issue = Extract<ConfigDecision, { kind: 'issue' }>;

export async function reconcileConfig(ctx: CapiContext, key: string): Promise<void> {
  const config = ctx.caches.configs.get(key);
  if (!config) return;
  const { namespace } = config.metadata;
  const clusterName = clusterNameOf(config);
  const clusterKey = clusterName === undefined ? undefined : `${namespace}/${clusterName}`;
  const cluster = clusterKey === undefined ? undefined : ctx.caches.clusters.get(clusterKey);
  const owner = controllerOf(config);
  const machine =
    owner?.kind === MACHINE_KIND ? ctx.caches.machines.get(`${namespace}/${owner.name}`) : undefined;
  const issuer =
    clusterKey === undefined
      ? ({ ok: false, message: 'it names no Cluster (label cluster.x-k8s.io/cluster-name)' } as const)
      : ctx.issuerFor(clusterKey);
  const decision = decideConfig(
    { config, machine, cluster, issuerAccess: issuer.ok ? { ok: true } : issuer },
    { tokenTtl: ctx.config.tokenTtl },
  );
  switch (decision.kind) {
    case 'ignore':
      return;
    case 'wait':
      await setTokenCondition(ctx, config, 'False', decision.reason, decision.message);
      return;
    case 'issued':
      await setTokenCondition(
        ctx,
        config,
        'True',
        Reason.Issued,
        `token ${decision.tokenId} is in place: the Machine joins with it as ${flavorOf(config) ?? 'its flavor'}`,
      );
      return;
    case 'addFinalizer':
      await rewrite(ctx, config, (fresh) => {
        fresh.metadata.finalizers = [...(fresh.metadata.finalizers ?? []), CAPI_FINALIZER];
      });
      return;
    case 'issue':
      if (!issuer.ok) return; // decided only with access (the chain checks it first)
      await issueAndFill(ctx, config, decision, issuer.client);
      return;
    case 'release':
      await release(
        ctx,
        config,
        decision.revoke,
        decision.why,
        issuer.ok ? issuer.client : undefined,
        issuer,
      );
      return;
  }
}

/** Applies the condition when it changed; an Event when its reason changed (Warning when it needs a human). */
async function setTokenCondition(
  ctx: CapiContext,
  config: CachedKubeadmConfig,
  status: 'True' | 'False',
  reason: Reason,
  message: string,
): Promise<void> {
  const written = await writeCondition(ctx, KUBEADM_CONFIG_KIND, config, {
    type: TOKEN_CONDITION,
    status,
    reason,
    message,
  });
  if (!written) return;
  if (written.previous?.reason !== reason || WARNING_REASONS.has(reason))
    ctx.events.emit(
      involvedObject(KUBEADM_CONFIG_KIND, config),
      WARNING_REASONS.has(reason) ? 'Warning' : 'Normal',
      reason === Reason.Issued ? 'TokenIssued' : reason,
      message,
    );
  // The Machine mirrors the config's waits.
  const owner = controllerOf(config);
  if (owner?.kind === MACHINE_KIND) ctx.enqueueMachine(`${config.metadata.namespace}/${owner.name}`);
}

/**
 * Reads the config fresh, changes it, and writes it back with its resourceVersion. A config gone
 * meanwhile is left alone; a 409 retries from a fresh read (the queue's backoff).
 */
async function rewrite(
  ctx: CapiContext,
  config: CachedKubeadmConfig,
  change: (fresh: RawObject) => void,
): Promise<void> {
  const fresh = await readKubeadmConfig(ctx.kubeConfig, config.metadata.namespace, config.metadata.name);
  if (!fresh || fresh.metadata.uid !== config.metadata.uid) return;
  change(fresh);
  ctx.caches.configs.assume(await updateKubeadmConfig(ctx.kubeConfig, fresh));
}

/** Whether a fresh read of the config may still be filled with a token issued for `flavor`. */
function stillFillable(fresh: CachedKubeadmConfig, original: CachedKubeadmConfig, flavor: string): boolean {
  return (
    fresh.metadata.uid === original.metadata.uid &&
    fresh.metadata.deletionTimestamp === undefined &&
    fresh.metadata.annotations?.[PAUSED_ANNOTATION] !== undefined &&
    !isRendered(fresh) &&
    filledTokenId(fresh) === undefined &&
    flavorOf(fresh) === flavor
  );
}

async function issueAndFill(
  ctx: CapiContext,
  config: CachedKubeadmConfig,
  decision: Issue,
  client: IssuerClient,
): Promise<void> {
  let issued: IssuedToken;
  try {
    issued = await client.issue(decision.body, decision.idempotencyKey);
  } catch (error) {
    await issuerFailed(ctx, config, error, client);
    return;
  }
  const raw = await readKubeadmConfig(ctx.kubeConfig, config.metadata.namespace, config.metadata.name);
  const fresh = raw ? CachedKubeadmConfigSchema.parse(raw) : undefined;
  if (!raw || !fresh || !stillFillable(fresh, config, decision.body.flavorClassName)) {
    if (fresh && filledTokenId(fresh) === issued.tokenID) return; // filled by an earlier pass: done
    // Not ours to fill any more: the token must not outlive the moment.
    await client.revoke(issued.id);
    ctx.metrics.revocations.inc({ result: 'ok' });
    ctx.log.info(
      { kubeadmConfig: `${config.metadata.namespace}/${config.metadata.name}`, tokenId: issued.tokenID },
      'the KubeadmConfig changed before it could be filled: its token was revoked',
    );
    ctx.requeueConfig(`${config.metadata.namespace}/${config.metadata.name}`, 0);
    return;
  }
  try {
    ctx.caches.configs.assume(
      await updateKubeadmConfig(
        ctx.kubeConfig,
        filledKubeadmConfig(raw, issued, decision.nodeName) as RawObject,
      ),
    );
  } catch (error) {
    ctx.metrics.issuances.inc({ result: 'fill-failed' });
    // The API server may quote a refused value: never let a token reach a log or a condition.
    throw redacted(error, [issued.bootstrapToken.reveal(), issued.joinConfiguration.reveal()]);
  }
  ctx.metrics.issuances.inc({ result: 'filled' });
  const pinned = decision.nodeName === undefined ? '' : ` (pinned to node name ${decision.nodeName})`;
  await setTokenCondition(
    ctx,
    CachedKubeadmConfigSchema.parse(raw),
    'True',
    Reason.Issued,
    `token ${issued.tokenID} is in place${pinned}: the Machine joins with it as ${decision.body.flavorClassName}`,
  );
}

/** An error whose message cannot hold any of `secrets` (nor the flavor token inside the second). */
function redacted(error: unknown, secrets: string[]): Error {
  let message = (error as Error).message ?? String(error);
  const flavorToken = /nodeflavor\.io\/token=[a-z2-7]{52}/g;
  message = message.replace(flavorToken, 'nodeflavor.io/token=[redacted]');
  for (const secret of secrets) if (secret) message = message.split(secret).join('[redacted]');
  const status = error instanceof KubeError ? error.status : 0;
  return new KubeError(status, error instanceof KubeError ? error.reason : 'Error', message);
}

/** The condition (and Event) for a failed issuer call, and when to try again. */
async function issuerFailed(
  ctx: CapiContext,
  config: CachedKubeadmConfig,
  error: unknown,
  client: IssuerClient,
): Promise<void> {
  if (!(error instanceof IssuerCallError)) throw error;
  ctx.metrics.issuances.inc({ result: error.failure });
  const key = `${config.metadata.namespace}/${config.metadata.name}`;
  switch (error.failure) {
    case 'rateLimited':
      ctx.requeueConfig(key, error.retryAfterMs ?? 1000);
      return;
    case 'conflict':
      await startOver(ctx, config, client, error.message);
      return;
    default:
      break;
  }
  const reason = {
    unreachable: Reason.IssuerUnreachable,
    unauthenticated: Reason.IssuerRefused,
    forbidden: Reason.FlavorNotAllowed,
    notFound: Reason.FlavorClassNotFound,
    invalid: Reason.IssuerRefused,
  }[error.failure];
  const hint =
    error.failure === 'unauthenticated'
      ? ': renew the token in the access Secret'
      : error.failure === 'forbidden'
        ? ": grant the access Secret's identity RBAC verb use on this FlavorClass in the workload cluster"
        : '';
  await setTokenCondition(ctx, config, 'False', reason, `${error.message}${hint}`);
  // Nothing in the management cluster changes when the issuer comes back or RBAC is granted: ask again.
  throw new RetryLater(`${reason}: ${error.message}`);
}

/**
 * The issuer will not replay this config's key (409): a token may exist whose answer was lost.
 * Revoke every live token of this config (found by its description), then record a new attempt,
 * whose key is new: the next pass issues afresh.
 */
async function startOver(
  ctx: CapiContext,
  config: CachedKubeadmConfig,
  client: IssuerClient,
  why: string,
): Promise<void> {
  const revoked = await revokeLost(client, config);
  const attempt = issuanceAttempt(config) + 1;
  await rewrite(ctx, config, (fresh) => {
    fresh.metadata.annotations = {
      ...fresh.metadata.annotations,
      [ISSUANCE_ATTEMPT_ANNOTATION]: String(attempt),
    };
  });
  ctx.events.emit(
    involvedObject(KUBEADM_CONFIG_KIND, config),
    'Warning',
    Reason.IssuerRefused,
    `${why}; revoked ${revoked.length} earlier token(s) of this KubeadmConfig${revoked.length ? ` (${revoked.join(', ')})` : ''} and asking again under a new Idempotency-Key (attempt ${attempt})`,
  );
}

/** Revokes the caller's live tokens that were issued for this config (by description); their IDs. */
async function revokeLost(client: IssuerClient, config: CachedKubeadmConfig): Promise<string[]> {
  const description = tokenDescription(config);
  const revoked: string[] = [];
  let continueToken: string | undefined;
  do {
    const page = await client.list(['Issued', 'Bound', 'Failed'], continueToken);
    for (const token of page.items) {
      if (token.description !== description) continue;
      await client.revoke(token.id);
      revoked.push(token.tokenID ?? token.id);
    }
    continueToken = page.continue ?? undefined;
  } while (continueToken);
  return revoked;
}

/** Revokes the config's token (unless its whole cluster goes), then lets the config go. */
async function release(
  ctx: CapiContext,
  config: CachedKubeadmConfig,
  revoke: boolean,
  why: string,
  client: IssuerClient | undefined,
  issuer: { ok: boolean; message?: string },
): Promise<void> {
  if (revoke) {
    const tokenId = filledTokenId(config);
    if (!client) {
      await setTokenCondition(
        ctx,
        config,
        'False',
        Reason.IssuerNotConfigured,
        `cannot revoke ${tokenId ? `token ${tokenId}` : 'its token'} (${why}): ${issuer.message ?? 'no issuer access'}; the finalizer ${CAPI_FINALIZER} holds the KubeadmConfig until it can`,
      );
      throw new RetryLater('no issuer access to revoke with');
    }
    try {
      let revoked = [tokenId ?? ''];
      if (tokenId) await client.revoke(`ft-${tokenId}`);
      else revoked = await revokeLost(client, config);
      ctx.metrics.revocations.inc({ result: 'ok' });
      if (revoked.length > 0)
        ctx.events.emit(
          involvedObject(KUBEADM_CONFIG_KIND, config),
          'Normal',
          'TokenRevoked',
          `token ${revoked.join(', ')} revoked: ${why}`,
        );
    } catch (error) {
      if (!(error instanceof IssuerCallError)) throw error;
      ctx.metrics.revocations.inc({ result: error.failure });
      if (error.failure === 'rateLimited') {
        ctx.requeueConfig(`${config.metadata.namespace}/${config.metadata.name}`, error.retryAfterMs ?? 1000);
        return;
      }
      await setTokenCondition(
        ctx,
        config,
        'False',
        error.failure === 'unreachable' ? Reason.IssuerUnreachable : Reason.IssuerRefused,
        `cannot revoke ${tokenId ? `token ${tokenId}` : 'its token'} (${why}): ${error.message}; the finalizer ${CAPI_FINALIZER} holds the KubeadmConfig until it can`,
      );
      throw new RetryLater(error.message);
    }
  }
  await rewrite(ctx, config, (fresh) => {
    fresh.metadata.finalizers = (fresh.metadata.finalizers ?? []).filter((f) => f !== CAPI_FINALIZER);
  });
}
