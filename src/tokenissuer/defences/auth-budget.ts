// The failed-authentication budget and what the issuer remembers about bearers, as one decision
// per request: may this bearer cost a review (a TokenReview, or a JWT verification)?
//   1. answered valid within auth.cacheSeconds: its caller, no review, no budget;
//   2. answered invalid within auth.cacheSeconds: 401 from memory, no review, no budget;
//   3. valid at some point within knownBearerSeconds: reviewed, outside its address's budget, so a
//      flood of bad tokens from a shared address (a proxy, a NAT) does not lock out known callers;
//   4. anyone else reserves one unit of its address's budget *before* the review, or gets 429:
//      N such requests at once cost at most the budget, never N. The unit comes back when the
//      bearer proves valid or the review could not be made; it is spent when the bearer is invalid.
// Pure and synchronous (the clock is passed in); bearers are keys from bearer-key.ts, never tokens;
// every map is bounded.
import { BoundedCache } from './bounded-cache.ts';
import { type BucketSettings, RateLimiter } from './rate-limit.ts';

export interface BudgetSettings {
  /** The budget per client address; undefined: none (every unknown bearer is reviewed). */
  perAddress?: BucketSettings;
  /** How long an answer (valid or invalid) is remembered; 0: not at all. */
  cacheMs: number;
  /** How long a bearer that was valid stays outside the budget; 0: never. */
  knownMs: number;
  /** Entries kept per map (addresses, valid, invalid, known bearers). */
  maxKeys: number;
}

/** A reservation for one review; settle it exactly once. */
export interface Ticket {
  readonly bearer: string;
  readonly address: string;
  /** Whether a unit of the address's budget was taken for it (not for a known bearer). */
  readonly reserved: boolean;
}

export type Admission<C> =
  | { kind: 'cached'; caller: C }
  | { kind: 'refused' }
  | { kind: 'limited'; retryAfterSeconds: number }
  | { kind: 'review'; ticket: Ticket };

export class AuthBudget<C> {
  readonly #settings: BudgetSettings;
  readonly #addresses: RateLimiter | undefined;
  readonly #valid: BoundedCache<string, C>;
  readonly #invalid: BoundedCache<string, true>;
  readonly #known: BoundedCache<string, true>;
  readonly #open = new WeakSet<Ticket>();

  constructor(settings: BudgetSettings) {
    this.#settings = settings;
    this.#addresses = settings.perAddress
      ? new RateLimiter(settings.perAddress, settings.maxKeys)
      : undefined;
    this.#valid = new BoundedCache(settings.maxKeys);
    this.#invalid = new BoundedCache(settings.maxKeys);
    this.#known = new BoundedCache(settings.maxKeys);
  }

  admit(bearer: string, address: string, now: number): Admission<C> {
    const caller = this.#valid.get(bearer, now);
    if (caller !== undefined) return { kind: 'cached', caller };
    if (this.#invalid.get(bearer, now)) return { kind: 'refused' };
    if (this.#known.get(bearer, now) || !this.#addresses) return this.#ticket(bearer, address, false);
    const decision = this.#addresses.take(address, now);
    if (!decision.allowed) return { kind: 'limited', retryAfterSeconds: decision.retryAfterSeconds };
    return this.#ticket(bearer, address, true);
  }

  /** The review found the bearer valid: the unit goes back, the caller is remembered. */
  valid(ticket: Ticket, caller: C, now: number): void {
    if (!this.#settle(ticket)) return;
    if (ticket.reserved) this.#addresses?.refund(ticket.address, now);
    this.#invalid.delete(ticket.bearer);
    const { cacheMs, knownMs } = this.#settings;
    if (cacheMs > 0) this.#valid.set(ticket.bearer, caller, cacheMs, now);
    if (knownMs > 0) this.#known.set(ticket.bearer, true, knownMs, now);
  }

  /** The review found the bearer invalid: the unit is spent; a known bearer is known no more. */
  invalid(ticket: Ticket, now: number): void {
    if (!this.#settle(ticket)) return;
    this.#valid.delete(ticket.bearer);
    this.#known.delete(ticket.bearer);
    if (this.#settings.cacheMs > 0) this.#invalid.set(ticket.bearer, true, this.#settings.cacheMs, now);
  }

  /** The review could not be made (the API server failed): not the caller's fault, the unit goes back. */
  unanswered(ticket: Ticket, now: number): void {
    if (!this.#settle(ticket)) return;
    if (ticket.reserved) this.#addresses?.refund(ticket.address, now);
  }

  #ticket(bearer: string, address: string, reserved: boolean): Admission<C> {
    const ticket: Ticket = { bearer, address, reserved };
    this.#open.add(ticket);
    return { kind: 'review', ticket };
  }

  /** True the first time a ticket is settled; a second settlement changes nothing. */
  #settle(ticket: Ticket): boolean {
    return this.#open.delete(ticket);
  }
}
