// The process's one cache of FlavoredTokens and one of join records (NodeNameClaims), each a
// list/watch of objects parsed against their schema once (src/flavor/resources.ts): the
// controller and the issuer each add their handlers to the same watch, as client-go's shared
// informers do, so the API server streams each change once per process. An object that does not
// conform (the CRD and the code drifted: the API server validated it) is not kept.
import {
  FLAVORED_TOKEN_PLURAL,
  FlavoredTokenSchema,
  GROUP,
  type NodeNameClaim,
  NodeNameClaimSchema,
  parseStored,
  type Stored,
  type StoredFlavoredToken,
  VERSION,
} from '../flavor/resources.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { ListWatch, type RestartReason, withoutManagedFields } from '../runtime/listwatch.ts';
import { internStrings } from './intern.ts';
import { CLAIMS_PATH } from './node-name-claims.ts';

type OnRestart = (reason: RestartReason, error?: Error) => void;

export type FlavoredTokenCache = ListWatch<StoredFlavoredToken>;
export type JoinRecordCache = ListWatch<Stored<NodeNameClaim>>;

export function flavoredTokenCache(kubeConfig: KubeConfig, onRestart?: OnRestart): FlavoredTokenCache {
  return new ListWatch<StoredFlavoredToken>({
    kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/${FLAVORED_TOKEN_PLURAL}`,
    // Conditions, reasons, the class name...: one copy of each shared string (intern.ts).
    transform: (raw) => {
      const token = parseStored(FlavoredTokenSchema, withoutManagedFields(raw));
      return token ? internStrings(token) : undefined;
    },
    ...(onRestart ? { onRestart } : {}),
  });
}

export function joinRecordCache(kubeConfig: KubeConfig, onRestart?: OnRestart): JoinRecordCache {
  return new ListWatch<Stored<NodeNameClaim>>({
    kubeConfig,
    path: CLAIMS_PATH,
    transform: (raw) => parseStored(NodeNameClaimSchema, withoutManagedFields(raw)),
    ...(onRestart ? { onRestart } : {}),
  });
}

/** The two, shared by every part of a process that reads them. */
export interface TokenCaches {
  tokens: FlavoredTokenCache;
  records: JoinRecordCache;
}
