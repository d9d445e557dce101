// A secret value that cannot leak by accident: every path by which an object turns into text
// (String(), template literals, JSON, util.inspect, console.log) yields '[redacted]'. The value
// is reachable only through an explicit `reveal()`, so a leak is always a visible decision.

const REDACTED = '[redacted]';

export class Secret {
  // An ES private field, not a TypeScript `private`: it is invisible to util.inspect,
  // Object.keys, spreading and JSON, not merely to the type checker.
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  /** The secret itself. Call it only where the value must leave the process (HTTP body, Secret data). */
  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }

  // Template literals and `+` go through Symbol.toPrimitive before toString.
  [Symbol.toPrimitive](): string {
    return REDACTED;
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return REDACTED;
  }
}
