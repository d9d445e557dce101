// The answer to an issuance, as the API sends it and the CLI prints it.
import type { IssuedToken } from './issue.ts';

/** The answer to POST /v1/tokens: the same keys and byte lengths for every flavor, no flavor name. */
export interface IssueResponse {
  id: string;
  tokenID: string;
  expiresAt: string;
  apiServerEndpoint: string;
  caCertHash: string;
  bootstrapToken: string;
  flavorToken: string;
  joinConfiguration: string;
  joinCommand: string;
  cloudInit: string;
  /** `file`: the JoinConfiguration reads discoveryKubeconfig from discoveryKubeconfigPath. */
  discovery: 'file' | 'token';
  /** The cluster CA and API server, no secret: the same for every token of the cluster. */
  discoveryKubeconfig: string;
  discoveryKubeconfigPath: string;
}

/** The one place join material turns into a response body. */
export function issueResponse(issued: IssuedToken): IssueResponse {
  return {
    id: issued.name,
    tokenID: issued.tokenId,
    expiresAt: issued.expiresAt,
    apiServerEndpoint: issued.material.apiServerEndpoint,
    caCertHash: issued.material.caCertHash,
    bootstrapToken: `${issued.bootstrapToken.id}.${issued.bootstrapToken.secret.reveal()}`,
    flavorToken: issued.flavorToken.reveal(),
    joinConfiguration: issued.material.joinConfiguration,
    joinCommand: issued.material.joinCommand,
    cloudInit: issued.material.cloudInit,
    discovery: issued.material.discovery,
    discoveryKubeconfig: issued.material.discoveryKubeconfig,
    discoveryKubeconfigPath: issued.material.discoveryKubeconfigPath,
  };
}
