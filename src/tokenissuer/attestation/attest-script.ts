// The node-side step of an attested join (ADR 0014), as the shell script the issued cloud-init
// installs and runs. A script over tpm2-tools rather than a binary of ours: every distribution
// packages tpm2-tools, the script is ~60 lines a node administrator can read in the cloud-init
// itself before running it, and nothing has to be downloaded, versioned or trusted besides it.
// It needs bash, tpm2-tools (5.x), openssl (3.x) and curl; it reaches the TPM through tpm2-tools'
// TCTI (TPM2TOOLS_TCTI; by default the kernel's resource manager, /dev/tpmrm0). No secret (the
// credential's secret, a key derived from it, a token) is ever on a command line: HMACs are built
// from `openssl dgst` over pipes, the AES key reaches openssl through a file descriptor, and the
// template is filled in by the shell.
//
// What it does: creates the TPM's endorsement key (EK) and an attestation key (AK), asks the
// issuer for a challenge, activates the credential (only the TPM holding the token's EK can),
// answers with an HMAC proof (never the secret itself), verifies and decrypts the sealed join
// secrets (src/flavor/attestation-exchange.ts), fills them into the JoinConfiguration template
// and runs `kubeadm join`. Any failure prints one line naming the step and exits 1.

export const ATTEST_SCRIPT_PATH = '/usr/local/sbin/nodeflavor-attest';
export const JOIN_TEMPLATE_PATH = '/etc/kubernetes/nodeflavor-join.template.yaml';
export const ISSUER_CA_PATH = '/etc/kubernetes/nodeflavor-issuer-ca.pem';
/** What the template holds where the script puts the join secrets it recovered. */
export const BOOTSTRAP_TOKEN_PLACEHOLDER = 'NODEFLAVOR-ATTESTED-BOOTSTRAP-TOKEN';
export const FLAVOR_TOKEN_PLACEHOLDER = 'NODEFLAVOR-ATTESTED-FLAVOR-TOKEN';

/** An https URL with nothing a shell or sed would read specially. */
export const ATTESTATION_URL_PATTERN =
  /^https:\/\/[A-Za-z0-9.[\]:-]+(?::[0-9]{1,5})?(?:\/[A-Za-z0-9._~/-]*)?$/;

export interface AttestScriptInput {
  /** Where the node reaches the issuer (its attestation endpoints live under /v1/attestations). */
  issuerUrl: string;
  tokenId: string;
  /** Whether the issuer's CA is installed at ISSUER_CA_PATH (else curl uses the system's trust). */
  pinnedCa: boolean;
  joinConfigPath: string;
}

export function renderAttestScript(input: AttestScriptInput): string {
  if (!ATTESTATION_URL_PATTERN.test(input.issuerUrl))
    throw new Error(`attest script: issuer URL '${input.issuerUrl}' is not a plain https URL`);
  if (!/^[a-z0-9]{6}$/.test(input.tokenId)) throw new Error('attest script: the token ID is malformed');
  const issuer = input.issuerUrl.replace(/\/+$/, '');
  return `#!/bin/bash
# nodeflavor attested join (ADR 0014): prove this machine holds the TPM its token is bound to,
# then join. Needs tpm2-tools, openssl and curl. --prepare-only writes the JoinConfiguration and
# stops before kubeadm join.
set -euo pipefail
ISSUER='${issuer}'
TOKEN_ID='${input.tokenId}'
TEMPLATE="\${NODEFLAVOR_JOIN_TEMPLATE:-${JOIN_TEMPLATE_PATH}}"
JOIN_CONFIG="\${NODEFLAVOR_JOIN_CONFIG:-${input.joinConfigPath}}"
CA="\${NODEFLAVOR_ISSUER_CA-${input.pinnedCa ? ISSUER_CA_PATH : ''}}"
fail() { echo "nodeflavor-attest: $*" >&2; exit 1; }
flush() { tpm2_flushcontext -t >/dev/null 2>&1 || true; tpm2_flushcontext -s >/dev/null 2>&1 || true; }
field() { sed -n "s/.*\\"$1\\":\\"\\([^\\"]*\\)\\".*/\\1/p" "$2"; }
# Keys never go on a command line, where other users of the machine could read them while this
# runs: HMAC-SHA256 (RFC 2104) of text $2 under the 32-byte key given as hex $1, built from
# \`openssl dgst -sha256\` over pipes, the key's bytes written by the shell's own printf.
bytes() { local hex=$1 esc='' i; for ((i = 0; i < \${#hex}; i += 2)); do esc+="\\x\${hex:i:2}"; done; printf "$esc"; }
xorpad() { local i h; XORPAD=''; for ((i = 0; i < 128; i += 2)); do h=\${1:i:2}; printf -v h '%02x' $((16#\${h:-00} ^ $2)); XORPAD+=$h; done; }
hmac() {
  local inner opad
  xorpad "$1" 0x5c
  opad=$XORPAD
  xorpad "$1" 0x36
  inner=$({ bytes "$XORPAD"; printf '%s' "$2"; } | openssl dgst -sha256 -r | cut -d' ' -f1)
  { bytes "$opad"; bytes "$inner"; } | openssl dgst -sha256 -r | cut -d' ' -f1
}
post() {
  curl -sS --max-time 30 \${CA:+--cacert "$CA"} -o "$3" -w '%{http_code}' \\
    -H 'Content-Type: application/json' --data-binary @"$2" "$ISSUER/v1/attestations/$TOKEN_ID/$1"
}
[ -r "$TEMPLATE" ] || fail "the join configuration template $TEMPLATE is missing (the cloud-init writes it)"
for tool in tpm2_createek tpm2_createak tpm2_activatecredential tpm2_quote tpm2_pcrread openssl curl; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (install tpm2-tools, openssl and curl)"
done
work=$(mktemp -d)
trap 'flush; rm -rf "$work"' EXIT
cd "$work"

tpm2_createek -c ek.ctx -G rsa -u ek.pub >/dev/null || fail "cannot create the endorsement key: is the TPM reachable?"
flush
tpm2_createak -C ek.ctx -c ak.ctx -G rsa -g sha256 -s rsassa -u ak.pub -n ak.name >/dev/null ||
  fail "cannot create an attestation key"
flush
printf '{"ekPublic":"%s","akPublic":"%s"}' "$(openssl base64 -A <ek.pub)" "$(openssl base64 -A <ak.pub)" >challenge.json
status=$(post challenge challenge.json challenged.json) || fail "cannot reach the issuer at $ISSUER"
[ "$status" = 200 ] || fail "challenge refused (HTTP $status): $(field message challenged.json)"
ticket=$(field ticket challenged.json)
field credential challenged.json | openssl base64 -d -A >cred.blob

tpm2_startauthsession --policy-session -S session.ctx >/dev/null
tpm2_policysecret -S session.ctx -c e >/dev/null
tpm2_activatecredential -c ak.ctx -C ek.ctx -i cred.blob -o secret.bin -P session:session.ctx >/dev/null 2>&1 ||
  fail "this TPM cannot activate the issuer's credential: it is not the TPM the token is bound to"
tpm2_flushcontext session.ctx >/dev/null 2>&1 || true
flush
secret=$(od -An -v -tx1 secret.bin | tr -d ' \\n')
rm -f secret.bin

# A flavor that requires a measured boot state asks for a quote of its PCRs over its nonce.
quote=''
pcrs=$(field pcrs challenged.json)
if [ -n "$pcrs" ]; then
  tpm2_quote -c ak.ctx -l "$pcrs" -q "$(field nonce challenged.json)" -g sha256 -m quote.msg -s quote.sig >/dev/null ||
    fail "cannot quote PCRs $pcrs"
  flush
  tpm2_pcrread "$pcrs" -o pcrs.bin >/dev/null || fail "cannot read PCRs $pcrs"
  quote=$(printf ',"quote":{"akPublic":"%s","message":"%s","signature":"%s","pcrValues":"%s"}' \\
    "$(openssl base64 -A <ak.pub)" "$(openssl base64 -A <quote.msg)" "$(openssl base64 -A <quote.sig)" "$(openssl base64 -A <pcrs.bin)")
fi

printf '{"ticket":"%s","proof":"%s"%s}' "$ticket" "$(hmac "$secret" "proof:$ticket")" "$quote" >answer.json
status=$(post answer answer.json answered.json) || fail "cannot reach the issuer at $ISSUER"
[ "$status" = 200 ] || fail "answer refused (HTTP $status): $(field message answered.json)"
salt=$(field salt answered.json)
ciphertext=$(field ciphertext answered.json)
[[ "$salt" =~ ^[0-9a-f]{16}$ ]] || fail "the issuer's answer is malformed"
[ "$(hmac "$(hmac "$secret" mac)" "$salt:$ciphertext")" = "$(field mac answered.json)" ] ||
  fail "the issuer's answer does not verify under this TPM's secret"
# The AES key and IV come from PBKDF2 of the encryption key, which openssl reads from fd 3.
secrets=$({ printf 'Salted__'; bytes "$salt"; printf '%s' "$ciphertext" | openssl base64 -d -A; } |
  openssl enc -d -aes-256-ctr -pbkdf2 -iter 1 -md sha256 -pass fd:3 3< <(printf '%s\\n' "$(hmac "$secret" encrypt)"))
token=\${secrets%%$'\\n'*}
flavor=\${secrets#*$'\\n'}
[[ "$token" =~ ^[a-z0-9]{6}\\.[a-z0-9]{16}$ && "$flavor" =~ ^[a-z2-7]{52}$ ]] || fail "the join secrets are malformed"

umask 077
mkdir -p "$(dirname "$JOIN_CONFIG")"
# A file of our own, 0600 whatever was there before, renamed into place; the tokens are filled in
# by the shell itself (not sed, whose command line would show them).
staged=$(mktemp "$JOIN_CONFIG.XXXXXX")
IFS= read -r -d '' template <"$TEMPLATE" || true
template=\${template//${BOOTSTRAP_TOKEN_PLACEHOLDER}/$token}
template=\${template//${FLAVOR_TOKEN_PLACEHOLDER}/$flavor}
printf '%s' "$template" >"$staged"
mv "$staged" "$JOIN_CONFIG"
echo "nodeflavor-attest: attested; join configuration written to $JOIN_CONFIG"
[ "\${1:-}" = --prepare-only ] && exit 0
flush
cd /
rm -rf "$work"
trap - EXIT
# The bootstrap token works until it expires: once kubeadm is done with it, it leaves the disk.
status=0
kubeadm join --config "$JOIN_CONFIG" || status=$?
rm -f "$JOIN_CONFIG"
exit "$status"
`;
}
