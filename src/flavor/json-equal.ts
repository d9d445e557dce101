// Equality of JSON documents as the API server sees them. Objects come back from the API server
// with their keys in its own order (custom resources are re-serialised from Go maps, so sorted),
// never in the order we built them: comparing JSON.stringify output would see a change in every
// status we compute and turn each reconcile into a no-op write.

/** True when `a` and `b` serialise to the same JSON up to object key order (undefined = absent). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, i) => sameJson(item ?? null, b[i] ?? null));
  }
  const present = (o: object) =>
    Object.entries(o).filter(([, v]) => v !== undefined && typeof v !== 'function');
  const left = present(a);
  const right = new Map(present(b));
  return left.length === right.size && left.every(([k, v]) => right.has(k) && sameJson(v, right.get(k)));
}
