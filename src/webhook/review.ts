// AdmissionReview in, AdmissionReview out, pure (pepr's karForValidate shape): the webhook server
// only moves bytes and counts. A review we cannot read but can answer (it has a uid) is refused,
// because an unreadable write could be a flavor change; one without a uid cannot be answered at
// all, and the server replies HTTP 400. Error texts name fields, never the values in them: the
// object may carry the token label's secret value.
import { z } from 'zod';
import {
  type AdmissionPolicy,
  decideNodeAdmission,
  malformed,
  type NodeAdmissionDecision,
  type NodeAdmissionRequest,
  type NodeTaint,
  type NodeView,
} from '../flavor/admission.ts';

const ADMISSION_API_VERSION = 'admission.k8s.io/v1';
const MAX_ERROR_LENGTH = 1000;

const groupVersionKindSchema = z.looseObject({
  group: z.string().default(''),
  version: z.string(),
  kind: z.string(),
});

const groupVersionResourceSchema = z.looseObject({
  group: z.string().default(''),
  version: z.string(),
  resource: z.string(),
});

const admissionRequestSchema = z.looseObject({
  uid: z.string().min(1),
  kind: groupVersionKindSchema,
  resource: groupVersionResourceSchema,
  subResource: z.string().optional(),
  name: z.string().default(''),
  operation: z.enum(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']),
  userInfo: z.looseObject({
    username: z.string().default(''),
    groups: z.array(z.string()).default([]),
  }),
  object: z.unknown().optional(),
  oldObject: z.unknown().optional(),
});

const admissionReviewSchema = z.looseObject({
  apiVersion: z.literal(ADMISSION_API_VERSION),
  kind: z.literal('AdmissionReview'),
  request: admissionRequestSchema,
});

type AdmissionReview = z.infer<typeof admissionReviewSchema>;
type AdmissionReviewRequest = AdmissionReview['request'];

type ParseResult =
  | { ok: true; review: AdmissionReview }
  /** `uid` is set when the body, though invalid, still says which request it is. */
  | { ok: false; error: string; uid?: string };

export function parseAdmissionReview(body: unknown): ParseResult {
  const parsed = admissionReviewSchema.safeParse(body);
  if (parsed.success) return { ok: true, review: parsed.data };
  const error = parsed.error.issues
    .map((issue) => `${issue.path.length === 0 ? '(body)' : issue.path.join('.')}: ${issue.message}`)
    .join('; ')
    .slice(0, MAX_ERROR_LENGTH);
  const uid = requestUid(body);
  return uid === undefined ? { ok: false, error } : { ok: false, error, uid };
}

function requestUid(body: unknown): string | undefined {
  const request = isRecord(body) ? body['request'] : undefined;
  const uid = isRecord(request) ? request['uid'] : undefined;
  return typeof uid === 'string' && uid.length > 0 ? uid : undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The Node fields the guard reads; anything missing or of the wrong shape reads as empty. */
export function nodeViewFrom(object: unknown): NodeView {
  const metadata = isRecord(object) ? object['metadata'] : undefined;
  const spec = isRecord(object) ? object['spec'] : undefined;
  return {
    labels: stringMap(isRecord(metadata) ? metadata['labels'] : undefined),
    annotations: stringMap(isRecord(metadata) ? metadata['annotations'] : undefined),
    taints: taintList(isRecord(spec) ? spec['taints'] : undefined),
  };
}

function stringMap(value: unknown): Record<string, string> {
  if (!isRecord(value)) return {};
  // fromEntries defines own properties, so even a "__proto__" key survives as data.
  return Object.fromEntries(
    Object.entries(value).filter((entry): entry is [string, string] => typeof entry[1] === 'string'),
  );
}

function taintList(value: unknown): NodeTaint[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((t: unknown): NodeTaint[] => {
    if (!isRecord(t) || typeof t['key'] !== 'string') return [];
    const effect = typeof t['effect'] === 'string' ? t['effect'] : '';
    return typeof t['value'] === 'string'
      ? [{ key: t['key'], value: t['value'], effect }]
      : [{ key: t['key'], effect }];
  });
}

function metadataName(object: unknown): string {
  const metadata = isRecord(object) ? object['metadata'] : undefined;
  const name = isRecord(metadata) ? metadata['name'] : undefined;
  return typeof name === 'string' ? name : '';
}

/** The guard's view of a parsed request. A missing or non-object object stays undefined (fail closed). */
export function nodeAdmissionRequestFrom(request: AdmissionReviewRequest): NodeAdmissionRequest {
  const { object, oldObject } = request;
  const result: NodeAdmissionRequest = {
    operation: request.operation,
    subresource: request.subResource ?? '',
    username: request.userInfo.username,
    groups: request.userInfo.groups,
    // The API server fills `name` for Nodes; the object's own name is a fallback for hand-made reviews.
    nodeName: request.name || metadataName(object) || metadataName(oldObject),
  };
  if (isRecord(object)) result.newNode = nodeViewFrom(object);
  if (isRecord(oldObject)) result.oldNode = nodeViewFrom(oldObject);
  return result;
}

interface AdmissionReviewResponse {
  apiVersion: typeof ADMISSION_API_VERSION;
  kind: 'AdmissionReview';
  response: {
    uid: string;
    allowed: boolean;
    status?: { code: 403; reason: 'Forbidden'; message: string };
  };
}

export function admissionResponse(uid: string, decision: NodeAdmissionDecision): AdmissionReviewResponse {
  const response: AdmissionReviewResponse['response'] = decision.allowed
    ? { uid, allowed: true }
    : { uid, allowed: false, status: { code: 403, reason: 'Forbidden', message: decision.message } };
  return { apiVersion: ADMISSION_API_VERSION, kind: 'AdmissionReview', response };
}

type ReviewOutcome =
  | { httpStatus: 200; body: AdmissionReviewResponse; decision: NodeAdmissionDecision }
  | { httpStatus: 400; error: string };

/** The whole webhook, minus HTTP: any JSON body in, the reply out. Never throws. */
export function reviewNodeAdmission(body: unknown, policy: AdmissionPolicy): ReviewOutcome {
  const parsed = parseAdmissionReview(body);
  if (!parsed.ok) {
    if (parsed.uid === undefined)
      return { httpStatus: 400, error: `malformed AdmissionReview: ${parsed.error}` };
    return answer(parsed.uid, malformed(`malformed AdmissionReview: ${parsed.error}`));
  }
  const { request } = parsed.review;
  const { group, resource } = request.resource;
  if (group !== '' || resource !== 'nodes') {
    // Only a wrong registration sends us anything else; refuse loudly rather than guess.
    return answer(
      request.uid,
      malformed(
        `the nodeflavor webhook judges only core nodes, got "${`${group}/${resource}`.slice(0, 100)}": check the ValidatingWebhookConfiguration rules`,
      ),
    );
  }
  return answer(request.uid, decideNodeAdmission(nodeAdmissionRequestFrom(request), policy));
}

function answer(uid: string, decision: NodeAdmissionDecision): ReviewOutcome {
  return { httpStatus: 200, body: admissionResponse(uid, decision), decision };
}
