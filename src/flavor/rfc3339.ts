/**
 * A Kubernetes `Time` (and a bootstrap token's `expiration`): RFC 3339 in UTC with whole seconds.
 * The fraction is dropped, not rounded, as the API server stores a metav1.Time.
 */
export function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
