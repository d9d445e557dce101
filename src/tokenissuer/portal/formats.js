// Which formats of an issuance answer the self-service page offers, and what it tells the node
// administrator to do with each; and which field of a TPM binding a pasted PEM is. Pure (no DOM,
// no fetch): portal.js renders what this decides, and test/unit/issuer-portal.test.ts checks the
// decision without a browser. Types: formats.d.ts.
//
// With file discovery (ADR 0007) the JoinConfiguration names a discovery kubeconfig that must be
// on the node before `kubeadm join` runs, so the page offers that file as a third format and the
// JoinConfiguration's instructions name where it goes. With token discovery the JoinConfiguration
// is all the node needs: the third format is not offered (the answer still carries the file, but
// nothing on the node reads it).
//
// A token bound to a TPM (ADR 0014, `attested: true`) is answered with material that holds no
// secret: its JoinConfiguration is a template with placeholders, which the attestation script
// (`attestScript`) fills in with the tokens the machine's TPM earns. Then the cloud-init (which
// installs both and runs the script) comes first, the script is offered as a format of its own,
// and the JoinConfiguration says it is a template, not usable alone.

/** Every format the page knows, in the page's order (the values of its `format` radios). */
export const FORMATS = ['joinConfiguration', 'cloudInit', 'discoveryKubeconfig', 'attestScript'];

/**
 * Where the attested cloud-init installs the JoinConfiguration template and where the script
 * reads it (src/tokenissuer/attestation/attest-script.ts JOIN_TEMPLATE_PATH; a unit test keeps them equal).
 */
export const JOIN_TEMPLATE_PATH = '/etc/kubernetes/nodeflavor-join.template.yaml';

/** The formats' names on the page for plain material (the text of index.html's format labels). */
export const PLAIN_LABELS = {
  joinConfiguration: 'kubeadm JoinConfiguration',
  cloudInit: 'cloud-init',
  discoveryKubeconfig: 'Discovery kubeconfig',
  attestScript: 'Attestation script',
};

/** What the page says above plain material (index.html's text, until an answer is shown). */
export const PLAIN_NOTICE =
  'Shown once. This page keeps no copy: copy it to the node now, over a channel you would trust with a ' +
  'password. It holds the join credentials until the node has joined or the token expires.';

/** What the page says above attested material. */
export const ATTESTED_NOTICE =
  'No secret in it: this material works only on the machine with the TPM you bound the token to, which ' +
  'proves it holds the TPM before it receives its join tokens. Anyone may read it, so it may sit in a ' +
  'ticket or a launch template; it only has to reach the machine unaltered (the machine runs it as root). ' +
  'Tried on another machine it gets nothing, and the refusal shows under "Watch the node join". Shown ' +
  'once: this page keeps no copy.';

/**
 * @param {{ joinCommand: string, discovery?: string, discoveryKubeconfig?: string,
 *   discoveryKubeconfigPath?: string, attested?: boolean, attestScript?: string | null }} answer the
 *   POST /v1/tokens answer (or the fields of it the page keeps)
 * @returns {{ formats: string[], usage: Record<string, string>, labels: Record<string, string>,
 *   notice: string, attested: boolean }} the formats to offer, in the order to offer them (the
 *   first is the one to show first), the usage text and name of each, and what to say above them
 */
export function materialFormats(answer) {
  const fileDiscovery = answer.discovery === 'file';
  const path =
    typeof answer.discoveryKubeconfigPath === 'string' && answer.discoveryKubeconfigPath !== ''
      ? answer.discoveryKubeconfigPath
      : 'the path its discovery.file.kubeConfigPath names';
  const offerKubeconfig =
    fileDiscovery && typeof answer.discoveryKubeconfig === 'string' && answer.discoveryKubeconfig !== '';
  const noSecret = "it holds no secret, only the API server's address and CA";
  if (answer.attested === true)
    return attestedFormats(answer, { fileDiscovery, path, offerKubeconfig, noSecret });
  /** @type {Record<string, string>} */
  const usage = {
    joinConfiguration: fileDiscovery
      ? `Save the discovery kubeconfig (format "Discovery kubeconfig"; ${noSecret}) on the node at ${path}, ` +
        `and this configuration as join.yaml, then run: ${answer.joinCommand}`
      : `Save it on the node as join.yaml, then run: ${answer.joinCommand}`,
    cloudInit: fileDiscovery
      ? 'Give this to the new machine as its cloud-init user data: it writes the discovery kubeconfig and ' +
        'the configuration, and joins.'
      : 'Give this to the new machine as its cloud-init user data: it writes the configuration and joins.',
  };
  if (offerKubeconfig) {
    usage.discoveryKubeconfig =
      `Save it on the node at ${path}, where the JoinConfiguration looks for it, before running ` +
      `kubeadm join. It is how the node knows it reaches your cluster: ${noSecret}, the same for every ` +
      'node of this cluster. Copy it over a channel nobody can alter.';
  }
  return {
    formats: FORMATS.filter((format) => format in usage),
    usage,
    labels: { ...PLAIN_LABELS },
    notice: PLAIN_NOTICE,
    attested: false,
  };
}

/** Attested material: the cloud-init first, then the script, the template, the discovery kubeconfig. */
function attestedFormats(answer, { fileDiscovery, path, offerKubeconfig, noSecret }) {
  const script = answer.joinCommand;
  const kubeconfigToo = fileDiscovery ? ` and the discovery kubeconfig at ${path}` : '';
  const hasScript = typeof answer.attestScript === 'string' && answer.attestScript !== '';
  /** @type {Record<string, string>} */
  const usage = {
    cloudInit:
      'Give this to the machine with that TPM as its cloud-init user data: it installs the ' +
      `JoinConfiguration template${fileDiscovery ? ', the discovery kubeconfig' : ''} and the ` +
      `attestation script (${script}) and runs the script, which proves the machine holds the TPM, ` +
      'receives the join tokens and joins. The machine needs tpm2-tools, openssl and curl.',
    joinConfiguration:
      'A template, not usable alone: where the join tokens go it holds placeholders, which the ' +
      "attestation script fills in with the tokens this machine's TPM earns. The cloud-init installs it " +
      `at ${JOIN_TEMPLATE_PATH}; by hand, save it there and run the script (format "Attestation script").`,
  };
  if (hasScript) {
    usage.attestScript =
      `The script the cloud-init installs as ${script} and runs: read it before you run it. By hand: ` +
      `save it there (mode 0700) with the JoinConfiguration template at ${JOIN_TEMPLATE_PATH}` +
      `${kubeconfigToo}, then run it as root on the machine with that TPM. It needs tpm2-tools 5.x, ` +
      'openssl 3.x and curl, proves the machine holds the TPM, fills the join tokens into the template ' +
      'and runs kubeadm join. Prefer the cloud-init: it also writes the CA the script trusts the issuer ' +
      'with, when your cluster sets one.';
  }
  if (offerKubeconfig) {
    usage.discoveryKubeconfig =
      `The cloud-init writes it; by hand, save it on the node at ${path}, where the JoinConfiguration ` +
      'looks for it, before running the attestation script. It is how the node knows it reaches your ' +
      `cluster: ${noSecret}, the same for every node of this cluster. Copy it over a channel nobody can alter.`;
  }
  return {
    formats: ['cloudInit', 'attestScript', 'joinConfiguration', 'discoveryKubeconfig'].filter(
      (format) => format in usage,
    ),
    usage,
    labels: {
      cloudInit: 'cloud-init (use this: installs and runs the attestation script)',
      attestScript: 'Attestation script (nodeflavor-attest)',
      joinConfiguration: 'kubeadm JoinConfiguration template (the script fills it in; not usable alone)',
      discoveryKubeconfig: PLAIN_LABELS.discoveryKubeconfig,
    },
    notice: ATTESTED_NOTICE,
    attested: true,
  };
}

/**
 * Which field of a POST /v1/tokens `attestation` a pasted PEM is, by its BEGIN line: an EK
 * certificate (`ekCertificate`: the issuer checks it chains to a TPM manufacturer it knows) or an
 * EK public key (`ekPublicKey`: bound as the caller vouches for it). Text around the PEM block
 * (the lines `openssl x509 -text` prints, a prompt) is dropped; the first block is taken.
 * @param {string} text what the user pasted
 * @returns {null | { field: 'ekCertificate' | 'ekPublicKey', pem: string } | { problem: string }}
 *   null for nothing pasted; the field and the PEM block to send; or why it is neither
 */
export function ekBinding(text) {
  if (text.trim() === '') return null;
  const begin = /-----BEGIN ([A-Z0-9 ]+)-----/.exec(text);
  if (!begin) {
    return {
      problem:
        'is not PEM: paste the text from its -----BEGIN CERTIFICATE----- or -----BEGIN PUBLIC KEY----- ' +
        'line to its -----END line (a DER file: openssl x509 -inform der -in FILE).',
    };
  }
  const label = begin[1];
  const field = label === 'CERTIFICATE' ? 'ekCertificate' : label === 'PUBLIC KEY' ? 'ekPublicKey' : null;
  if (field === null) {
    return {
      problem:
        `is a -----BEGIN ${label}-----, not an EK certificate (-----BEGIN CERTIFICATE-----) or an EK public key ` +
        '(-----BEGIN PUBLIC KEY-----, as tpm2_createek -f pem writes it).',
    };
  }
  const endLine = `-----END ${label}-----`;
  const end = text.indexOf(endLine, begin.index);
  if (end < 0) return { problem: `is cut short: its ${endLine} line is missing.` };
  return { field, pem: `${text.slice(begin.index, end + endLine.length)}\n` };
}
