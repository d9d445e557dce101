// GET /v1/tokens: the query (validated with zod, unknown parameters refused) and the page of a
// caller's tokens it asks for. Pure: which tokens the caller may see is decided before; this
// orders them (newest first), filters by phase and cuts a page with an opaque cursor.
import { z } from 'zod';
import { TOKEN_PHASES, type TokenPhase } from '../../flavor/token-lifecycle.ts';
import { IssuerError } from '../errors.ts';
import type { TokenStatusView } from '../issuance/issue.ts';
import { invalidQuery } from '../request.ts';

export const DEFAULT_PAGE_SIZE = 100;
export const MAX_PAGE_SIZE = 500;

const phaseList = z
  .string()
  .max(200)
  .transform((text, ctx) => {
    const phases = text.split(',').map((p) => p.trim());
    for (const phase of phases) {
      if (!(TOKEN_PHASES as readonly string[]).includes(phase)) {
        ctx.addIssue({
          code: 'custom',
          message: `must be a comma-separated list of ${TOKEN_PHASES.join(', ')}`,
        });
        return z.NEVER;
      }
    }
    return new Set(phases as TokenPhase[]);
  });

const TokenListQuerySchema = z.strictObject({
  /** Only tokens in these phases (comma-separated). */
  phase: phaseList.optional(),
  limit: z
    .string()
    .regex(/^[0-9]{1,4}$/, { message: `must be a whole number from 1 to ${MAX_PAGE_SIZE}` })
    .transform(Number)
    .refine((n) => n >= 1 && n <= MAX_PAGE_SIZE, { message: `must be from 1 to ${MAX_PAGE_SIZE}` })
    .optional(),
  /** The `continue` of the previous page. */
  continue: z.string().max(1024).optional(),
  /** own (default): the tokens the caller issued; all: every token (RBAC list on flavoredtokens). */
  scope: z.enum(['own', 'all']).optional(),
});
type TokenListQuery = z.output<typeof TokenListQuerySchema>;

/** Parses the query string object fastify hands over; IssuerError InvalidRequest naming the fields. */
export function parseTokenListQuery(query: unknown): TokenListQuery {
  const parsed = TokenListQuerySchema.safeParse(query ?? {});
  if (parsed.success) return parsed.data;
  throw invalidQuery(parsed.error);
}

type Cursor = [createdAt: string, name: string];

function encodeCursor(view: TokenStatusView): string {
  return Buffer.from(JSON.stringify([view.createdAt ?? '', view.id] satisfies Cursor)).toString('base64url');
}

function decodeCursor(text: string): Cursor {
  try {
    const value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === 'string'))
      return value as Cursor;
  } catch {
    // falls through to the error below
  }
  throw new IssuerError('InvalidRequest', 'invalid query: continue is not a cursor this API returned', [
    { field: 'continue', message: 'must be the continue value of a previous page' },
  ]);
}

/** Newest first; ties by name, so the order (and every cursor) is total. */
function compare(a: Cursor, b: Cursor): number {
  if (a[0] !== b[0]) return a[0] < b[0] ? 1 : -1;
  return a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0;
}

export interface TokenPage {
  items: TokenStatusView[];
  /** Pass as `continue` for the next page; null on the last one. */
  continue: string | null;
}

/**
 * One page of `views` (already only those the caller may see): filtered by phase, newest first,
 * after the cursor. A token created between two pages' requests and newer than the cursor is on
 * no page of this walk: list again from the start to see it.
 */
export function tokenPage(views: TokenStatusView[], query: TokenListQuery): TokenPage {
  const limit = query.limit ?? DEFAULT_PAGE_SIZE;
  const after = query.continue === undefined ? undefined : decodeCursor(query.continue);
  const ordered = views
    .filter((v) => query.phase === undefined || query.phase.has(v.phase))
    .map((v) => ({ v, key: [v.createdAt ?? '', v.id] as Cursor }))
    .filter(({ key }) => after === undefined || compare(key, after) > 0)
    .sort((a, b) => compare(a.key, b.key))
    .map(({ v }) => v);
  const items = ordered.slice(0, limit);
  const last = items.at(-1);
  return { items, continue: ordered.length > limit && last ? encodeCursor(last) : null };
}
