// One copy of each short string the caches hold many times over. JSON.parse makes a fresh string
// for every value it reads, so 10,000 cached FlavoredTokens hold 40,000 copies of "Ready",
// "False", each condition reason and message, the FlavorClass name, the finalizer, ...; and
// 10,000 Nodes as many copies of "linux", "amd64", their region and zone. Interning them on
// receipt (the list/watch transform) keeps one. Unique values (names, UIDs) pass through: the
// table is bounded, and a string seen once costs only its lookup.
//
// Never a secret: the table lives as long as the process, so whatever enters it outlives the
// object it came from. A Node's flavor token (label nodeflavor.io/token, removed by the controller
// once judged) would stay in memory for good. Two rules keep it out, each enough alone: the values
// of secret-bearing keys are never interned (whatever they hold, a malformed token included), and
// intern() itself refuses any string shaped like a flavor token (whatever key or caller it comes
// from).
import { FLAVOR_TOKEN_LENGTH, FLAVOR_TOKEN_PATTERN } from '../flavor/flavor-token.ts';
import { SECRET_VALUED_KEYS } from '../flavor/resources.ts';

/**
 * Longer values (certificates, verification records) are rarely shared: left alone. 80, not 64: a
 * settled token's SecretDeleted message (71 characters) is the same on every token.
 */
const MAX_LENGTH = 80;
/** Bounds the table (a few hundred KB at most); once full, new strings are kept as they are. */
const MAX_ENTRIES = 50_000;

const table = new Map<string, string>();

/** A flavor token's form; the length first, so that most strings skip the pattern. */
function mayBeFlavorToken(value: string): boolean {
  return value.length === FLAVOR_TOKEN_LENGTH && FLAVOR_TOKEN_PATTERN.test(value);
}

export function intern(value: string): string {
  if (value.length > MAX_LENGTH || mayBeFlavorToken(value)) return value;
  const known = table.get(value);
  if (known !== undefined) return known;
  if (table.size < MAX_ENTRIES) table.set(value, value);
  return value;
}

/** Interns every short string value in `object` (arrays and plain objects, in place); returns it. */
export function internStrings<T>(object: T): T {
  walk(object);
  return object;
}

function walk(value: unknown): void {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item = value[i];
      if (typeof item === 'string') value[i] = intern(item);
      else if (typeof item === 'object' && item !== null) walk(item);
    }
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  const record = value as Record<string, unknown>;
  for (const key in record) {
    const item = record[key];
    if (typeof item === 'string') {
      if (!SECRET_VALUED_KEYS.has(key)) record[key] = intern(item);
    } else if (typeof item === 'object' && item !== null) walk(item);
  }
}

/** Whether `value` is in the table. For tests: what the table holds is otherwise unobservable. */
export function isInterned(value: string): boolean {
  return table.has(value);
}
