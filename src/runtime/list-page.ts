// One page of a Kubernetes list, parsed item by item. `JSON.parse` of a whole page (100 Nodes,
// ~1.1 MB) builds every item's full object graph at once: it outlives the young generation (the
// chart's is 2 MiB), is promoted, and each promotion costs a scavenge's copying and, later, old
// generation marking that also walks the whole cache. Parsed one at a time and trimmed at once, an
// item's garbage dies young: a synthetic 10,000-Node list took 0.74-0.84 s of CPU instead of
// 1.23-1.56 s; a 10,000-node restart, 1.8-3.2 s of CPU more than a bare list instead of 3.3-4.2 s
// (bench/RESULTS.md, P5).
//
// The API server writes a list compactly with `items` last: `{...,"metadata":{...},"items":[{"metadata":
// ...},{"metadata":...}]}`. Items are split where `},{"<first key>":` recurs. That sequence cannot
// occur inside a JSON string (a quote in a string is always escaped), so every match is structural;
// one inside an item (an array of objects starting with the same key) leaves both pieces around it
// unbalanced. A piece that does not parse as one object, `items` not the root's last member,
// whitespace between items: anything else falls back to parsing the whole page, so the result is
// what JSON.parse of the whole page gives (a reviewer's counterexamples are in the unit tests).

export interface ListPage<T> {
  metadata?: { resourceVersion?: string; continue?: string };
  items: T[];
}

const ITEMS = '"items":[';

/**
 * The page's metadata and its items through `transform`. `transform` must be pure: when a split
 * gives up part-way, the items are transformed again from the whole page.
 */
export function parseListPage<T>(text: string, transform: (raw: unknown) => T): ListPage<T> {
  const split = parseItemByItem(text, transform);
  if (split) return split;
  const page = JSON.parse(text) as { metadata?: ListPage<T>['metadata']; items?: unknown[] | null };
  return { metadata: page.metadata, items: (page.items ?? []).map(transform) };
}

function parseItemByItem<T>(text: string, transform: (raw: unknown) => T): ListPage<T> | undefined {
  const open = text.indexOf(ITEMS);
  const close = text.lastIndexOf(']');
  // Only the root's closing brace may follow: then the `items` replaced below is the root object's
  // last member (the one JSON.parse keeps among duplicates), not a nested one before it.
  if (open < 0 || close < open + ITEMS.length || !/^\s*\}\s*$/.test(text.slice(close + 1))) return undefined;
  let envelope: { metadata?: ListPage<T>['metadata']; items?: unknown };
  try {
    envelope = JSON.parse(`${text.slice(0, open)}"items":[]${text.slice(close + 1)}`);
  } catch {
    return undefined;
  }
  if (!isObject(envelope) || !Array.isArray(envelope.items) || envelope.items.length !== 0) return undefined;
  const items: T[] = [];
  const body = text.slice(open + ITEMS.length, close);
  if (body.length === 0) return { metadata: envelope.metadata, items };
  if (!body.startsWith('{"')) return undefined;
  const firstKeyEnd = body.indexOf('":', 2);
  if (firstKeyEnd < 0) return undefined;
  const separator = `},${body.slice(0, firstKeyEnd + 2)}`;
  for (let from = 0; ; ) {
    const at = body.indexOf(separator, from);
    const raw = parsedObject(body.slice(from, at < 0 ? body.length : at + 1));
    // An unbalanced piece (the separator matched inside an item): the whole page decides.
    if (raw === undefined) return undefined;
    items.push(transform(raw));
    if (at < 0) break;
    from = at + 2;
  }
  return { metadata: envelope.metadata, items };
}

function parsedObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
