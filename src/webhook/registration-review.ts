// The mutating half of the guard, AdmissionReview in and out (ADR 0012): a kubelet registering a
// Node whose name was claimed through nodeflavor (or that presents a flavor token) gets the
// quarantine taint and the joined mark added, whatever its JoinConfiguration said, so the Node's
// very first version is unschedulable for workloads that do not tolerate the quarantine. Whether
// the name is claimed is read from the API server for each such registration, never from a
// cache: the claim is written before the CSR is approved, so it exists before any kubelet can
// hold a certificate for the name. A claim that cannot be read refuses the registration (the
// kubelet retries): unknown means quarantined, never trusted.
import { isKubelet } from '../flavor/admission.ts';
import { joinedThroughNodeflavor, registrationPatch } from '../flavor/registration-quarantine.ts';
import { nodeViewFrom, parseAdmissionReview } from './review.ts';

const ADMISSION_API_VERSION = 'admission.k8s.io/v1';

export type RegistrationResult =
  /** The Node came through nodeflavor: quarantine and mark added (or already there). */
  | 'Quarantined'
  /** Nothing to add: not a kubelet's registration, or not a node of ours. */
  | 'NotJoined'
  /** The claim could not be read: refused, the kubelet retries. */
  | 'ClaimUnreadable'
  | 'MalformedRequest';

interface RegistrationResponse {
  apiVersion: typeof ADMISSION_API_VERSION;
  kind: 'AdmissionReview';
  response: {
    uid: string;
    allowed: boolean;
    patchType?: 'JSONPatch';
    patch?: string;
    status?: { code: number; reason: string; message: string };
  };
}

export type RegistrationOutcome =
  | { httpStatus: 200; body: RegistrationResponse; result: RegistrationResult }
  | { httpStatus: 400; error: string };

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The whole mutating webhook, minus HTTP: any JSON body in, the reply out. Never throws. */
export async function reviewNodeRegistration(
  body: unknown,
  nameClaimed: (nodeName: string) => Promise<boolean>,
): Promise<RegistrationOutcome> {
  const parsed = parseAdmissionReview(body);
  if (!parsed.ok) {
    if (parsed.uid === undefined)
      return { httpStatus: 400, error: `malformed AdmissionReview: ${parsed.error}` };
    return refuse(
      parsed.uid,
      400,
      'BadRequest',
      `malformed AdmissionReview: ${parsed.error}`,
      'MalformedRequest',
    );
  }
  const { request } = parsed.review;
  const allow = (result: RegistrationResult) => answer({ uid: request.uid, allowed: true }, result);
  const registering =
    request.resource.group === '' &&
    request.resource.resource === 'nodes' &&
    (request.subResource ?? '') === '' &&
    request.operation === 'CREATE' &&
    isKubelet(request.userInfo.username, request.userInfo.groups);
  // Only a kubelet's registration is ours to mark; the registration's rules send nothing else.
  if (!registering) return allow('NotJoined');
  const object = request.object;
  if (!isRecord(object))
    return refuse(request.uid, 400, 'BadRequest', 'the Node being registered is missing', 'MalformedRequest');
  const metadata = isRecord(object['metadata']) ? object['metadata'] : {};
  const spec = object['spec'];
  const nodeName = request.name || (typeof metadata['name'] === 'string' ? metadata['name'] : '');
  const node = nodeViewFrom(object);
  let claimed = false;
  try {
    claimed = nodeName !== '' && (await nameClaimed(nodeName));
  } catch (error) {
    return refuse(
      request.uid,
      503,
      'ServiceUnavailable',
      `nodeflavor could not check whether node name "${nodeName}" was claimed through nodeflavor (${(error as Error).message.slice(0, 200)}); the kubelet retries its registration`,
      'ClaimUnreadable',
    );
  }
  const patch = registrationPatch(
    node,
    {
      hasLabels: isRecord(metadata['labels']),
      hasSpec: isRecord(spec),
      hasTaints: isRecord(spec) && Array.isArray(spec['taints']),
    },
    claimed,
  );
  if (patch.length === 0) return allow(joinedThroughNodeflavor(node, claimed) ? 'Quarantined' : 'NotJoined');
  return answer(
    {
      uid: request.uid,
      allowed: true,
      patchType: 'JSONPatch',
      patch: Buffer.from(JSON.stringify(patch)).toString('base64'),
    },
    'Quarantined',
  );
}

function answer(response: RegistrationResponse['response'], result: RegistrationResult): RegistrationOutcome {
  return {
    httpStatus: 200,
    body: { apiVersion: ADMISSION_API_VERSION, kind: 'AdmissionReview', response },
    result,
  };
}

function refuse(
  uid: string,
  code: number,
  reason: string,
  message: string,
  result: RegistrationResult,
): RegistrationOutcome {
  return answer({ uid, allowed: false, status: { code, reason, message } }, result);
}
