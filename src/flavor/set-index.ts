// A many-to-many index of names, pure: the controller's and the issuer's caches keep theirs in it.

/**
 * A many-to-many index: key → member names. Nearly every key has one member (a node bound by one
 * token, a token with one CSR), so one member is kept as the string itself and a Set only for
 * more: at 10,000 nodes a Set per key cost ~1.5 MB.
 */
export class SetIndex {
  private readonly map = new Map<string, string | Set<string>>();
  add(key: string, member: string): void {
    const current = this.map.get(key);
    if (current === undefined) this.map.set(key, member);
    else if (typeof current === 'string') {
      if (current !== member) this.map.set(key, new Set([current, member]));
    } else current.add(member);
  }
  remove(key: string, member: string): void {
    const current = this.map.get(key);
    if (current === undefined) return;
    if (typeof current === 'string') {
      if (current === member) this.map.delete(key);
      return;
    }
    current.delete(member);
    if (current.size === 1) this.map.set(key, current.values().next().value as string);
  }
  get(key: string): string[] {
    const current = this.map.get(key);
    if (current === undefined) return [];
    return typeof current === 'string' ? [current] : [...current];
  }
}
