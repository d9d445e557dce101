// `kubectl flavor keys`: the documented way to rotate the HMAC key ring (add, activate, retire)
// instead of a hand-edited Secret. Each edit reads the Secret, changes the ring with a pure
// function of src/flavor/keyring.ts and writes it back with the resourceVersion it read, so a
// concurrent edit fails (nothing written) rather than being lost. Key material is never printed:
// only key ids (the Secret's own entry names) and states.

import {
  activateKey,
  addKey,
  describeKeyRing,
  KEY_ID_PATTERN,
  type KeyRing,
  newKeyRing,
  retireKey,
} from '../flavor/keyring.ts';
import {
  createKeyRingSecret,
  describeLocation,
  type KeyRingLocation,
  readStoredKeyRing,
  replaceKeyRing,
} from '../kube/keyring-store.ts';
import { KubeError } from '../runtime/kube-error.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { asJson, asYaml, table } from './flavor-output.ts';

const KEYS_COMMANDS = ['list', 'add', 'activate', 'retire', 'init'] as const;
type KeysCommand = (typeof KEYS_COMMANDS)[number];

/** A usage problem of a keys command (exit 2), checked before the cluster is contacted; undefined if fine. */
export function keysUsageError(args: string[]): string | undefined {
  const [sub, ...rest] = args;
  if (sub === undefined) return `keys needs a command (${KEYS_COMMANDS.join(', ')})`;
  if (!(KEYS_COMMANDS as readonly string[]).includes(sub)) return `unknown keys command '${sub}'`;
  if (sub === 'activate' || sub === 'retire') {
    if (rest.length !== 1 || !rest[0])
      return `keys ${sub} takes exactly one key id (see kubectl flavor keys list)`;
    if (!KEY_ID_PATTERN.test(rest[0])) return `'${rest[0]}' is not a key id (8 lowercase hex characters)`;
    return undefined;
  }
  if (rest.length > 0) return `unexpected argument '${rest[0]}'`;
  return undefined;
}

interface Io {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

export async function runKeys(
  kubeConfig: KubeConfig,
  location: KeyRingLocation,
  args: string[],
  output: string,
  io: Io,
): Promise<number> {
  const [sub, id = ''] = args as [KeysCommand, string | undefined];
  switch (sub) {
    case 'list': {
      const { ring } = await readStoredKeyRing(kubeConfig, location);
      const keys = describeKeyRing(ring);
      if (output === 'json') io.stdout(asJson({ items: keys }));
      else if (output === 'yaml') io.stdout(asYaml({ items: keys }));
      else
        io.stdout(
          table(
            ['KEY-ID', 'STATE'],
            keys.map((k) => [k.id, k.state]),
          ),
        );
      return 0;
    }
    case 'add': {
      let added = '';
      await edit(kubeConfig, location, (ring) => {
        const result = addKey(ring);
        added = result.id;
        return result.ring;
      });
      io.stdout(
        `key ${added} added as verify-only (it verifies at once and signs nothing yet): ` +
          `activate it with 'kubectl flavor keys activate ${added}'\n`,
      );
      return 0;
    }
    case 'activate': {
      let previous = '';
      const changed = await edit(kubeConfig, location, (ring) => {
        previous = ring.active.id;
        return activateKey(ring, id);
      });
      io.stdout(
        changed
          ? `key ${id} is now active; key ${previous} is verify-only (tokens it derived still verify)\n`
          : `key ${id} is already active\n`,
      );
      return 0;
    }
    case 'retire':
      await edit(kubeConfig, location, (ring) => retireKey(ring, id));
      io.stdout(`key ${id} retired: tokens derived with it no longer verify\n`);
      return 0;
    case 'init': {
      // The escape hatch when the ring is lost for good: the operator refuses to make one itself
      // once tokens exist, because every outstanding token then fails.
      if (!(await createKeyRingSecret(kubeConfig, location, newKeyRing()))) {
        throw new KubeError(
          409,
          'AlreadyExists',
          `the HMAC key ${describeLocation(location)} already exists: use 'kubectl flavor keys add' to rotate`,
        );
      }
      io.stdout(
        `created a new HMAC key ring in ${describeLocation(location)}: tokens issued before no longer verify ` +
          `(reissue them); back the Secret up now\n`,
      );
      return 0;
    }
  }
}

/** Read, edit, write with the read resourceVersion. False when the edit changed nothing (no write). */
async function edit(
  kubeConfig: KubeConfig,
  location: KeyRingLocation,
  change: (ring: KeyRing) => KeyRing,
): Promise<boolean> {
  const stored = await readStoredKeyRing(kubeConfig, location);
  const next = change(stored.ring);
  if (next === stored.ring) return false;
  await replaceKeyRing(kubeConfig, location, stored, next);
  return true;
}
