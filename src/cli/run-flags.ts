// Turns `nodeflavor run` flags and NODEFLAVOR_* environment variables into the raw settings
// that src/config.ts validates. Flags are the config keys in kebab-case (--admission-mode);
// booleans take --x / --no-x; --admin-group repeats.
import { ConfigSchema, kebab } from '../config.ts';

const BOOLEANS = new Set(['controller', 'webhook', 'issuer', 'leaderElect', 'csrApprover']);
const NUMBERS = new Set(['workers']);
const LISTS: Record<string, string> = { 'admin-group': 'adminGroups', 'admin-groups': 'adminGroups' };

const camel = (flag: string) => flag.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
const KEYS = new Set(Object.keys(ConfigSchema.shape));

export class UsageError extends Error {}

export function parseRunFlags(args: string[], env: NodeJS.ProcessEnv): Record<string, unknown> {
  const raw: Record<string, unknown> = {};
  // Environment first, so flags override it.
  for (const key of KEYS) {
    const value = env[`NODEFLAVOR_${kebab(key).replace(/-/g, '_').toUpperCase()}`];
    if (value === undefined) continue;
    raw[key] = BOOLEANS.has(key)
      ? value === 'true'
      : NUMBERS.has(key)
        ? Number(value)
        : key === 'adminGroups'
          ? value.split(',')
          : value;
  }
  if (env.POD_NAMESPACE && raw.namespace === undefined) raw.namespace = env.POD_NAMESPACE;

  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument "${arg}"`);
    const [flag, inline] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    const listKey = LISTS[flag];
    if (listKey) {
      const value = inline ?? args[++i];
      if (value === undefined) throw new UsageError(`--${flag} needs a value`);
      raw[listKey] = [...((raw[listKey] as string[] | undefined) ?? []), value];
      continue;
    }
    if (flag.startsWith('no-') && BOOLEANS.has(camel(flag.slice(3)))) {
      raw[camel(flag.slice(3))] = false;
      continue;
    }
    const key = camel(flag);
    if (!KEYS.has(key)) throw new UsageError(`unknown flag --${flag}`);
    if (BOOLEANS.has(key)) {
      raw[key] = inline === undefined ? true : inline === 'true';
      continue;
    }
    const value = inline ?? args[++i];
    if (value === undefined) throw new UsageError(`--${flag} needs a value`);
    raw[key] = NUMBERS.has(key) ? Number(value) : value;
  }
  return raw;
}
