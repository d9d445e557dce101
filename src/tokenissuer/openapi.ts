// The token issuer's API (OpenAPI 3.1), served at /openapi.json. Request bodies are generated
// from the zod schemas the server validates them with (z.toJSONSchema), so they cannot drift; the
// rest is described by hand. Unit tests check that every route the server registers is described
// here and vice versa, and that each request body is the conversion of its validating schema.
import { z } from 'zod';
import { TOKEN_PHASES } from '../flavor/token-lifecycle.ts';
import { FAILURE_REASONS } from '../flavor/verdict.ts';
import { AnswerRequestSchema, ChallengeRequestSchema } from './attestation/attestation.ts';
import { ERROR_STATUS } from './errors.ts';
import { IssueRequestSchema } from './request.ts';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './tokens/token-list.ts';
import { DEFAULT_WATCH_SECONDS, MAX_WATCH_SECONDS } from './tokens/token-watch.ts';

/**
 * A request body's JSON Schema: the zod schema's input side (defaults and transforms not yet
 * applied) as JSON Schema 2020-12, the dialect of OpenAPI 3.1, without its $schema line.
 * Refinements across fields (ttl or expiresAt, nodeName or nodeNamePattern) are not expressible;
 * the fields' descriptions say them.
 */
export function requestBodySchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _dialect, ...body } = z.toJSONSchema(schema, { io: 'input' });
  return body;
}

/** Each operation that takes a body, and the schema the server validates that body with. */
export const REQUEST_BODY_SCHEMAS: Record<string, z.ZodType> = {
  issueToken: IssueRequestSchema,
  challengeAttestation: ChallengeRequestSchema,
  answerAttestation: AnswerRequestSchema,
};

const json = (schema: object) => ({ 'application/json': { schema } });
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const errorResponse = (description: string) => ({ description, content: json(ref('Error')) });

const errors = {
  '400': errorResponse('The request is invalid; `fields` names each failing field.'),
  '401': errorResponse('No credentials, or invalid ones.'),
  '403': errorResponse('The caller may not use the flavor (or the token’s flavor).'),
  '408': errorResponse(
    'The request line, headers or body did not arrive within the server’s timeouts; the connection is closed.',
  ),
  '429': errorResponse(
    'Too many requests from this caller, or too many failed authentications from its address; see Retry-After.',
  ),
  '500': errorResponse('The issuer failed (e.g. missing RBAC); the message says what to fix.'),
  '503': errorResponse(
    'The Kubernetes API is unavailable, or the HMAC key ring is missing (an operator must restore it), or ' +
      '(token discovery only) kube-public/cluster-info carries too many token signatures; retry later.',
  ),
};

const notYours = errorResponse(
  'No such token, or not one the caller issued: a token is visible only to the caller that issued it ' +
    '(who must still be allowed its flavor, else 403) and to callers whose RBAC allows this verb on ' +
    'flavoredtokens.nodeflavor.io. The answer does not tell the two cases apart.',
);

const attestedTokenRef = {
  name: 'tokenId',
  in: 'path',
  required: true,
  description: 'The 6-character token ID of a token bound to a TPM (its material names it).',
  schema: { type: 'string', maxLength: 253 },
};

/** The errors both attestation requests may answer (they take no credentials: no 401). */
const attestationErrors = (invalid: string, forbidden: string, conflict: string, gone: string) => ({
  '400': errorResponse(invalid),
  '403': errorResponse(forbidden),
  '404': errorResponse('No token bound to a TPM has this ID (an unknown ID, or a token not bound to one).'),
  '408': errors['408'],
  '409': errorResponse(conflict),
  '410': errorResponse(gone),
  '413': errorResponse('The body is larger than the limit (16 KiB by default).'),
  '415': errorResponse('The body is not application/json.'),
  '429': errorResponse(
    'Too many attestation requests from this address (a small budget per client address); see Retry-After.',
  ),
  '500': errors['500'],
  '503': errorResponse(
    'The Kubernetes API is unavailable, the HMAC key ring is missing, or the token kept changing while ' +
      'it was being attested; retry later.',
  ),
});

const tokenRef = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'The FlavoredToken name (ft-<tokenID>) or the 6-character token ID.',
  schema: { type: 'string', maxLength: 253 },
};

export const OPENAPI_DOCUMENT = {
  openapi: '3.1.0',
  info: {
    title: 'nodeflavor token issuer',
    version: 'v1',
    description:
      'Issues kubeadm join material bound to a flavor (FlavorClass). The answer to an issuance has the ' +
      'same shape and size for every flavor and does not name the flavor: the caller knows what it asked ' +
      'for, the node administrator who receives the material must not be able to tell. Error bodies are ' +
      '`{"error": {"code", "message", "fields"?}}`.',
  },
  servers: [{ url: '/' }],
  security: [{ bearer: [] }],
  paths: {
    '/v1/tokens': {
      get: {
        operationId: 'listTokens',
        summary: 'The caller’s tokens, newest first, a page at a time (no secrets)',
        description:
          'scope=own (default): the tokens the caller issued and may still use the flavor of. scope=all: every ' +
          'token, for a Kubernetes caller whose RBAC allows `list` on flavoredtokens.nodeflavor.io (else 403). ' +
          'Served from the issuer’s watch of FlavoredTokens: a token issued a moment ago may take a moment to appear.',
        parameters: [
          {
            name: 'phase',
            in: 'query',
            required: false,
            description: `Only tokens in these phases, comma-separated (${TOKEN_PHASES.join(', ')}).`,
            schema: { type: 'string', maxLength: 200 },
          },
          {
            name: 'limit',
            in: 'query',
            required: false,
            description: `Page size, 1 to ${MAX_PAGE_SIZE} (default ${DEFAULT_PAGE_SIZE}).`,
            schema: { type: 'integer', minimum: 1, maximum: MAX_PAGE_SIZE },
          },
          {
            name: 'continue',
            in: 'query',
            required: false,
            description: 'The `continue` of the previous page.',
            schema: { type: 'string', maxLength: 1024 },
          },
          {
            name: 'scope',
            in: 'query',
            required: false,
            schema: { type: 'string', enum: ['own', 'all'], default: 'own' },
          },
        ],
        responses: {
          '200': { description: 'One page of tokens.', content: json(ref('TokenList')) },
          ...errors,
        },
      },
      post: {
        operationId: 'issueToken',
        summary: 'Issue a join token for a flavor',
        description:
          'Creates a FlavoredToken and its bootstrap token Secret and returns the join material. With an ' +
          'Idempotency-Key, a retry with the same key and body (same caller, on any replica, within the ' +
          'idempotency TTL) returns the same token instead of a second one. With `attestation` the token is ' +
          'bound to one machine’s TPM (attested join): no Secret is made and the answer holds no secret ' +
          '(`attested` true, `bootstrapToken` and `flavorToken` null); the machine earns both through ' +
          '/v1/attestations/{tokenId}/challenge and /answer, which the material’s `attestScript` calls.',
        parameters: [
          {
            name: 'Idempotency-Key',
            in: 'header',
            required: false,
            description: '1 to 255 visible ASCII characters, unique per intended issuance.',
            schema: { type: 'string', minLength: 1, maxLength: 255 },
          },
        ],
        requestBody: { required: true, content: json(ref('IssueRequest')) },
        responses: {
          '201': {
            description:
              'Issued. Holds secrets unless `attested`: store and forward it with care (Cache-Control: no-store).',
            headers: { Location: { schema: { type: 'string' }, description: '/v1/tokens/{id}' } },
            content: json(ref('IssuedToken')),
          },
          ...errors,
          '404': errorResponse('The FlavorClass does not exist.'),
          '409': errorResponse(
            'The Idempotency-Key was used with a different body, or first used longer ago than the idempotency ' +
              'TTL, or its token was revoked or is being deleted (never answered again); or the token was revoked ' +
              'or deleted while it was being issued (nothing was issued).',
          ),
          '413': errorResponse('The body is larger than the limit (16 KiB by default).'),
          '415': errorResponse('The body is not application/json.'),
        },
      },
    },
    '/v1/tokens/{id}': {
      get: {
        operationId: 'getToken',
        summary: 'Status of a token the caller issued (no secrets), or a stream of it (watch=true)',
        description:
          'With watch=true the answer is `text/event-stream`: an `event: token` with the status at once and ' +
          'after every change, a comment line every 15 s, and at the end `event: timeout` (after ' +
          'timeoutSeconds: reconnect to go on waiting) or `event: deleted`. A portal waits for `phase` ' +
          '`Verified` (or `Failed`, with `reason`) this way without polling. EventSource cannot send a bearer ' +
          'token: read the stream with fetch(). Open watches are limited per caller and per replica (429).',
        parameters: [
          tokenRef,
          {
            name: 'watch',
            in: 'query',
            required: false,
            schema: { type: 'string', enum: ['true', 'false'] },
          },
          {
            name: 'timeoutSeconds',
            in: 'query',
            required: false,
            description: `With watch=true: end the stream after this long (1 to ${MAX_WATCH_SECONDS}, default ${DEFAULT_WATCH_SECONDS}).`,
            schema: { type: 'integer', minimum: 1, maximum: MAX_WATCH_SECONDS },
          },
        ],
        responses: {
          '200': {
            description: 'The token’s status; with watch=true, a stream of it.',
            content: {
              ...json(ref('TokenStatus')),
              'text/event-stream': {
                schema: {
                  type: 'string',
                  description:
                    'Events `token` (data: TokenStatus), `deleted` (data: {id}) and `timeout` (data: {}).',
                },
              },
            },
          },
          ...errors,
          '404': notYours,
        },
      },
      delete: {
        operationId: 'revokeToken',
        summary: 'Revoke a token the caller issued',
        description:
          'Deletes the bootstrap token Secret at once (no node can join with it from now on) and marks the ' +
          'FlavoredToken revoked; the controller applies its revocationPolicy to nodes that joined with it.',
        parameters: [tokenRef],
        responses: {
          '200': { description: 'Revoked; the token’s status.', content: json(ref('TokenStatus')) },
          ...errors,
          '404': notYours,
        },
      },
    },
    '/v1/attestations/{tokenId}/challenge': {
      post: {
        operationId: 'challengeAttestation',
        summary: 'Attested join, step 1: a TPM credential for the machine’s attestation key',
        description:
          'Unauthenticated: a machine has nothing but its TPM (rate limited per client address). The EK must ' +
          'be the one the token is bound to and the AK a restricted signing key; the answer is a TPM2 ' +
          'credential (`tpm2_activatecredential -i`) only that TPM can recover, for that AK only, and a ' +
          'ticket to send back with the proof before `deadline`. Nothing is written. The answer has the same ' +
          'shape for every flavor and does not name it.',
        security: [],
        parameters: [attestedTokenRef],
        requestBody: { required: true, content: json(ref('AttestationChallengeRequest')) },
        responses: {
          '200': {
            description: 'The credential and the ticket (Cache-Control: no-store).',
            content: json(ref('AttestationChallenge')),
          },
          ...attestationErrors(
            'The body is invalid, a key is not a TPM2B_PUBLIC, or akPublic is not fit to be an attestation key.',
            'EKMismatch: this machine’s TPM is not the one the token is bound to (recorded on the token).',
            'The token was revoked or deleted, or used already and not re-joinable (allowRejoin).',
            'The token has expired.',
          ),
        },
      },
    },
    '/v1/attestations/{tokenId}/answer': {
      post: {
        operationId: 'answerAttestation',
        summary: 'Attested join, step 2: prove the credential, get the join secrets sealed',
        description:
          'Unauthenticated (rate limited per client address). `proof` is HMAC-SHA256 under the credential’s ' +
          'secret of "proof:" and the ticket. When it holds, the ticket is used (on the token, so neither it ' +
          'nor an earlier one earns anything again), a bootstrap token valid until `joinBy` is made, and the ' +
          'bootstrap token and flavor token are answered AES-256-CTR encrypted and HMAC-SHA256 authenticated ' +
          'under keys derived from that secret: the same lengths for every flavor.',
        security: [],
        parameters: [attestedTokenRef],
        requestBody: { required: true, content: json(ref('AttestationAnswerRequest')) },
        responses: {
          '200': {
            description: 'The sealed join secrets (Cache-Control: no-store).',
            content: json(ref('AttestationAnswer')),
          },
          ...attestationErrors(
            'The body is invalid, or the ticket is not one this issuer made.',
            'BadProof: the proof does not show the credential’s secret (recorded on the token).',
            'The token was revoked or deleted (also while it was being attested), or used already and not ' +
              're-joinable; or the ticket was answered already or a later one was (Replayed), or was made for ' +
              'an earlier token of this ID or under a key the issuer no longer holds (ask for a new challenge).',
            'The token has expired, or the answer came after the ticket’s deadline (LateAnswer).',
          ),
        },
      },
    },
    '/v1/discovery': {
      get: {
        operationId: 'getDiscovery',
        summary: 'The discovery kubeconfig nodes of this cluster need (no secret)',
        description:
          'With file discovery (the default) every issued JoinConfiguration reads the cluster CA and the API ' +
          'server from a kubeconfig at `kubeconfigPath` on the node. It is the same for every token and ' +
          'flavor of the cluster, so it can be installed once per machine image; every issuance answer ' +
          'carries it too (`discoveryKubeconfig`).',
        responses: {
          '200': {
            description: 'The discovery kubeconfig and where it goes.',
            content: json(ref('Discovery')),
          },
          ...errors,
        },
      },
    },
    '/v1/flavors': {
      get: {
        operationId: 'listFlavors',
        summary: 'The flavors the caller may use',
        responses: {
          '200': {
            description: 'FlavorClasses the caller may issue tokens for.',
            content: json({
              type: 'object',
              required: ['items'],
              properties: { items: { type: 'array', items: ref('Flavor') } },
            }),
          },
          ...errors,
        },
      },
    },
    '/healthz': {
      get: {
        operationId: 'healthz',
        summary: 'Liveness',
        security: [],
        responses: { '200': { description: 'The process serves requests.', content: json(ref('Health')) } },
      },
    },
    '/readyz': {
      get: {
        operationId: 'readyz',
        summary: 'Readiness: the HMAC key ring is loaded',
        security: [],
        responses: {
          '200': { description: 'Ready to issue.', content: json(ref('Health')) },
          '503': errorResponse(
            'Not ready: the HMAC key ring is not loaded yet, missing or unreadable (the message says which).',
          ),
        },
      },
    },
    '/openapi.json': {
      get: {
        operationId: 'openapi',
        summary: 'This document',
        security: [],
        responses: { '200': { description: 'The OpenAPI 3.1 document.', content: json({ type: 'object' }) } },
      },
    },
  },
  components: {
    securitySchemes: {
      bearer: {
        type: 'http',
        scheme: 'bearer',
        description:
          'A Kubernetes token issued for the issuer’s audience (`kubectl create token <sa> --audience ' +
          'nodeflavor-issuer` by default; a token for the API server’s own audience gets 401), checked ' +
          'with a TokenReview and authorised by RBAC verb `use` on flavorclasses.nodeflavor.io/<flavor>; ' +
          'or, if configured, a JWT from the configured issuer whose flavors claim lists the flavor.',
      },
    },
    schemas: {
      IssueRequest: requestBodySchema(IssueRequestSchema),
      IssuedToken: {
        type: 'object',
        description: 'Join material. Same keys and byte lengths for every flavor; the flavor is not named.',
        required: [
          'id',
          'tokenID',
          'expiresAt',
          'apiServerEndpoint',
          'caCertHash',
          'bootstrapToken',
          'flavorToken',
          'joinConfiguration',
          'joinCommand',
          'cloudInit',
          'discovery',
          'discoveryKubeconfig',
          'discoveryKubeconfigPath',
          'attested',
          'attestScript',
        ],
        properties: {
          id: { type: 'string', description: 'ft-<tokenID>: the handle for status and revocation.' },
          tokenID: { type: 'string', pattern: '^[a-z0-9]{6}$' },
          expiresAt: { type: 'string', format: 'date-time' },
          apiServerEndpoint: { type: 'string', description: 'host:port' },
          caCertHash: { type: 'string', pattern: '^sha256:[0-9a-f]{64}$' },
          bootstrapToken: {
            type: ['string', 'null'],
            pattern: '^[a-z0-9]{6}\\.[a-z0-9]{16}$',
            description: 'Secret. null for an attested token: its machine earns it by attestation.',
          },
          flavorToken: {
            type: ['string', 'null'],
            pattern: '^[a-z2-7]{52}$',
            description: 'Secret. null for an attested token: its machine earns it by attestation.',
          },
          joinConfiguration: {
            type: 'string',
            description:
              'kubeadm JoinConfiguration YAML (secret). For an attested token a template holding no secret: ' +
              'attestScript fills in the two tokens.',
          },
          joinCommand: {
            type: 'string',
            description:
              'Run with the JoinConfiguration saved as join.yaml (and, with file discovery, the discovery ' +
              'kubeconfig installed at discoveryKubeconfigPath). For an attested token: the attestation ' +
              'script, installed where cloudInit puts it.',
          },
          cloudInit: {
            type: 'string',
            description:
              '#cloud-config that writes the discovery kubeconfig (file discovery) and the configuration, and ' +
              'joins. For an attested token it writes the template and attestScript and runs the script.',
          },
          discovery: {
            type: 'string',
            enum: ['file', 'token'],
            description:
              '`file` (default): the JoinConfiguration reads the cluster CA and API server from ' +
              'discoveryKubeconfigPath; no signature in kube-public/cluster-info. `token`: CA hash pin and ' +
              'the JWS in cluster-info.',
          },
          discoveryKubeconfig: {
            type: 'string',
            description:
              'Kubeconfig with the cluster CA and API server only; no secret, the same for every token.',
          },
          discoveryKubeconfigPath: {
            type: 'string',
            description: 'Where the JoinConfiguration expects discoveryKubeconfig on the node.',
          },
          attested: {
            type: 'boolean',
            description: 'true when the token is bound to a TPM (the request’s `attestation`).',
          },
          attestScript: {
            type: ['string', 'null'],
            description:
              'Attested tokens: the bash script (tpm2-tools, openssl, curl) that proves the machine holds the ' +
              'TPM, fills the JoinConfiguration template and runs kubeadm join. No secret. null otherwise.',
          },
        },
      },
      AttestationChallengeRequest: requestBodySchema(ChallengeRequestSchema),
      AttestationChallenge: {
        type: 'object',
        required: ['ticket', 'credential', 'deadline', 'quote'],
        properties: {
          ticket: {
            type: 'string',
            maxLength: 1024,
            description: 'What the credential was made for; send it back unchanged with the proof.',
          },
          credential: {
            type: 'string',
            description:
              'The TPM2 credential in tpm2-tools’ file format (tpm2_activatecredential -i), base64.',
          },
          deadline: {
            type: 'string',
            format: 'date-time',
            description: 'An answer after this counts for nothing (410).',
          },
          quote: {
            type: ['object', 'null'],
            description:
              'When the token’s FlavorClass requires a measured boot state (measuredBoot): quote these PCRs ' +
              'with the AK over this nonce (tpm2_quote -l <pcrs> -q <nonce> -g sha256) and send the quote ' +
              'with the answer; otherwise null.',
            required: ['pcrs', 'nonce'],
            properties: {
              pcrs: { type: 'string', description: 'The selection, e.g. sha256:0,7.' },
              nonce: { type: 'string', pattern: '^[0-9a-f]{64}$', description: 'The qualifying data, hex.' },
            },
          },
        },
      },
      AttestationAnswerRequest: requestBodySchema(AnswerRequestSchema),
      AttestationAnswer: {
        type: 'object',
        description:
          'The bootstrap token and flavor token, "<bootstrap token>\\n<flavor token>\\n" (77 bytes), sealed ' +
          'under keys derived from the credential’s secret S: AES-256-CTR under the key and IV that ' +
          'PBKDF2-HMAC-SHA256 (1 iteration, the salt) derives from the hex of HMAC-SHA256(S, "encrypt") ' +
          '(what `openssl enc -d -aes-256-ctr -pbkdf2 -iter 1 -md sha256` does), then HMAC-SHA256 under ' +
          'HMAC-SHA256(S, "mac") of "<salt>:<ciphertext>".',
        required: ['salt', 'ciphertext', 'mac', 'joinBy'],
        properties: {
          salt: { type: 'string', pattern: '^[0-9a-f]{16}$', description: 'The 8-byte PBKDF2 salt, hex.' },
          ciphertext: { type: 'string', description: 'The encrypted join secrets, base64.' },
          mac: { type: 'string', pattern: '^[0-9a-f]{64}$', description: 'HMAC-SHA256, hex.' },
          joinBy: {
            type: 'string',
            format: 'date-time',
            description: 'When the bootstrap token stops working: kubeadm join must have run by then.',
          },
        },
      },
      Discovery: {
        type: 'object',
        required: ['discovery', 'apiServerEndpoint', 'caCertHash', 'kubeconfig', 'kubeconfigPath'],
        properties: {
          discovery: {
            type: 'string',
            enum: ['file', 'token'],
            description: 'How issued material discovers.',
          },
          apiServerEndpoint: { type: 'string', description: 'host:port' },
          caCertHash: { type: 'string', pattern: '^sha256:[0-9a-f]{64}$' },
          kubeconfig: {
            type: 'string',
            description: 'The discovery kubeconfig (cluster CA and API server).',
          },
          kubeconfigPath: { type: 'string', description: 'Where issued JoinConfigurations expect it.' },
        },
      },
      TokenStatus: {
        type: 'object',
        required: [
          'id',
          'tokenID',
          'flavor',
          'expiresAt',
          'maxUses',
          'uses',
          'revoked',
          'state',
          'phase',
          'reason',
          'nodes',
          'conditions',
          'attestation',
        ],
        properties: {
          id: { type: 'string' },
          tokenID: { type: ['string', 'null'] },
          flavor: { type: 'string' },
          expiresAt: { type: ['string', 'null'], format: 'date-time' },
          maxUses: { type: 'integer' },
          uses: { type: 'integer' },
          revoked: { type: 'boolean' },
          state: { type: 'string', enum: ['Active', 'Expired', 'Consumed', 'Revoked'] },
          nodeName: { type: ['string', 'null'] },
          nodeNamePattern: { type: ['string', 'null'] },
          description: { type: ['string', 'null'] },
          createdAt: { type: ['string', 'null'], format: 'date-time' },
          phase: {
            type: 'string',
            enum: [...TOKEN_PHASES],
            description:
              'Issued → Bound (a node’s CSR named the token) → Verified (its flavor token checked out); or ' +
              'Expired (unused in time), Revoked, or Failed (see reason).',
          },
          reason: {
            type: ['string', 'null'],
            enum: [...FAILURE_REASONS, null],
            description: 'For Failed: why, named as the Warning Event (see the operations guide).',
          },
          message: { type: ['string', 'null'] },
          phaseSince: { type: ['string', 'null'], format: 'date-time' },
          nodes: { type: 'array', items: ref('TokenNode') },
          conditions: {
            type: 'array',
            items: {
              type: 'object',
              required: ['type', 'status', 'reason', 'message', 'lastTransitionTime'],
              properties: {
                type: { type: 'string' },
                status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
                reason: { type: 'string' },
                message: { type: 'string' },
                lastTransitionTime: { type: 'string', format: 'date-time' },
              },
            },
          },
          attestation: {
            anyOf: [ref('TokenAttestation'), { type: 'null' }],
            description:
              'For a token bound to a TPM: its attestations so far and the last refusal; else null.',
          },
        },
      },
      TokenAttestation: {
        type: 'object',
        required: ['ekCertificateIssuer', 'allowRejoin', 'attestations', 'attestedAt', 'lastRefusal'],
        properties: {
          ekCertificateIssuer: {
            type: ['string', 'null'],
            description:
              'The manufacturer CA that vouched for the EK, when the token was bound by certificate.',
          },
          allowRejoin: { type: 'boolean' },
          attestations: { type: 'integer', description: 'How many times its machine proved itself.' },
          attestedAt: { type: ['string', 'null'], format: 'date-time' },
          lastRefusal: {
            description:
              'The last refusal worth a look (EKMismatch, BadProof, LateAnswer, Replayed), as the Warning ' +
              'Event AttestationRefused names it; null if none.',
            anyOf: [
              {
                type: 'object',
                required: ['reason', 'message', 'at'],
                properties: {
                  reason: { type: 'string' },
                  message: { type: 'string' },
                  at: { type: 'string', format: 'date-time' },
                },
              },
              { type: 'null' },
            ],
          },
        },
      },
      TokenList: {
        type: 'object',
        required: ['items', 'continue'],
        properties: {
          items: { type: 'array', items: ref('TokenStatus') },
          continue: {
            type: ['string', 'null'],
            description: 'Pass as `continue` for the next page; null on the last.',
          },
        },
      },
      TokenNode: {
        type: 'object',
        description: 'A node that used the token (boundAt set) or whose request was refused (boundAt null).',
        required: ['nodeName', 'csrName', 'boundAt', 'verifiedAt', 'reason', 'message'],
        properties: {
          nodeName: { type: 'string' },
          csrName: { type: 'string' },
          boundAt: { type: ['string', 'null'], format: 'date-time' },
          verifiedAt: { type: ['string', 'null'], format: 'date-time' },
          reason: { type: ['string', 'null'], enum: [...FAILURE_REASONS, null] },
          message: { type: ['string', 'null'] },
        },
      },
      Flavor: {
        type: 'object',
        required: ['name'],
        properties: { name: { type: 'string' }, description: { type: ['string', 'null'] } },
      },
      Health: { type: 'object', required: ['status'], properties: { status: { type: 'string' } } },
      Error: {
        type: 'object',
        required: ['error'],
        properties: {
          error: {
            type: 'object',
            required: ['code', 'message'],
            properties: {
              code: { type: 'string', enum: Object.keys(ERROR_STATUS) },
              message: { type: 'string' },
              fields: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['field', 'message'],
                  properties: { field: { type: 'string' }, message: { type: 'string' } },
                },
              },
            },
          },
        },
      },
    },
  },
} as const;
