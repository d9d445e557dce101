// Node reconciler (key: the Node's name), the only writer of Nodes. Gathers the join its name's
// record carries (ADR 0016), the refusals of requests for the name, the FlavorClasses and the key
// ring; asks decideNode for a verdict; carries it out in ONE Node write: the flavor, the signed
// verification record (the proof, bound to this Node's UID) and the record of what nodeflavor
// applied (so a later class change removes exactly that) — or no flavor, the quarantine, and the
// refusal record saying why. It writes nothing else: the join reconciler reads the outcome from
// the Node (wiring.ts) and records it on the join.
import { TOKEN_LABEL_KEY } from '../flavor/admission.ts';
import {
  APPLIED_ANNOTATION,
  type AppliedRecordReading,
  isNothingApplied,
  readAppliedRecord,
  signAppliedRecord,
} from '../flavor/applied-record.ts';
import {
  type DesiredNodeState,
  desiredNodeState,
  type ManagedKeys,
  managedKeys,
  nodeMatches,
  onlyBookkeeping,
  provenApplied,
} from '../flavor/converge.ts';
import type { KeyRing } from '../flavor/keyring.ts';
import { REFUSED_ANNOTATION, refusalAnnotation } from '../flavor/refusal-record.ts';
import { type FlavorClassSpec, JOINED_LABEL_KEY } from '../flavor/resources.ts';
import { rfc3339 } from '../flavor/rfc3339.ts';
import {
  decideNode,
  type NodeFacts,
  readVerificationRecord,
  VERIFIED_ANNOTATION,
  type VerificationRecord,
} from '../flavor/verdict.ts';
import { signedRecordAnnotation } from '../flavor/verification-record.ts';
import type { TrimmedNode } from '../kube/node-writes.ts';
import { failpoint } from '../runtime/failpoints.ts';
import { KubeError } from '../runtime/kube-error.ts';
import { boundTokenOf, refusalsForName } from './bound-token.ts';
import type { ControllerContext, Requeue } from './context.ts';
import { nodeFacts } from './facts.ts';
import { involvedToken } from './involved.ts';

function flavorClassMap(ctx: ControllerContext): Map<string, FlavorClassSpec> {
  return new Map(ctx.caches.classes.list().map((c) => [c.metadata.name, c.spec ?? {}]));
}

/**
 * Writes the Node; a 409 means our cache was behind a newer version (the kubelet's own status
 * writes race us right after registration): the watch brings the newer one and we decide again.
 */
async function write(ctx: ControllerContext, node: TrimmedNode, desired: DesiredNodeState): Promise<boolean> {
  try {
    // Until the watch brings this version, the cache serves it (a reconcile in between starts
    // from what we wrote, not from the version we wrote over).
    ctx.caches.nodes.assume(await ctx.api.writeNode(node, desired));
    return true;
  } catch (error) {
    if (error instanceof KubeError && error.status === 409) {
      // Changed since it was judged: the watch brings the change (and enqueues the node); the
      // requeue is only a backstop should its event have come while this reconcile ran.
      return false;
    }
    throw error;
  }
}

/** Protected labels or annotations other than the token label (what an intruder would forge). */
function carriesTrustedKeys(facts: ReturnType<typeof nodeFacts>, keys: ManagedKeys): boolean {
  return (
    Object.keys(facts.labels).some((k) => k !== TOKEN_LABEL_KEY && keys.isProtectedLabel(k)) ||
    Object.keys(facts.annotations).some((k) => keys.isProtectedAnnotation(k))
  );
}

/** The write that converges the Node, from its applied record (a record proving nothing counts as none). */
function converge(
  facts: NodeFacts,
  keyRing: KeyRing,
  reading: AppliedRecordReading,
  keys: ManagedKeys,
  flavor: { flavorClass: FlavorClassSpec; annotation: string } | undefined,
  joined: boolean,
  refusal?: string,
): DesiredNodeState {
  return desiredNodeState({
    node: facts,
    applied: provenApplied(reading),
    flavor,
    keys,
    joined,
    record: (applied) => signAppliedRecord(keyRing, facts.uid, applied),
    ...(refusal !== undefined ? { refusal } : {}),
  });
}

/**
 * Says, once the write that replaced it is done, that the record proved nothing (Warning Event),
 * or that a node flavored before records existed got its first one (`upgradedFrom`, a log line).
 */
function reportRecord(
  ctx: ControllerContext,
  facts: NodeFacts,
  reading: AppliedRecordReading,
  upgradedFrom?: string,
): void {
  if (reading.state === 'invalid') {
    // Fail safe: only keys owned by claim were removed; any other key it named stays.
    ctx.log.warn({ node: facts.name, why: reading.why }, 'applied record proves nothing; replaced');
    ctx.events.emit(
      { apiVersion: 'v1', kind: 'Node', name: facts.name, uid: facts.uid },
      'Warning',
      'InvalidAppliedRecord',
      `node ${facts.name}'s ${APPLIED_ANNOTATION} record proves nothing (${reading.why}): nodeflavor removed only keys under nodeflavor.io/ or named by a FlavorClass, left every other key in place, and now records what it applies`,
    );
  } else if (upgradedFrom !== undefined) {
    ctx.log.info(
      { node: facts.name, flavorClass: upgradedFrom },
      'first applied record, from the FlavorClass as it is now: keys the class dropped before are not known and stay',
    );
  }
}

/** Whether the verdict rests on a MAC that did not verify under the ring it was judged with. */
function failedMacCheck(
  verdict: ReturnType<typeof decideNode>,
  applied: AppliedRecordReading,
  hasRecord: boolean,
): boolean {
  if (applied.state === 'invalid') return true;
  // A record naming a token that no longer verifies may have been signed with a key the watched
  // ring has not brought yet (its flavor token label is gone by then: no InvalidToken to see).
  if (verdict.kind === 'unflavored' && verdict.failure.reason === 'MissingToken' && hasRecord) return true;
  return (
    verdict.kind === 'unflavored' &&
    (verdict.failure.reason === 'InvalidToken' || verdict.failure.reason === 'InvalidRecord')
  );
}

/** A write that lost a race with a newer version: the watch brings it; this is a backstop. */
const CONFLICT_RETRY_MS = 1_000;

export async function reconcileNode(ctx: ControllerContext, name: string): Promise<Requeue> {
  // First, so that everything below is read from the caches at one moment.
  const rejectedClaims = await refusalsForName(ctx, name);
  const node = ctx.caches.nodes.get(name);
  if (!node || node.metadata.deletionTimestamp) return undefined;
  const facts = nodeFacts(node);
  const classes = flavorClassMap(ctx);
  const keys = managedKeys(classes.values());
  const now = ctx.now();
  const record = ctx.caches.claims.get(name);
  const bound = record ? boundTokenOf(record, (n) => ctx.caches.tokens.get(n)) : undefined;
  const bindings = bound ? [bound] : [];
  const nameClaimed = record !== undefined;
  // Every Node that came through nodeflavor carries the joined mark (kept, never removed).
  const joined = nameClaimed || bindings.length > 0 || Object.hasOwn(facts.labels, JOINED_LABEL_KEY);
  const judge = (keyRing: KeyRing) => ({
    keyRing,
    verdict: decideNode({
      node: facts,
      bindings,
      rejectedClaims,
      nameClaimed,
      flavorClasses: classes,
      keyRing,
      now,
      bindingGraceMs: ctx.config.bindingGrace,
      carriesTrustedKeys: carriesTrustedKeys(facts, keys),
      tokenExists: (tokenId) => ctx.indexes.tokenNameById.has(tokenId),
    }),
    applied: readAppliedRecord(keyRing, facts.uid, facts.annotations[APPLIED_ANNOTATION]),
  });
  let judged = judge(await ctx.keyRing());
  // A MAC that fails under the watched ring may have been made with a key a rotation added that
  // the watch has not brought yet (another replica issued with it): judge again with the ring
  // as the API server has it now before calling anything forged.
  if (failedMacCheck(judged.verdict, judged.applied, readVerificationRecord(facts) !== undefined)) {
    const fresh = await ctx.freshKeyRing();
    if (fresh !== judged.keyRing) judged = judge(fresh);
  }
  const { keyRing, verdict, applied } = judged;
  const involved = { apiVersion: 'v1', kind: 'Node', name, uid: facts.uid };

  switch (verdict.kind) {
    case 'unmanaged':
      return undefined;
    case 'wait':
      return verdict.retryAfterMs;
    case 'verify':
    case 'flavored': {
      let record: VerificationRecord;
      if (verdict.bound) {
        const { token, binding } = verdict.bound;
        const own = readVerificationRecord(facts);
        const verifiedAt =
          verdict.kind === 'verify'
            ? rfc3339(now)
            : (binding.verifiedAt ??
              (own?.tokenID === token.tokenId ? own.verifiedAt : undefined) ??
              rfc3339(now));
        record = { tokenID: token.tokenId, flavorClass: token.flavorClassName, verifiedAt };
      } else {
        record = (verdict as { record: VerificationRecord }).record;
      }
      // Signed for this Node's UID with the active key: a rotation re-signs records as nodes are
      // reconciled, and a copy on another Node, or a hand-made one, proves nothing.
      const desired = converge(
        facts,
        keyRing,
        applied,
        keys,
        {
          flavorClass: verdict.flavorClass,
          annotation: signedRecordAnnotation(keyRing, facts.uid, record),
        },
        true,
      );
      if (nodeMatches(facts, desired)) return undefined;
      const firstTime = !Object.hasOwn(facts.annotations, VERIFIED_ANNOTATION);
      const bookkeeping = onlyBookkeeping(facts, desired);
      // Verified before, yet no record: flavored by a version that kept none (an upgrade).
      const upgrade = !firstTime && applied.state === 'absent' && !isNothingApplied(desired.applied);
      if (!(await write(ctx, node, desired))) return CONFLICT_RETRY_MS;
      if (verdict.kind === 'verify') failpoint('after-node-judged');
      reportRecord(ctx, facts, applied, upgrade ? record.flavorClass : undefined);
      if (verdict.kind === 'verify' || firstTime) {
        ctx.metrics.verifications.inc({ result: 'verified', reason: 'Verified' });
        ctx.metrics.joinToFlavored.observe((Date.now() - facts.createdAt.getTime()) / 1000);
        if (ctx.config.verifiedEvents)
          ctx.events.emit(
            involved,
            'Normal',
            'Verified',
            `flavor ${record.flavorClass} applied (token ${record.tokenID})`,
          );
      } else if (!bookkeeping) {
        ctx.events.emit(
          involved,
          'Normal',
          'FlavorRestored',
          `labels, annotations or taints were brought in line with FlavorClass ${record.flavorClass} (a class edit, or a drift)`,
        );
      }
      return undefined;
    }
    case 'unflavored': {
      // The node's own join (not one left by a Node of this name that is gone) is told why by the
      // refusal record this write leaves on the Node (the join reconciler copies it onto the join's
      // record), and so is the token's holder, by a Warning on the token.
      const own =
        bound && (!bound.binding.nodeUID || bound.binding.nodeUID === facts.uid) ? bound : undefined;
      const refusal = refusalAnnotation(verdict.failure, facts.annotations[REFUSED_ANNOTATION], rfc3339(now));
      const desired = converge(facts, keyRing, applied, keys, undefined, joined, refusal);
      const changed = !nodeMatches(facts, desired);
      if (changed && !(await write(ctx, node, desired))) return CONFLICT_RETRY_MS;
      if (changed && bound) failpoint('after-node-judged');
      // Said once per change: the refusal record on the Node says this reason was reported (a new
      // leader, or a resync, judging the same says nothing again).
      if (changed) {
        reportRecord(ctx, facts, applied);
        ctx.metrics.verifications.inc({ result: 'rejected', reason: verdict.failure.reason });
        ctx.events.emit(involved, 'Warning', verdict.failure.reason, verdict.failure.message);
        const token = own ? ctx.caches.tokens.get(own.token.name) : undefined;
        if (token)
          ctx.events.emit(involvedToken(token), 'Warning', verdict.failure.reason, verdict.failure.message);
      }
      return undefined;
    }
  }
}
