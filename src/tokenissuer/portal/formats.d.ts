// Types of formats.js (plain browser JavaScript, served as it is) for the TypeScript tests.

export type MaterialFormat = 'joinConfiguration' | 'cloudInit' | 'discoveryKubeconfig';

export declare const FORMATS: readonly MaterialFormat[];

/** The fields of a POST /v1/tokens answer the decision reads. */
export interface FormatAnswer {
  joinCommand: string;
  discovery?: string;
  discoveryKubeconfig?: string;
  discoveryKubeconfigPath?: string;
}

/** The formats to offer, in the page's order, and the usage text of each offered one. */
export declare function materialFormats(answer: FormatAnswer): {
  formats: MaterialFormat[];
  usage: Partial<Record<MaterialFormat, string>>;
};
