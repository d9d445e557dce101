// Types of formats.js (plain browser JavaScript, served as it is) for the TypeScript tests.

export type MaterialFormat = 'joinConfiguration' | 'cloudInit' | 'discoveryKubeconfig' | 'attestScript';

export declare const FORMATS: readonly MaterialFormat[];

/** Where the attested cloud-init installs the JoinConfiguration template (attest-script.ts's). */
export declare const JOIN_TEMPLATE_PATH: string;

/** The formats' names for plain material (index.html's labels). */
export declare const PLAIN_LABELS: Readonly<Record<MaterialFormat, string>>;

/** What the page says above plain material, and above attested material. */
export declare const PLAIN_NOTICE: string;
export declare const ATTESTED_NOTICE: string;

/** The fields of a POST /v1/tokens answer the decision reads. */
export interface FormatAnswer {
  joinCommand: string;
  discovery?: string;
  discoveryKubeconfig?: string;
  discoveryKubeconfigPath?: string;
  /** A token bound to a TPM (ADR 0014): its material holds no secret. */
  attested?: boolean;
  attestScript?: string | null;
}

/**
 * The formats to offer, in the order to offer them (the first is shown first), the usage text and
 * name of each offered one, and what to say above the material.
 */
export declare function materialFormats(answer: FormatAnswer): {
  formats: MaterialFormat[];
  usage: Partial<Record<MaterialFormat, string>>;
  labels: Partial<Record<MaterialFormat, string>>;
  notice: string;
  attested: boolean;
};

/**
 * Which field of a POST /v1/tokens `attestation` a pasted PEM is, by its BEGIN line, and the PEM
 * block to send; null when nothing was pasted; else why it is neither.
 */
export declare function ekBinding(
  text: string,
): null | { field: 'ekCertificate' | 'ekPublicKey'; pem: string } | { problem: string };
