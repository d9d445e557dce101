// The ConfigMap that tells clients which CA to trust for a serving certificate: `ca.crt` only,
// never the CA key (which stays in the TLS Secret). Portals read it instead of the Secret. Every
// replica may write it; a write carries the resourceVersion it read, so a lost race is a 409 and
// a re-read, and a ConfigMap that already holds the certificate is left alone.

import { kubeJson } from '../runtime/fetch.ts';
import { isAlreadyExists, isNotFound } from '../runtime/kube-error.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';

const CA_CONFIGMAP_KEY = 'ca.crt';
const MAX_CONFLICTS = 5;

interface ConfigMapObject {
  metadata?: { resourceVersion?: string };
  data?: Record<string, string>;
}

type PublishResult = 'created' | 'updated' | 'unchanged';

export class CaConfigMapStore {
  readonly #kubeConfig: KubeConfig;
  readonly #namespace: string;
  readonly #name: string;

  constructor(kubeConfig: KubeConfig, namespace: string, name: string) {
    this.#kubeConfig = kubeConfig;
    this.#namespace = namespace;
    this.#name = name;
  }

  get description(): string {
    return `ConfigMap ${this.#namespace}/${this.#name}`;
  }

  /** Makes the ConfigMap hold exactly `caPem` under ca.crt. */
  async publish(caPem: string): Promise<PublishResult> {
    const collection = `/api/v1/namespaces/${this.#namespace}/configmaps`;
    const path = `${collection}/${this.#name}`;
    for (let attempt = 0; attempt < MAX_CONFLICTS; attempt++) {
      let current: ConfigMapObject | undefined;
      try {
        current = await kubeJson<ConfigMapObject>(this.#kubeConfig, 'GET', path, {
          action: `read ${this.description}`,
        });
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
      if (current?.data?.[CA_CONFIGMAP_KEY] === caPem && Object.keys(current.data).length === 1) {
        return 'unchanged';
      }
      const body = this.#body(caPem, current?.metadata?.resourceVersion);
      try {
        if (current === undefined) {
          await kubeJson(this.#kubeConfig, 'POST', collection, {
            body,
            action: `create ${this.description}`,
          });
          return 'created';
        }
        await kubeJson(this.#kubeConfig, 'PUT', path, { body, action: `update ${this.description}` });
        return 'updated';
      } catch (error) {
        if (isAlreadyExists(error)) continue; // 409: another replica wrote first; judge its write
        throw error;
      }
    }
    throw new Error(`${this.description} kept changing under us (${MAX_CONFLICTS} conflicts in a row)`);
  }

  #body(caPem: string, resourceVersion: string | undefined) {
    return {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: this.#name,
        namespace: this.#namespace,
        labels: { 'app.kubernetes.io/name': 'nodeflavor', 'app.kubernetes.io/component': 'issuer-ca' },
        ...(resourceVersion ? { resourceVersion } : {}),
      },
      data: { [CA_CONFIGMAP_KEY]: caPem },
    };
  }
}
