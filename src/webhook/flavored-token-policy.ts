// Who may create a FlavoredToken (issue 32), pure. Since attested joins, a record is worth
// something by itself: the issuer's attestation routes mint a bootstrap Secret and a flavor token
// for a record bound to a TPM. So `use` on a FlavorClass governs every way to that flavor, the
// direct API included: this ValidatingAdmissionPolicy asks the API server's authorizer, for each
// FlavoredToken CREATE, whether the requester may `use` flavorclasses/<spec.flavorClassName> (the
// same question the issuer API asks with a SubjectAccessReview). The operator's own
// ServiceAccount is exempt: it creates records for callers it has already checked. And the
// issuer's record of its machine's TPM proofs (the nodeflavor.io/attested annotation, which the
// controller's once-per-proof rule reads) may be set or changed only by the operator.
//
// This is the first line. Where it is missing (admission switched off) or bypassed, the issuer
// and the controller still believe a record's attestation facts only when the issuer sealed them
// (src/flavor/attestation-seal.ts): a record written directly never leads to a Secret, a flavor
// token or a measured-boot flavor.
import { ATTESTED_ANNOTATION } from '../flavor/attestation-decision.ts';
import { FLAVOR_CLASS_PLURAL, FLAVORED_TOKEN_PLURAL, GROUP } from '../flavor/resources.ts';
import {
  API_VERSION,
  COMMON_LABELS,
  lit,
  litList,
  type ValidatingAdmissionPolicy,
  validatingAdmissionPolicyBinding,
} from './registration.ts';

/** The policy (and binding) name beside the guard's own: `<name>-flavored-tokens`. */
export function flavoredTokenPolicyName(name: string): string {
  return `${name}-flavored-tokens`;
}

const annotation = (object: string) =>
  `(${object} != null && has(${object}.metadata.annotations) && ${lit(ATTESTED_ANNOTATION)} in ${object}.metadata.annotations ? ${object}.metadata.annotations[${lit(ATTESTED_ANNOTATION)}] : "")`;

export function flavoredTokenPolicy(opts: {
  name: string;
  operatorUsername: string;
}): ValidatingAdmissionPolicy {
  if (opts.operatorUsername === '') throw new Error('operatorUsername must not be empty');
  return {
    apiVersion: API_VERSION,
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: flavoredTokenPolicyName(opts.name), labels: { ...COMMON_LABELS } },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: {
        // Not flavoredtokens/status: a custom resource's status writes keep its metadata as it was.
        resourceRules: [
          {
            apiGroups: [GROUP],
            apiVersions: ['*'],
            operations: ['CREATE', 'UPDATE'],
            resources: [FLAVORED_TOKEN_PLURAL],
            scope: 'Cluster',
          },
        ],
        matchPolicy: 'Equivalent',
        namespaceSelector: {},
        objectSelector: {},
      },
      matchConditions: [
        {
          // The operator acts for callers it has checked; its writes never wait on this policy.
          name: 'not-nodeflavor-operator',
          expression: `!(request.userInfo.username in ${litList([opts.operatorUsername])})`,
        },
      ],
      variables: [
        { name: 'attested', expression: annotation('object') },
        { name: 'oldAttested', expression: annotation('oldObject') },
      ],
      validations: [
        {
          expression: `request.operation != "CREATE" || authorizer.group(${lit(GROUP)}).resource(${lit(FLAVOR_CLASS_PLURAL)}).name(object.spec.flavorClassName).check("use").allowed()`,
          messageExpression: `'Forbidden: user "' + request.userInfo.username + '" may not use FlavorClass "' + object.spec.flavorClassName + '": creating a FlavoredToken needs the use verb on flavorclasses/' + object.spec.flavorClassName + ' (ask for tokens through the token issuer)'`,
          message:
            'Forbidden: creating a FlavoredToken needs the use verb on its FlavorClass (flavorclasses/<spec.flavorClassName>)',
          reason: 'Forbidden',
        },
        {
          expression: 'variables.attested == variables.oldAttested',
          messageExpression: `'Forbidden: user "' + request.userInfo.username + '" may not set or change the ${ATTESTED_ANNOTATION} annotation: it is the record of TPM proofs the token issuer keeps'`,
          message: `Forbidden: only the nodeflavor operator may set or change the ${ATTESTED_ANNOTATION} annotation`,
          reason: 'Forbidden',
        },
      ],
    },
  };
}

export function flavoredTokenPolicyBinding(opts: { name: string }) {
  return validatingAdmissionPolicyBinding({
    name: flavoredTokenPolicyName(opts.name),
    policyName: flavoredTokenPolicyName(opts.name),
  });
}
