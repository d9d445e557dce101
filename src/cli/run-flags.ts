// Turns command-line flags and NODEFLAVOR_* environment variables into the raw settings a
// command's schema validates (`nodeflavor run`: src/config.ts; `nodeflavor capi`: src/capi/config.ts).
// Every key of the schema is a flag (--admission-mode) and an environment variable
// (NODEFLAVOR_ADMISSION_MODE); how its text is read follows its schema (booleans take --x / --no-x,
// numbers, comma lists), so a new setting needs no edit here.
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { ConfigSchema, kebab } from '../config.ts';

export class UsageError extends Error {}

type TextKind = 'boolean' | 'number' | 'list' | 'text';

interface Setting {
  key: string;
  kind: TextKind;
  envName: string;
  /** One item per use of the flag, which may repeat (the rest of the lists are comma-separated). */
  repeated: boolean;
}

/** Lists whose flag takes one item per use under a singular name too: --admin-group G ... */
const SINGULAR_FLAGS: Record<string, string> = {
  adminGroups: 'admin-group',
  trustedNodeLabels: 'trusted-node-label',
  // A pattern may hold a comma ({1,3}): one per use, never split.
  capiSyncedLabelPatterns: 'capi-synced-label-pattern',
  capiSyncedAnnotationPatterns: 'capi-synced-annotation-pattern',
};

/** What the setting's schema takes, seen through its default, optional and pipe wrappers. */
function kindOf(schema: z.ZodType): TextKind {
  if (schema instanceof z.ZodDefault || schema instanceof z.ZodPrefault || schema instanceof z.ZodOptional) {
    return kindOf(schema.unwrap() as z.ZodType);
  }
  if (schema instanceof z.ZodPipe) return kindOf(schema.in as z.ZodType);
  if (schema instanceof z.ZodBoolean) return 'boolean';
  if (schema instanceof z.ZodNumber) return 'number';
  if (schema instanceof z.ZodArray) return 'list';
  return 'text'; // strings, enums, and durations (their schema reads the text)
}

function settingValue(setting: Setting, text: string, source: string): unknown {
  switch (setting.kind) {
    case 'boolean':
      // Only true/false: `--leader-elect=yes` read as false would let two replicas reconcile.
      if (text === 'true' || text === 'false') return text === 'true';
      throw new UsageError(`${source} must be true or false, not "${text}"`);
    case 'number':
      return Number(text); // the schema names the flag when this is not a number
    case 'list':
      return text
        .split(',')
        .map((item) => item.trim())
        .filter(Boolean);
    case 'text':
      return text;
  }
}

/**
 * parseArgs takes no value on a boolean, but `--x=true|false` has always worked (and is
 * documented): turn it into --x / --no-x first.
 */
function booleanValuesAsFlags(args: string[], table: FlagTable): string[] {
  return args.map((arg) => {
    const match = /^--(no-)?([^=]+)=(.*)$/s.exec(arg);
    const setting = match ? table.settingOfFlag.get(match[2] as string) : undefined;
    if (!match || setting?.kind !== 'boolean') return arg;
    if (match[1]) throw new UsageError(`--no-${match[2]} takes no value`);
    return settingValue(setting, match[3] as string, `--${match[2]}`) ? `--${match[2]}` : `--no-${match[2]}`;
  });
}

/**
 * parseArgs explains a mistake in its own words; name the argument the way this command always
 * has, found by a lenient pass over the same arguments.
 */
function usageError(args: string[], error: unknown, table: FlagTable): unknown {
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS_')) return error;
  const { tokens } = parseArgs({
    args,
    options: table.options,
    strict: false,
    allowNegative: true,
    tokens: true,
  });
  for (const token of tokens) {
    if (token.kind === 'positional') return new UsageError(`unexpected argument "${token.value}"`);
    if (token.kind !== 'option') continue;
    if (!token.rawName.startsWith('--')) return new UsageError(`unexpected argument "${args[token.index]}"`);
    const option = table.options[token.name];
    const negated = token.rawName !== `--${token.name}`;
    if (!option || (negated && option.type !== 'boolean')) {
      return new UsageError(`unknown flag ${token.rawName}`);
    }
    const missing = token.value === undefined || (!token.inlineValue && token.value.startsWith('-'));
    if (option.type === 'string' && missing) return new UsageError(`${token.rawName} needs a value`);
  }
  return new UsageError((error as Error).message);
}

interface FlagTable {
  settings: Setting[];
  /** The parseArgs options table. */
  options: Record<string, { type: 'boolean' | 'string'; multiple?: boolean }>;
  /** The setting behind each flag name. */
  settingOfFlag: Map<string, Setting>;
}

function flagTable(shape: Record<string, z.ZodType>): FlagTable {
  const settings = Object.entries(shape).map(
    ([key, schema]): Setting => ({
      key,
      kind: kindOf(schema),
      envName: `NODEFLAVOR_${kebab(key).replace(/-/g, '_').toUpperCase()}`,
      repeated: key in SINGULAR_FLAGS,
    }),
  );
  const options: FlagTable['options'] = {};
  const settingOfFlag = new Map<string, Setting>();
  for (const setting of settings) {
    const names = [kebab(setting.key), SINGULAR_FLAGS[setting.key]].filter((name) => name !== undefined);
    for (const name of names) {
      options[name] = { type: setting.kind === 'boolean' ? 'boolean' : 'string', multiple: setting.repeated };
      settingOfFlag.set(name, setting);
    }
  }
  return { settings, options, settingOfFlag };
}

/** The flag parser of a command whose settings are the keys of `shape` (a zod object's shape). */
export function settingsFlagParser(
  shape: Record<string, z.ZodType>,
): (args: string[], env: NodeJS.ProcessEnv) => Record<string, unknown> {
  const table = flagTable(shape);
  return (args, env) => {
    const raw: Record<string, unknown> = {};
    // Environment first, so flags override it.
    for (const setting of table.settings) {
      const text = env[setting.envName];
      if (text !== undefined) raw[setting.key] = settingValue(setting, text, setting.envName);
    }
    if (env.POD_NAMESPACE && raw.namespace === undefined && 'namespace' in shape)
      raw.namespace = env.POD_NAMESPACE;

    const normalized = booleanValuesAsFlags(args, table);
    let tokens: ReturnType<typeof parseArgs>['tokens'];
    try {
      ({ tokens } = parseArgs({
        args: normalized,
        options: table.options,
        strict: true,
        allowNegative: true,
        tokens: true,
      }));
    } catch (error) {
      throw usageError(normalized, error, table);
    }
    const listedByFlag = new Set<string>();
    for (const token of tokens) {
      if (token.kind !== 'option') continue;
      const setting = table.settingOfFlag.get(token.name) as Setting;
      if (setting.kind === 'boolean') {
        raw[setting.key] = token.rawName === `--${token.name}`; // else --no-x
      } else if (setting.repeated) {
        // The first use replaces the environment's list; later ones add to it.
        const earlier = listedByFlag.has(setting.key) ? (raw[setting.key] as string[]) : [];
        raw[setting.key] = [...earlier, token.value as string];
        listedByFlag.add(setting.key);
      } else {
        raw[setting.key] = settingValue(setting, token.value as string, token.rawName);
      }
    }
    return raw;
  };
}

/** `nodeflavor run`'s flags: every setting of ConfigSchema. */
export const parseRunFlags = settingsFlagParser(ConfigSchema.shape);
