// Asking the API server who a caller is and what it may do: TokenReview (authentication.k8s.io/v1)
// and SubjectAccessReview (authorization.k8s.io/v1) for the token-issuer API, and the Self*
// reviews for the CLI, which acts as its own user. The reviewed token is sent to the API server
// only; it is never part of an error.
import { AuthenticationV1Api, AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { toKubeError } from './kube-error.ts';

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
  readonly #authn: AuthenticationV1Api;
  readonly #authz: AuthorizationV1Api;

  constructor(kubeConfig: KubeConfig) {
    this.#authn = kubeConfig.makeApiClient(AuthenticationV1Api);
    this.#authz = kubeConfig.makeApiClient(AuthorizationV1Api);
  }

  /**
   * The user behind a bearer token that is valid for one of `audiences`, or undefined when the
   * API server does not accept it. The caller must check `audiences` of the answer: an
   * authenticator that ignores audiences answers without them.
   */
  async reviewToken(token: string, audiences: string[]): Promise<ReviewedToken | undefined> {
    let review: Awaited<ReturnType<AuthenticationV1Api['createTokenReview']>>;
    try {
      review = await this.#authn.createTokenReview({ body: { spec: { token, audiences } } });
    } catch (error) {
      throw toKubeError(error, 'review a bearer token (TokenReview)');
    }
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
    try {
      const review = await this.#authz.createSubjectAccessReview({
        body: {
          spec: {
            user: user.username,
            groups: user.groups,
            extra: user.extra,
            ...(user.uid ? { uid: user.uid } : {}),
            resourceAttributes: check,
          },
        },
      });
      return review.status?.allowed === true && review.status.denied !== true;
    } catch (error) {
      throw toKubeError(error, `check whether ${user.username} may ${check.verb} ${check.resource}`);
    }
  }

  /** Whether the kubeconfig's own user may do `check` (SelfSubjectAccessReview). */
  async selfCan(check: ResourceCheck): Promise<boolean> {
    try {
      const review = await this.#authz.createSelfSubjectAccessReview({
        body: { spec: { resourceAttributes: check } },
      });
      return review.status?.allowed === true && review.status.denied !== true;
    } catch (error) {
      throw toKubeError(error, `check whether you may ${check.verb} ${check.resource}`);
    }
  }

  /** The kubeconfig's own username (SelfSubjectReview, allowed for everyone), as `kubectl auth whoami`. */
  async whoAmI(): Promise<string | undefined> {
    try {
      const review = await this.#authn.createSelfSubjectReview({ body: {} });
      return review.status?.userInfo?.username;
    } catch (error) {
      throw toKubeError(error, 'find out who you are (SelfSubjectReview)');
    }
  }
}
