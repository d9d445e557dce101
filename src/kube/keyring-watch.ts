// The key ring as every part of a process sees it: a watch of the one Secret (list/watch with a
// metadata.name field selector, which RBAC authorises against resourceNames), so a rotation done
// with `kubectl flavor keys` is in effect as soon as the API server tells us, with no cache to
// wait out. One per process: the controller and the issuer share it.
//
// Fail closed: when the Secret is deleted or unreadable as a ring, the ring is dropped, nothing is
// issued or verified, /readyz says why, and a log line, a Warning Event on the Secret and
// `nodeflavor_keyring_available 0` tell an operator how to restore it. A fresh ring is created
// only on first install (no FlavoredToken exists). When the Secret comes back, everything resumes.
// A watch that merely fails (API server down) keeps the last ring: nothing says it changed.
// A watch can also lag or go quiet without failing; `refresh()` reads the Secret now, for a
// verdict that is about to say a MAC is wrong (it may only be that we missed a rotation).

import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { RandomBytes } from '../flavor/bootstrap-token.ts';
import { type KeyRing, keyRingKeys, newKeyRing } from '../flavor/keyring.ts';
import type { EventRecorder } from '../runtime/events.ts';
import { faultEnabled } from '../runtime/failpoints.ts';
import { kubeJson } from '../runtime/fetch.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { ListWatch, type RestartReason } from '../runtime/listwatch.ts';
import {
  createKeyRingSecret,
  describeLocation,
  isFirstInstall,
  type KeyRingLocation,
  KeyRingUnavailableError,
  missingRingMessage,
  parseRing,
} from './keyring-store.ts';

type State =
  | { status: 'loading'; message: string }
  | { status: 'available'; ring: KeyRing }
  | { status: 'missing'; message: string }
  | { status: 'invalid'; message: string };

interface SecretObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; uid?: string };
  data?: Record<string, string>;
}

interface KeyRingWatchOptions extends KeyRingLocation {
  kubeConfig: KubeConfig;
  /** Create a ring when the Secret is missing on first install (the operator; never the CLI). */
  createIfMissing: boolean;
  log: Logger;
  registry?: Registry;
  /** Where the Warning Events go (on the Secret, in its namespace); none when absent. */
  events?: EventRecorder;
  randomBytes?: RandomBytes;
  /** How long `get()` waits for the first list before it fails (default 10 s). */
  loadTimeoutMs?: number;
  /** Retry delay of a first-install check that failed (default 5 s). */
  retryMs?: number;
}

interface RingMetrics {
  available: Gauge;
  unavailable: Counter<'reason'>;
}

function ringMetrics(registry: Registry): RingMetrics {
  // One watch per process, but tests start several issuers on one registry: reuse what exists.
  const available =
    (registry.getSingleMetric('nodeflavor_keyring_available') as Gauge | undefined) ??
    new Gauge({
      name: 'nodeflavor_keyring_available',
      help: '1 while the HMAC key ring is loaded and usable; 0 while it is missing, invalid or not loaded yet.',
      registers: [registry],
    });
  const unavailable =
    (registry.getSingleMetric('nodeflavor_keyring_unavailable_total') as Counter<'reason'> | undefined) ??
    new Counter({
      name: 'nodeflavor_keyring_unavailable_total',
      help: 'Times the HMAC key ring became unusable, by reason (missing, invalid).',
      labelNames: ['reason'],
      registers: [registry],
    });
  return { available, unavailable };
}

export class KeyRingWatch {
  readonly #options: KeyRingWatchOptions;
  readonly #where: string;
  readonly #watch: ListWatch<SecretObject>;
  readonly #metrics: RingMetrics | undefined;
  readonly #listeners: ((ring: KeyRing | undefined) => void)[] = [];
  #state: State = { status: 'loading', message: 'the HMAC key ring is not loaded yet' };
  #waiters: (() => void)[] = [];
  /** Bumped by every Secret event: a first-install check started before one is stale. */
  #generation = 0;
  #retryTimer: NodeJS.Timeout | undefined;
  #stopped = false;
  #started: Promise<void> | undefined;
  #reading: Promise<KeyRing> | undefined;
  #nextRead: Promise<KeyRing> | undefined;

  constructor(options: KeyRingWatchOptions) {
    this.#options = options;
    this.#where = describeLocation(options);
    this.#metrics = options.registry ? ringMetrics(options.registry) : undefined;
    this.#metrics?.available.set(0);
    this.#watch = new ListWatch<SecretObject>({
      kubeConfig: options.kubeConfig,
      path: `/api/v1/namespaces/${options.namespace}/secrets`,
      fieldSelector: `metadata.name=${options.name}`,
      onEvent: (type, secret) => {
        if (this.#state.status === 'available' && faultEnabled('freeze-keyring-watch')) return;
        this.#generation += 1;
        if (type === 'DELETED') void this.#onMissing();
        else this.#onSecret(secret);
      },
      onRestart: (reason, error) => this.#onRestart(reason, error),
    });
  }

  /** Starts watching; resolves once the first list is in (the ring may still be missing). */
  start(): Promise<void> {
    this.#started ??= this.#watch.start().then(() => {
      if (!this.#stopped && this.#state.status === 'loading') return this.#onMissing();
    });
    return this.#started;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retryTimer);
    this.#watch.stop();
    this.#wake();
  }

  /** True while a usable ring is loaded (what /readyz reports). */
  get available(): boolean {
    return this.#state.status === 'available';
  }

  /** The issuer's name for `available`. */
  get loaded(): boolean {
    return this.available;
  }

  /** Why the ring cannot be used, for /readyz and errors; undefined while it can. */
  get unavailableReason(): string | undefined {
    return this.#state.status === 'available' ? undefined : this.#state.message;
  }

  /** Called with the new ring on every change, and with undefined when it becomes unusable. */
  onChange(listener: (ring: KeyRing | undefined) => void): void {
    this.#listeners.push(listener);
  }

  /** The ring; waits for the first list, then throws KeyRingUnavailableError while unusable. */
  async get(): Promise<KeyRing> {
    if (this.#state.status === 'loading' && !this.#stopped) {
      void this.start();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.#options.loadTimeoutMs ?? 10_000);
        timer.unref();
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    const state = this.#state;
    if (state.status === 'available') return state.ring;
    throw new KeyRingUnavailableError(
      state.status === 'missing'
        ? 'KeyRingMissing'
        : state.status === 'invalid'
          ? 'KeyRingInvalid'
          : 'KeyRingNotLoaded',
      state.message,
    );
  }

  /**
   * The ring as the API server has it now (one list by name, which the chart's RBAC allows),
   * adopted as if the watch had brought it. Every caller gets a read that began after it asked
   * (a read already under way may predate the rotation it needs); callers that ask during a read
   * share the one that follows it, so a burst of failing verdicts costs two reads, not one each.
   */
  refresh(): Promise<KeyRing> {
    if (!this.#reading) {
      this.#reading = this.#readNow().finally(() => {
        this.#reading = undefined;
      });
      return this.#reading;
    }
    this.#nextRead ??= this.#reading
      .catch(() => undefined)
      .then(() => {
        this.#nextRead = undefined;
        return this.refresh();
      });
    return this.#nextRead;
  }

  async #readNow(): Promise<KeyRing> {
    const list = await kubeJson<{ items?: SecretObject[] }>(
      this.#options.kubeConfig,
      'GET',
      `/api/v1/namespaces/${this.#options.namespace}/secrets`,
      {
        query: { fieldSelector: `metadata.name=${this.#options.name}` },
        action: `read the HMAC key ring ${this.#where}`,
      },
    );
    const secret = list.items?.[0];
    if (secret) this.#onSecret(secret);
    return this.get();
  }

  #onSecret(secret: SecretObject): void {
    let ring: KeyRing;
    try {
      ring = parseRing(secret, this.#where);
    } catch (error) {
      const message = `${(error as Error).message}: fix or restore the Secret (see docs/operations.md#restoring-the-key-ring); nothing is issued or verified until then`;
      this.#setUnavailable({ status: 'invalid', message }, 'KeyRingInvalid');
      return;
    }
    const previous = this.#state;
    // A metadata-only change (labels, a relist) is no rotation: nothing to tell anyone.
    if (previous.status === 'available' && sameRing(previous.ring, ring)) return;
    this.#state = { status: 'available', ring };
    this.#metrics?.available.set(1);
    const keys = ring.verifyOnly.length + 1;
    if (previous.status === 'missing' || previous.status === 'invalid') {
      this.#options.log.info(
        { keyRing: this.#where, activeKey: ring.active.id, keys },
        'HMAC key ring restored',
      );
      this.#options.events?.emit(
        this.#involved(secret),
        'Normal',
        'KeyRingRestored',
        `the HMAC key ring is usable again (active key ${ring.active.id}, ${keys} keys)`,
      );
    } else {
      this.#options.log.info(
        { keyRing: this.#where, activeKey: ring.active.id, keys },
        'HMAC key ring loaded',
      );
    }
    this.#notify(ring);
  }

  async #onMissing(): Promise<void> {
    const generation = this.#generation;
    clearTimeout(this.#retryTimer);
    const { kubeConfig, createIfMissing } = this.#options;
    try {
      if (createIfMissing && (await isFirstInstall(kubeConfig))) {
        if (generation !== this.#generation || this.#stopped) return; // the Secret came back meanwhile
        const ring = newKeyRing(this.#options.randomBytes);
        // The watch brings the Secret we (or a faster replica) created: that event makes it available.
        if (await createKeyRingSecret(kubeConfig, this.#options, ring)) {
          this.#options.log.info({ keyRing: this.#where }, 'first install: created the HMAC key ring');
          this.#options.events?.emit(
            this.#involved(),
            'Normal',
            'KeyRingCreated',
            'first install: created a new HMAC key ring; back it up (docs/operations.md#backup-of-the-key-ring)',
          );
        }
        return;
      }
      if (generation !== this.#generation || this.#stopped) return;
      const message = createIfMissing
        ? missingRingMessage(this.#options)
        : `the HMAC key ring ${this.#where} does not exist: restore it from your backup (docs/operations.md#restoring-the-key-ring) or check --key-secret`;
      this.#setUnavailable({ status: 'missing', message }, 'KeyRingMissing');
    } catch (error) {
      if (generation !== this.#generation || this.#stopped) return;
      // Could not tell whether this is a first install: stay unusable and ask again soon.
      this.#setUnavailable(
        {
          status: 'missing',
          message: `the HMAC key ring ${this.#where} is missing and whether FlavoredTokens exist could not be checked (${(error as Error).message}): retrying`,
        },
        'KeyRingMissing',
        true,
      );
      this.#retryTimer = setTimeout(() => void this.#onMissing(), this.#options.retryMs ?? 5000);
      this.#retryTimer.unref();
    }
  }

  /**
   * Counted once per loss (not per retry or reworded reason); logged and recorded as an Event when
   * the reason is new. A `transient` state (a check that failed and is retried) only warns: the
   * API server it could not reach would not take the Event either.
   */
  #setUnavailable(
    state: Extract<State, { status: 'missing' | 'invalid' }>,
    reason: string,
    transient = false,
  ): void {
    const previous = this.#state;
    this.#state = state;
    this.#metrics?.available.set(0);
    if (previous.status !== state.status) this.#metrics?.unavailable.inc({ reason: state.status });
    if (transient) {
      this.#options.log.warn({ keyRing: this.#where, reason }, state.message);
    } else if (
      previous.status !== state.status ||
      (previous as { message?: string }).message !== state.message
    ) {
      this.#options.log.error({ keyRing: this.#where, reason }, state.message);
      this.#options.events?.emit(this.#involved(), 'Warning', reason, state.message);
    }
    if (previous.status === 'available') this.#notify(undefined);
    this.#wake();
  }

  #onRestart(reason: RestartReason, error?: Error): void {
    if (reason !== 'error') return;
    if (this.#state.status === 'loading') {
      this.#state = {
        status: 'loading',
        message: `the HMAC key ring is not loaded yet: ${error?.message ?? 'watch failed'}`,
      };
    }
    this.#options.log.warn(
      { keyRing: this.#where, err: error?.message },
      'HMAC key ring watch failed; retrying (the last ring stays in use)',
    );
  }

  #involved(secret?: SecretObject) {
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      name: this.#options.name,
      namespace: this.#options.namespace,
      ...(secret?.metadata?.uid ? { uid: secret.metadata.uid } : {}),
    };
  }

  #notify(ring: KeyRing | undefined): void {
    this.#wake();
    for (const listener of this.#listeners) {
      try {
        listener(ring);
      } catch (error) {
        this.#options.log.warn({ err: (error as Error).message }, 'key ring listener failed');
      }
    }
  }

  #wake(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }
}

/** Same keys, same roles, same order. Not constant time: both rings are ours, nothing is guessed. */
function sameRing(a: KeyRing, b: KeyRing): boolean {
  const [keysA, keysB] = [keyRingKeys(a), keyRingKeys(b)];
  return (
    a.active.id === b.active.id &&
    keysA.length === keysB.length &&
    keysA.every((key, i) => key.id === keysB[i]?.id && key.key.equals(keysB[i].key))
  );
}
