// Turns `nodeflavor run` flags and NODEFLAVOR_* environment variables into the raw settings
// that src/config.ts validates. Flags are the config keys in kebab-case (--admission-mode);
// booleans take --x / --no-x; --admin-group repeats.
import { ConfigSchema, kebab } from '../config.ts';

const BOOLEANS = new Set([
  'controller',
  'webhook',
  'issuer',
  'leaderElect',
  'csrApprover',
  'allowUnguardedNodes',
  'issuerPortal',
]);
const NUMBERS = new Set([
  'workers',
  'issuerMaxConnectionsPerAddress',
  'issuerMaxConnections',
  'issuerAuthFailureBurst',
  'issuerAuthFailuresPerSecond',
  'issuerCallerBurst',
  'issuerCallerPerSecond',
]);
const LISTS: Record<string, string> = { 'admin-group': 'adminGroups', 'admin-groups': 'adminGroups' };
/** Lists given as one comma-separated value, as a flag and in the environment. */
const COMMA_LISTS = new Set(['adminGroups', 'issuerTrustedProxies']);
const commaList = (value: string) =>
  value
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);

const camel = (flag: string) => flag.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
const KEYS = new Set(Object.keys(ConfigSchema.shape));

export class UsageError extends Error {}

function parseBoolean(value: string, name: string): boolean {
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new UsageError(`${name} must be true or false, not "${value}"`);
}

export function parseRunFlags(args: string[], env: NodeJS.ProcessEnv): Record<string, unknown> {
  const raw: Record<string, unknown> = {};
  // Environment first, so flags override it.
  for (const key of KEYS) {
    const envName = `NODEFLAVOR_${kebab(key).replace(/-/g, '_').toUpperCase()}`;
    const value = env[envName];
    if (value === undefined) continue;
    raw[key] = BOOLEANS.has(key)
      ? parseBoolean(value, envName)
      : NUMBERS.has(key)
        ? Number(value)
        : COMMA_LISTS.has(key)
          ? commaList(value)
          : value;
  }
  if (env.POD_NAMESPACE && raw.namespace === undefined) raw.namespace = env.POD_NAMESPACE;

  const fromFlags = new Set<string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument "${arg}"`);
    const [flag, inline] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    const listKey = LISTS[flag];
    if (listKey) {
      const value = inline ?? args[++i];
      if (value === undefined) throw new UsageError(`--${flag} needs a value`);
      // The first --admin-group replaces the environment's list; later ones add to it.
      const current = fromFlags.has(listKey) ? ((raw[listKey] as string[] | undefined) ?? []) : [];
      fromFlags.add(listKey);
      raw[listKey] = [...current, value];
      continue;
    }
    if (flag.startsWith('no-') && BOOLEANS.has(camel(flag.slice(3)))) {
      if (inline !== undefined) throw new UsageError(`--${flag} takes no value`);
      raw[camel(flag.slice(3))] = false;
      continue;
    }
    const key = camel(flag);
    if (!KEYS.has(key)) throw new UsageError(`unknown flag --${flag}`);
    if (BOOLEANS.has(key)) {
      raw[key] = inline === undefined ? true : parseBoolean(inline, `--${flag}`);
      continue;
    }
    const value = inline ?? args[++i];
    if (value === undefined) throw new UsageError(`--${flag} needs a value`);
    raw[key] = NUMBERS.has(key) ? Number(value) : COMMA_LISTS.has(key) ? commaList(value) : value;
  }
  return raw;
}
