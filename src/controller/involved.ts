// The object an Event about a FlavoredToken names (kubectl describe shows it there).
import type { StoredFlavoredToken } from '../flavor/resources.ts';
import type { InvolvedObject } from '../runtime/events.ts';

export function involvedToken(token: StoredFlavoredToken): InvolvedObject {
  return {
    apiVersion: token.apiVersion,
    kind: 'FlavoredToken',
    name: token.metadata.name,
    uid: token.metadata.uid,
  };
}
