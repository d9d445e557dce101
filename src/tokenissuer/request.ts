// What a caller may ask for when issuing a token, and its validation: the same rules for the HTTP
// API and the CLI. Field names match the FlavoredToken spec; errors name the failing fields.
import { z } from 'zod';
import {
  DateTimeSchema,
  DEFAULT_MAX_USES,
  DNS_SUBDOMAIN_PATTERN,
  LIMITS,
  NODE_NAME_GLOB_PATTERN,
  parseDuration,
  TtlSchema,
} from '../flavor/resources.ts';
import { type FieldError, IssuerError } from './errors.ts';

const DNS_SUBDOMAIN_RE = new RegExp(DNS_SUBDOMAIN_PATTERN);

/** A token must stay valid at least this long after it is issued, or no node could use it. */
const MIN_VALIDITY_MS = 5_000;

/** PEM text of one kind, bounded: an RSA-2048 public key is ~450 bytes, an EK certificate ~1.5 KB. */
const pem = (label: string, maxLength: number) =>
  z
    .string()
    .max(maxLength)
    .refine((text) => text.trim().startsWith(`-----BEGIN ${label}-----`), {
      message: `must be PEM (-----BEGIN ${label}-----)`,
    });

/** Binds the token to one machine's TPM (ADR 0014): exactly one of its EK public key or EK certificate. */
const AttestationRequestSchema = z
  .strictObject({
    ekPublicKey: pem('PUBLIC KEY', 4096)
      .meta({
        description:
          "The TPM's endorsement key, PEM SubjectPublicKeyInfo (RSA 2048). Not with ekCertificate.",
      })
      .optional(),
    ekCertificate: pem('CERTIFICATE', LIMITS.ekCertificateLength)
      .meta({
        description:
          "The TPM's EK certificate, PEM, optionally followed by the intermediate CA certificates it was issued through; it must chain to a configured TPM manufacturer root. Not with ekPublicKey.",
      })
      .optional(),
    allowRejoin: z
      .boolean()
      .meta({
        default: false,
        description: 'A machine re-installed with the same TPM may join again under the name it joined with.',
      })
      .optional(),
  })
  .refine((a) => (a.ekPublicKey === undefined) !== (a.ekCertificate === undefined), {
    message: 'set exactly one of ekPublicKey and ekCertificate',
    path: ['ekPublicKey'],
  })
  .meta({ description: 'Bind the token to one TPM: its material then holds no secret (attested join).' });

/**
 * The body of POST /v1/tokens as the server validates it; the OpenAPI document's IssueRequest is
 * generated from it (openapi.ts), so the two cannot drift.
 */
export const IssueRequestSchema = z
  .strictObject({
    flavorClassName: z
      .string({
        error: (issue) =>
          issue.input === undefined ? 'is required: the name of a FlavorClass' : 'must be a string',
      })
      .min(1)
      .max(253)
      .regex(DNS_SUBDOMAIN_RE, { message: 'must be a FlavorClass name (a DNS subdomain)' })
      .meta({ description: 'The FlavorClass to grant.' }),
    ttl: TtlSchema.meta({
      description: 'Validity, e.g. 1h or 30m (at most the configured maxTtl). Not with expiresAt.',
    }).optional(),
    expiresAt: DateTimeSchema.meta({
      format: 'date-time',
      description: 'Absolute expiry. Not with ttl.',
    }).optional(),
    maxUses: z
      .number()
      .int()
      .min(0)
      .max(LIMITS.maxUses)
      .meta({
        default: DEFAULT_MAX_USES,
        description: 'How many nodes may join (0: no count limit until expiry).',
      })
      .optional(),
    nodeName: z
      .string()
      .max(LIMITS.nodeNameLength)
      .regex(DNS_SUBDOMAIN_RE, { message: 'must be a node name (a DNS subdomain)' })
      .meta({ description: 'The only node name allowed. Not with nodeNamePattern.' })
      .optional(),
    nodeNamePattern: z
      .string()
      .max(LIMITS.nodeNameLength)
      .regex(new RegExp(NODE_NAME_GLOB_PATTERN), {
        message: "must hold only lowercase letters, digits, '.', '-' and '*'",
      })
      .meta({ description: "A glob ('*') of allowed node names. Not with nodeName." })
      .optional(),
    description: z
      .string()
      .max(LIMITS.descriptionLength)
      .meta({ description: 'Free text, recorded on the FlavoredToken.' })
      .optional(),
    attestation: AttestationRequestSchema.optional(),
  })
  .superRefine((request, ctx) => {
    if (request.attestation?.allowRejoin && request.nodeName === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['nodeName'],
        message: 'is required with attestation.allowRejoin: a machine re-joins under its one name',
      });
    }
    if (request.attestation !== undefined && request.maxUses !== undefined && request.maxUses !== 1) {
      ctx.addIssue({
        code: 'custom',
        path: ['maxUses'],
        message: 'must be 1 for a token bound to a TPM (one machine; allowRejoin lets it join again)',
      });
    }
    if (request.ttl !== undefined && request.expiresAt !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['expiresAt'], message: 'set at most one of ttl and expiresAt' });
    }
    if (request.nodeName !== undefined && request.nodeNamePattern !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['nodeNamePattern'],
        message: 'set at most one of nodeName and nodeNamePattern',
      });
    }
  });

export type IssueRequest = z.input<typeof IssueRequestSchema>;
/** A request that passed validation, with maxUses defaulted and the expiry decided. */
export type ValidIssueRequest = z.output<typeof IssueRequestSchema> & { maxUses: number };

/**
 * zod issues as field errors, the first issue per field only (later checks of an already-failed
 * field, such as a range check after a format check, would only confuse); unknown fields are
 * named one by one.
 */
export function fieldErrors(error: z.ZodError): FieldError[] {
  const fields: FieldError[] = [];
  const push = (field: string, message: string) => {
    if (!fields.some((f) => f.field === field)) fields.push({ field, message });
  };
  for (const issue of error.issues) {
    const base = issue.path.map(String).join('.');
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        push(base === '' ? key : `${base}.${key}`, 'is not a known field');
      }
      continue;
    }
    push(base === '' ? '(body)' : base, issue.message);
  }
  return fields;
}

/** A query string the schema refused: IssuerError InvalidRequest naming each parameter. */
export function invalidQuery(error: z.ZodError): IssuerError {
  const fields = fieldErrors(error).map((f) =>
    f.message === 'is not a known field' ? { ...f, message: 'is not a known query parameter' } : f,
  );
  return new IssuerError(
    'InvalidRequest',
    `invalid query: ${fields.map((f) => `${f.field} ${f.message}`).join('; ')}`,
    fields,
  );
}

/**
 * Validates a request against the schema and the issuer's limits (maxTtl, at least
 * MIN_VALIDITY_MS ahead). Throws IssuerError InvalidRequest naming every failing field.
 */
export function validateIssueRequest(
  input: unknown,
  limits: { maxTtl: string },
  now: Date,
): ValidIssueRequest {
  const parsed = IssueRequestSchema.safeParse(input);
  if (!parsed.success) throw invalidRequest(parsed.error);
  const request = parsed.data;
  const maxTtlMs = parseDuration(limits.maxTtl);
  const fields: FieldError[] = [];
  if (request.ttl !== undefined) {
    const ttlMs = parseDuration(request.ttl);
    if (ttlMs > maxTtlMs) fields.push({ field: 'ttl', message: `must be at most ${limits.maxTtl}` });
    if (ttlMs < MIN_VALIDITY_MS) fields.push({ field: 'ttl', message: 'must be at least 5s' });
  }
  if (request.expiresAt !== undefined) {
    const aheadMs = Date.parse(request.expiresAt) - now.getTime();
    if (aheadMs < MIN_VALIDITY_MS) {
      fields.push({ field: 'expiresAt', message: 'must be at least 5 seconds in the future' });
    } else if (aheadMs > maxTtlMs) {
      fields.push({ field: 'expiresAt', message: `must be at most ${limits.maxTtl} in the future` });
    }
  }
  if (fields.length > 0) throw new IssuerError('InvalidRequest', describe(fields), fields);
  return { ...request, maxUses: request.maxUses ?? DEFAULT_MAX_USES };
}

/** A body that failed its schema, as the 400 every endpoint answers: each failing field named. */
export function invalidRequest(error: z.ZodError): IssuerError {
  const fields = fieldErrors(error);
  return new IssuerError('InvalidRequest', describe(fields), fields);
}

function describe(fields: FieldError[]): string {
  return `invalid request: ${fields.map((f) => `${f.field} ${f.message}`).join('; ')}`;
}
