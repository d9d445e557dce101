// Which formats of an issuance answer the self-service page offers, and what it tells the node
// administrator to do with each. Pure (no DOM, no fetch): portal.js renders what this decides,
// and test/unit/issuer-portal.test.ts checks the decision without a browser. Types: formats.d.ts.
//
// With file discovery (ADR 0007) the JoinConfiguration names a discovery kubeconfig that must be
// on the node before `kubeadm join` runs, so the page offers that file as a third format and the
// JoinConfiguration's instructions name where it goes. With token discovery the JoinConfiguration
// is all the node needs: the third format is not offered (the answer still carries the file, but
// nothing on the node reads it).

/** Every format the page knows, in the page's order (the values of its `format` radios). */
export const FORMATS = ['joinConfiguration', 'cloudInit', 'discoveryKubeconfig'];

/**
 * @param {{ joinCommand: string, discovery?: string, discoveryKubeconfig?: string,
 *   discoveryKubeconfigPath?: string }} answer the POST /v1/tokens answer (or the fields of it the page keeps)
 * @returns {{ formats: string[], usage: Record<string, string> }} the formats to offer, in order, and
 *   the usage text of each offered one
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
  return { formats: FORMATS.filter((format) => format in usage), usage };
}
