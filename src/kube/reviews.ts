// Asking the API server who a caller is and what it may do: TokenReview (authentication.k8s.io/v1)
// and SubjectAccessReview (authorization.k8s.io/v1) for the token-issuer API, and the Self*
// reviews for the CLI, which acts as its own user. The reviewed token is sent to the API server
// only; it is never part of an error.
import { kubeCall } from '../runtime/fetch.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';

const AUTHN = '/apis/authentication.k8s.io/v1';
const AUTHZ = '/apis/authorization.k8s.io/v1';

interface AccessReview {
  status?: { allowed?: boolean; denied?: boolean };
}

interface TokenReview {
  status?: {
    authenticated?: boolean;
    audiences?: string[];
    user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  };
}

export interface KubeUser {
  username: string;
  uid?: string;
  groups: string[];
  extra: Record<string, string[]>;
}

/** What a TokenReview established: the user, and which of the requested audiences the token is for. */
export interface ReviewedToken {
  user: KubeUser;
  /** The API server's status.audiences: the requested audiences the token is valid for. */
  audiences: string[];
}

export interface ResourceCheck {
  group: string;
  resource: string;
  subresource?: string;
  verb: string;
  name?: string;
}

export class KubeReviews {
  readonly #kubeConfig: KubeConfig;

  constructor(kubeConfig: KubeConfig) {
    this.#kubeConfig = kubeConfig;
  }

  /** POSTs a review of `kind` (group/version from `api`, e.g. /apis/authentication.k8s.io/v1). */
  #create<T>(api: string, kind: string, spec: unknown, action: string): Promise<T> {
    const apiVersion = api.slice('/apis/'.length);
    const path = `${api}/${kind.toLowerCase()}s`;
    return kubeCall<T>(this.#kubeConfig, 'POST', path, { body: { apiVersion, kind, spec }, action });
  }

  /**
   * The user behind a bearer token that is valid for one of `audiences`, or undefined when the
   * API server does not accept it. The caller must check `audiences` of the answer: an
   * authenticator that ignores audiences answers without them.
   */
  async reviewToken(token: string, audiences: string[]): Promise<ReviewedToken | undefined> {
    const review = await this.#create<TokenReview>(
      AUTHN,
      'TokenReview',
      { token, audiences },
      'review a bearer token (TokenReview)',
    );
    const user = review.status?.user;
    if (!review.status?.authenticated || !user?.username) return undefined;
    return {
      user: {
        username: user.username,
        ...(user.uid ? { uid: user.uid } : {}),
        groups: user.groups ?? [],
        extra: user.extra ?? {},
      },
      audiences: review.status.audiences ?? [],
    };
  }

  /** Whether `user` may do `check` (SubjectAccessReview). */
  async userCan(user: KubeUser, check: ResourceCheck): Promise<boolean> {
    const review = await this.#create<AccessReview>(
      AUTHZ,
      'SubjectAccessReview',
      {
        user: user.username,
        groups: user.groups,
        extra: user.extra,
        ...(user.uid ? { uid: user.uid } : {}),
        resourceAttributes: check,
      },
      `check whether ${user.username} may ${check.verb} ${check.resource}`,
    );
    return review.status?.allowed === true && review.status.denied !== true;
  }

  /** Whether the kubeconfig's own user may do `check` (SelfSubjectAccessReview). */
  async selfCan(check: ResourceCheck): Promise<boolean> {
    const review = await this.#create<AccessReview>(
      AUTHZ,
      'SelfSubjectAccessReview',
      { resourceAttributes: check },
      `check whether you may ${check.verb} ${check.resource}`,
    );
    return review.status?.allowed === true && review.status.denied !== true;
  }

  /** The kubeconfig's own username (SelfSubjectReview, allowed for everyone), as `kubectl auth whoami`. */
  async whoAmI(): Promise<string | undefined> {
    const review = await kubeCall<{ status?: { userInfo?: { username?: string } } }>(
      this.#kubeConfig,
      'POST',
      `${AUTHN}/selfsubjectreviews`,
      {
        body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
        action: 'find out who you are (SelfSubjectReview)',
      },
    );
    return review.status?.userInfo?.username;
  }
}
