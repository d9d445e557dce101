// The self-service page's script (with the pure formats.js it imports). Security rules it keeps
// (docs/portal.md):
// - the bearer token lives in the `session` variable only: never in localStorage, sessionStorage,
//   a cookie or a URL; signing out (or closing the tab) forgets it;
// - every request carries it in the Authorization header, so the browser never attaches a
//   credential by itself and a page on another site cannot make a request in the user's name;
// - the join material is put in a read-only text field (never parsed as HTML), shown once, and
//   removed from the page on request, on sign-out, and when the next token is requested;
// - nothing is built from strings into HTML: every answer is untrusted text;
// - every token request carries an Idempotency-Key, one per intent (see `intent`): a retry of
//   the same request (a second click after an error, a lost answer) gets the token the first
//   attempt may already have made, never a second live one.
// - a token bound to a TPM (ADR 0014) is answered with material holding no secret; the page says
//   so and shows that material the same way (once, removable): it offers no way to keep it either.
// Which formats of the material it offers, the text that goes with each, and which field a pasted
// EK PEM is: formats.js.

import { ekBinding, FORMATS, materialFormats, PLAIN_LABELS, PLAIN_NOTICE } from './formats.js';

/** @type {{ bearer: string } | null} */
let session = null;
/**
 * The material shown (every format of it), kept only while it is on the page.
 * @type {{ id: string, joinConfiguration: string, cloudInit: string, joinCommand: string, discovery: string,
 *   discoveryKubeconfig: string, discoveryKubeconfigPath: string, attested: boolean,
 *   attestScript: string | null } | null}
 */
let material = null;
/**
 * Whether the material shown last was bound to a TPM: when the kind changes (or for attested
 * material, whose cloud-init comes first) the page shows the first format offered, else it keeps
 * the format the user chose for earlier material.
 */
let shownAttested = false;
/** The watch in progress (aborted on sign-out or a new request). */
let watching = null;
/**
 * The token request the user is trying to make and its Idempotency-Key, until it is answered.
 * Submitting the same request again reuses the key (the issuer then answers the token it made,
 * if it made one); an answer, a different request, a 409 (the key cannot be used again) or
 * signing out ends the intent, and the next submission gets a new key.
 * @type {{ key: string, body: string } | null}
 */
let intent = null;

const $ = (id) => {
  const element = document.getElementById(id);
  if (!element) throw new Error(`missing #${id}`);
  return element;
};

class ApiError extends Error {
  /** @param {{ field: string, message: string }[]} fields the 400 answer's field errors */
  constructor(status, message, fields = []) {
    super(message);
    this.status = status;
    this.fields = fields;
  }
}

async function api(method, path, body, extraHeaders = {}) {
  if (!session) throw new ApiError(401, 'not signed in');
  const headers = { ...extraHeaders, Authorization: `Bearer ${session.bearer}`, Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
    credentials: 'omit',
    redirect: 'error',
  });
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!response.ok) {
    const message = parsed?.error?.message ?? `the issuer answered ${response.status}`;
    const fields = Array.isArray(parsed?.error?.fields)
      ? parsed.error.fields.filter((f) => typeof f?.field === 'string' && typeof f?.message === 'string')
      : [];
    throw new ApiError(response.status, message, fields);
  }
  return parsed;
}

function show(id, visible) {
  $(id).hidden = !visible;
}

function say(id, text) {
  const element = $(id);
  element.textContent = text;
  element.hidden = text === '';
}

function busy(button, on) {
  button.disabled = on;
  button.setAttribute('aria-busy', on ? 'true' : 'false');
}

// ---- sign in / out -----------------------------------------------------------------------------

async function signIn(event) {
  event.preventDefault();
  const input = $('bearer');
  const bearer = input.value.trim();
  say('signin-error', '');
  if (bearer === '') {
    say('signin-error', 'Paste your token first.');
    input.focus();
    return;
  }
  session = { bearer };
  // The field is emptied at once: the token lives in `session` only.
  input.value = '';
  busy($('signin-button'), true);
  try {
    const flavors = await api('GET', '/v1/flavors');
    renderFlavors(flavors.items);
    show('signin-section', false);
    show('request-section', true);
    show('tokens-section', true);
    $('request-heading').focus();
    void refreshTokens();
  } catch (error) {
    session = null;
    say(
      'signin-error',
      error.status === 401
        ? 'That token was not accepted (invalid, expired or for another audience).'
        : error.message,
    );
    input.focus();
  } finally {
    busy($('signin-button'), false);
  }
}

function signOut() {
  session = null;
  intent = null;
  stopWatching();
  forgetMaterial();
  clearFieldErrors();
  $('flavors').replaceChildren();
  $('tokens').replaceChildren();
  for (const id of ['request-section', 'material-section', 'status-section', 'tokens-section'])
    show(id, false);
  show('signin-section', true);
  $('bearer').focus();
}

// ---- flavors and the request -------------------------------------------------------------------

function renderFlavors(items) {
  const list = $('flavors');
  list.replaceChildren();
  items.forEach((flavor, index) => {
    const label = document.createElement('label');
    const radio = document.createElement('input');
    radio.type = 'radio';
    radio.name = 'flavor';
    radio.value = flavor.name;
    radio.checked = index === 0;
    label.append(radio, ` ${flavor.name}`);
    if (flavor.description) {
      const note = document.createElement('span');
      note.className = 'hint';
      note.textContent = ` — ${flavor.description}`;
      label.append(note);
    }
    list.append(label);
  });
  show('no-flavors', items.length === 0);
  $('request-button').disabled = items.length === 0;
}

function selected(name) {
  return document.querySelector(`input[name="${name}"]:checked`)?.value;
}

function nodeModeChanged() {
  const mode = selected('node-mode');
  const input = $('node');
  input.disabled = mode === 'any';
  $('node-label').textContent = mode === 'pattern' ? 'Node name pattern' : 'Node name';
}

function requestBody() {
  const body = { flavorClassName: selected('flavor') ?? '', maxUses: 1 };
  const ttl = $('ttl').value.trim();
  if (ttl !== '') body.ttl = ttl;
  const node = $('node').value.trim();
  const mode = selected('node-mode');
  if (mode === 'name' && node !== '') body.nodeName = node;
  if (mode === 'pattern' && node !== '') body.nodeNamePattern = node;
  const description = $('description').value.trim();
  if (description !== '') body.description = description;
  const ek = ekBinding($('ek').value);
  if (ek && 'field' in ek) {
    body.attestation = { [ek.field]: ek.pem };
    if ($('allow-rejoin').checked) body.attestation.allowRejoin = true;
  }
  return body;
}

// ---- field errors ------------------------------------------------------------------------------

/**
 * Where a field error of a token request is shown (next to the input it is about), and the
 * field's name in the sentence: the API's `fields` name JSON paths ("nodeName is required ...").
 */
const FIELD_ERRORS = [
  { field: 'nodeName', input: 'node', error: 'node-error', name: 'Node name' },
  { field: 'nodeNamePattern', input: 'node', error: 'node-error', name: 'Node name pattern' },
  { field: 'ttl', input: 'ttl', error: 'ttl-error', name: 'Validity' },
  { field: 'expiresAt', input: 'ttl', error: 'ttl-error', name: 'Expiry' },
  { field: 'attestation.ekCertificate', input: 'ek', error: 'ek-error', name: 'The EK certificate' },
  { field: 'attestation.ekPublicKey', input: 'ek', error: 'ek-error', name: 'The EK public key' },
  { field: 'attestation.allowRejoin', input: 'ek', error: 'ek-error', name: 'Allow re-join' },
  { field: 'attestation', input: 'ek', error: 'ek-error', name: 'Binding to a TPM' },
];

function clearFieldErrors() {
  for (const { input, error } of FIELD_ERRORS) {
    say(error, '');
    $(input).setAttribute('aria-invalid', 'false');
  }
}

/** Shows each error next to its input (the first one focused); returns whether any had a place. */
function showFieldErrors(fields) {
  /** @type {Map<string, { input: string, texts: string[] }>} */
  const shown = new Map();
  for (const { field, message } of fields) {
    const place = FIELD_ERRORS.find((p) => p.field === field);
    if (!place) continue;
    const entry = shown.get(place.error) ?? { input: place.input, texts: [] };
    entry.texts.push(`${place.name} ${message}`);
    shown.set(place.error, entry);
  }
  for (const [error, { input, texts }] of shown) {
    say(error, texts.join(' '));
    $(input).setAttribute('aria-invalid', 'true');
  }
  const first = shown.values().next().value;
  if (first) $(first.input).focus();
  return shown.size > 0;
}

/** What the page tells about the EK pasted so far: which kind it is, or why it is neither. */
function ekChanged() {
  const ek = ekBinding($('ek').value);
  $('ek').setAttribute('aria-invalid', ek && 'problem' in ek ? 'true' : 'false');
  say('ek-error', ek && 'problem' in ek ? `The pasted EK ${ek.problem}` : '');
  say(
    'ek-kind',
    ek === null || 'problem' in ek
      ? ''
      : ek.field === 'ekCertificate'
        ? 'An EK certificate: the issuer checks that a TPM manufacturer it knows signed it.'
        : 'An EK public key: bound on your word (an EK certificate would have the manufacturer vouch for it).',
  );
}

async function requestToken(event) {
  event.preventDefault();
  say('request-error', '');
  clearFieldErrors();
  const mode = selected('node-mode');
  if (mode !== 'any' && $('node').value.trim() === '') {
    say('request-error', mode === 'pattern' ? 'Enter a node name pattern.' : 'Enter the node name.');
    $('node').focus();
    return;
  }
  const ek = ekBinding($('ek').value);
  const ekProblem =
    ek && 'problem' in ek
      ? `The pasted EK ${ek.problem}`
      : ek === null && $('allow-rejoin').checked
        ? "Allow re-join applies to a token bound to a TPM: paste the machine's EK, or clear the box."
        : '';
  if (ekProblem !== '') {
    say('request-error', ekProblem);
    say('ek-error', ekProblem);
    $('ek').setAttribute('aria-invalid', 'true');
    $('ek').focus();
    return;
  }
  stopWatching();
  forgetMaterial();
  const body = requestBody();
  const text = JSON.stringify(body);
  if (intent?.body !== text) intent = { key: crypto.randomUUID(), body: text };
  const current = intent;
  const button = $('request-button');
  busy(button, true);
  try {
    const issued = await api('POST', '/v1/tokens', body, { 'Idempotency-Key': current.key });
    if (intent === current) intent = null;
    material = {
      id: issued.id,
      joinConfiguration: issued.joinConfiguration,
      cloudInit: issued.cloudInit,
      joinCommand: issued.joinCommand,
      discovery: issued.discovery,
      discoveryKubeconfig: issued.discoveryKubeconfig,
      discoveryKubeconfigPath: issued.discoveryKubeconfigPath,
      attested: issued.attested === true,
      attestScript: typeof issued.attestScript === 'string' ? issued.attestScript : null,
    };
    // Attested material opens on its cloud-init; a change of kind opens on the first format.
    if (material.attested || shownAttested) pickFormat(materialFormats(material).formats[0]);
    shownAttested = material.attested;
    renderMaterial();
    show('material-section', true);
    $('material-heading').focus();
    startWatching(issued.id);
    void refreshTokens();
  } catch (error) {
    // 409: this key is spent (used for another body, too old, or its token revoked); anything else
    // may be retried as it is, with the same key.
    if (error.status === 409 && intent === current) intent = null;
    say('request-error', error.message);
    // A 400 names its fields: each is shown next to its input too.
    if (error.status === 400 && Array.isArray(error.fields)) showFieldErrors(error.fields);
  } finally {
    busy(button, false);
  }
}

// ---- the join material -------------------------------------------------------------------------

/**
 * Shows only the given formats' choices, in the given order and under the given names: one not
 * offered is hidden and disabled (out of the tab order).
 */
function offerFormats(formats, labels) {
  const choices = $('format-choices');
  for (const format of [...formats, ...FORMATS.filter((f) => !formats.includes(f))]) {
    const radio = document.querySelector(`input[name="format"][value="${format}"]`);
    const offered = formats.includes(format);
    radio.disabled = !offered;
    const label = radio.closest('label');
    label.hidden = !offered;
    $(`format-name-${format}`).textContent = labels[format] ?? PLAIN_LABELS[format];
    // Moved to the end in turn: the choices end up in this order (and so does the tab order).
    choices.append(label);
  }
}

function pickFormat(format) {
  for (const radio of document.querySelectorAll('input[name="format"]'))
    radio.checked = radio.value === format;
}

/** What the page says above the material: hand it over like a password, or: it holds no secret. */
function renderNotice(text, attested) {
  const notice = $('material-notice');
  notice.textContent = text;
  notice.classList.toggle('warning', !attested);
  notice.classList.toggle('no-secret', attested);
}

function renderMaterial() {
  if (!material) return;
  const { formats, usage, labels, notice, attested } = materialFormats(material);
  offerFormats(formats, labels);
  renderNotice(notice, attested);
  let format = selected('format');
  if (!formats.includes(format)) {
    // The choice left over from earlier material is not offered now (token discovery).
    format = formats[0];
    pickFormat(format);
  }
  $('material').value = material[format];
  $('material-usage').textContent = usage[format];
  // A "Copied." from before refers to what was shown before.
  say('copy-status', '');
}

async function copyMaterial() {
  if (!material) return;
  const text = $('material').value;
  try {
    await navigator.clipboard.writeText(text);
    say('copy-status', 'Copied.');
  } catch {
    // No clipboard permission (an older browser, a locked-down profile): select it for Ctrl+C.
    $('material').focus();
    $('material').select();
    say('copy-status', 'Selected: press Ctrl+C (or ⌘C) to copy.');
  }
}

function forgetMaterial() {
  material = null;
  $('material').value = '';
  $('material-usage').textContent = '';
  offerFormats(['joinConfiguration', 'cloudInit'], PLAIN_LABELS);
  renderNotice(PLAIN_NOTICE, false);
  say('copy-status', '');
  show('material-section', false);
}

// ---- watching the token ------------------------------------------------------------------------

const FINAL = new Set(['Verified', 'Failed', 'Expired', 'Revoked']);
const ORDER = ['Issued', 'Bound', 'Verified'];

function renderPhase(view) {
  $('token-id').textContent = view.id;
  const node = view.nodes.find((n) => n.boundAt !== null) ?? view.nodes[0];
  const bound = view.nodes.some((n) => n.boundAt !== null);
  const bad = ['Failed', 'Expired', 'Revoked'].includes(view.phase);
  // How far it got: a failed or expired token stops at the step after the last one it reached.
  const reached = bad ? (bound ? 1 : 0) : ORDER.indexOf(view.phase);
  for (const step of $('steps').children) {
    const index = ORDER.indexOf(step.dataset.phase);
    step.classList.toggle('done', index <= reached);
    step.classList.toggle('failed', bad && index === reached + 1);
  }
  const phase = $('phase');
  phase.classList.toggle('ok', view.phase === 'Verified');
  phase.classList.toggle('bad', bad);
  const texts = {
    Issued: view.attestation
      ? 'Issued: waiting for the machine with its TPM to prove itself and join.'
      : 'Issued: waiting for a node to join with it.',
    Bound: `Bound: node ${node?.nodeName ?? ''} joined; verifying its flavor token.`,
    Verified: `Verified: node ${node?.nodeName ?? ''} is verified and ready for workloads.`,
    Failed: `Failed: ${view.reason ?? 'unknown reason'}.`,
    Expired: 'Expired: no node joined before the token expired. Request a new one.',
    Revoked: 'Revoked: this token can no longer be used.',
  };
  phase.textContent = texts[view.phase] ?? view.phase;
  $('phase-detail').textContent =
    view.phase === 'Failed'
      ? `${view.message ?? ''} (see the operations guide for ${view.reason}; your cluster operator can run kubectl flavor explain ${node?.nodeName || view.id})`
      : view.phaseSince
        ? `Since ${new Date(view.phaseSince).toLocaleString()}.`
        : '';
  renderAttestation(view.attestation ?? null);
}

/** For a token bound to a TPM: how often its machine proved itself, and the last refusal. */
function renderAttestation(attestation) {
  if (!attestation) {
    say('attestation-facts', '');
    say('attestation-refusal', '');
    return;
  }
  const count = attestation.attestations;
  const by = attestation.ekCertificateIssuer
    ? `its EK certificate, from ${attestation.ekCertificateIssuer}`
    : 'its EK public key';
  say(
    'attestation-facts',
    `Tied to one machine's TPM (${by}${attestation.allowRejoin ? '; re-join allowed' : ''}): ` +
      `attested ${count} ${count === 1 ? 'time' : 'times'}` +
      (attestation.attestedAt ? `, last at ${new Date(attestation.attestedAt).toLocaleString()}.` : '.'),
  );
  const refusal = attestation.lastRefusal;
  const text = refusal
    ? `Last refusal: ${refusal.reason}: ${refusal.message} (${new Date(refusal.at).toLocaleString()}).` +
      (refusal.reason === 'EKMismatch' ? ' The material was tried on a machine with another TPM.' : '')
    : '';
  // The same refusal again (every status event carries it) is not announced again.
  if ($('attestation-refusal').textContent !== text) say('attestation-refusal', text);
}

function stopWatching() {
  watching?.abort();
  watching = null;
}

/** Follows the token's event stream (fetch, so the bearer goes in a header), reconnecting until a final phase. */
function startWatching(id) {
  const controller = new AbortController();
  watching = controller;
  show('status-section', true);
  $('token-id').textContent = id;
  renderAttestation(null);
  void (async () => {
    let failures = 0;
    while (!controller.signal.aborted && session) {
      try {
        const done = await followOnce(id, controller.signal);
        failures = 0;
        if (done) return;
      } catch (error) {
        if (controller.signal.aborted) return;
        failures += 1;
        $('phase-detail').textContent = `Lost the connection to the issuer (${error.message}); retrying.`;
        await new Promise((resolve) => setTimeout(resolve, Math.min(30_000, 1000 * 2 ** failures)));
      }
    }
  })();
}

async function followOnce(id, signal) {
  const response = await fetch(`/v1/tokens/${encodeURIComponent(id)}?watch=true&timeoutSeconds=300`, {
    headers: { Authorization: `Bearer ${session?.bearer ?? ''}`, Accept: 'text/event-stream' },
    cache: 'no-store',
    credentials: 'omit',
    redirect: 'error',
    signal,
  });
  if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buffer += decoder.decode(value, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf('\n\n');
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (event === 'token' && data) {
        const view = JSON.parse(data);
        renderPhase(view);
        if (FINAL.has(view.phase)) {
          await reader.cancel();
          void refreshTokens();
          return true;
        }
      } else if (event === 'deleted') {
        $('phase').textContent = 'The token was deleted.';
        return true;
      }
    }
  }
}

// ---- the caller's tokens -----------------------------------------------------------------------

async function refreshTokens() {
  if (!session) return;
  try {
    const page = await api('GET', '/v1/tokens?limit=20');
    const rows = page.items.map((token) => {
      const row = document.createElement('tr');
      const node = token.nodes.find((n) => n.boundAt !== null) ?? token.nodes[0];
      const cells = [
        token.id,
        token.flavor,
        token.phase === 'Failed' ? `Failed (${token.reason})` : token.phase,
        node?.nodeName ?? token.nodeName ?? token.nodeNamePattern ?? '—',
        token.expiresAt ? new Date(token.expiresAt).toLocaleString() : '—',
      ];
      for (const text of cells) {
        const cell = document.createElement('td');
        cell.textContent = text;
        row.append(cell);
      }
      return row;
    });
    $('tokens').replaceChildren(...rows);
    show('tokens-empty', rows.length === 0);
  } catch (error) {
    if (error.status === 401) signOut();
  }
}

// ---- wiring ------------------------------------------------------------------------------------

document.addEventListener('DOMContentLoaded', () => {
  $('signin-form').addEventListener('submit', signIn);
  $('request-form').addEventListener('submit', requestToken);
  $('signout-button').addEventListener('click', signOut);
  $('copy-button').addEventListener('click', () => void copyMaterial());
  $('forget-button').addEventListener('click', forgetMaterial);
  $('refresh-button').addEventListener('click', () => void refreshTokens());
  for (const radio of document.querySelectorAll('input[name="node-mode"]'))
    radio.addEventListener('change', nodeModeChanged);
  for (const radio of document.querySelectorAll('input[name="format"]'))
    radio.addEventListener('change', renderMaterial);
  $('ek').addEventListener('input', ekChanged);
  nodeModeChanged();
  // A page restored from the back/forward cache must not show what the user left behind.
  window.addEventListener('pagehide', () => {
    session = null;
    intent = null;
    forgetMaterial();
  });
});
