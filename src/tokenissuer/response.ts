// The answer to an issuance, as the API sends it and the CLI prints it.
import type { IssuedToken } from './issuance/issue.ts';

/** The answer to POST /v1/tokens: the same keys and byte lengths for every flavor, no flavor name. */
export interface IssueResponse {
  id: string;
  tokenID: string;
  expiresAt: string;
  apiServerEndpoint: string;
  caCertHash: string;
  /** null for a token bound to a TPM: its machine earns both by attestation (attestScript). */
  bootstrapToken: string | null;
  flavorToken: string | null;
  joinConfiguration: string;
  joinCommand: string;
  cloudInit: string;
  /** `file`: the JoinConfiguration reads discoveryKubeconfig from discoveryKubeconfigPath. */
  discovery: 'file' | 'token';
  /** The cluster CA and API server, no secret: the same for every token of the cluster. */
  discoveryKubeconfig: string;
  discoveryKubeconfigPath: string;
  /** true when the token is bound to a TPM (ADR 0014). */
  attested: boolean;
  /** Attested tokens: the node-side script the cloud-init installs and runs; else null. */
  attestScript: string | null;
}

/** The answer for a token not bound to a TPM: both tokens are in it. */
export type PlainIssueResponse = IssueResponse & {
  bootstrapToken: string;
  flavorToken: string;
  attested: false;
};

/** The one place join material turns into a response body. */
export function issueResponse(issued: IssuedToken): IssueResponse {
  return {
    id: issued.name,
    tokenID: issued.tokenId,
    expiresAt: issued.expiresAt,
    apiServerEndpoint: issued.material.apiServerEndpoint,
    caCertHash: issued.material.caCertHash,
    bootstrapToken: issued.attested
      ? null
      : `${issued.bootstrapToken.id}.${issued.bootstrapToken.secret.reveal()}`,
    flavorToken: issued.attested ? null : issued.flavorToken.reveal(),
    joinConfiguration: issued.material.joinConfiguration,
    joinCommand: issued.material.joinCommand,
    cloudInit: issued.material.cloudInit,
    discovery: issued.material.discovery,
    discoveryKubeconfig: issued.material.discoveryKubeconfig,
    discoveryKubeconfigPath: issued.material.discoveryKubeconfigPath,
    attested: issued.attested,
    attestScript: issued.material.attestScript ?? null,
  };
}
