#!/usr/bin/env bash
# Regenerates test/unit/fixtures/tpm/ from real software TPMs, so the unit tests of src/flavor/tpm
# read bytes a TPM and tpm2-tools really wrote, and need no TPM themselves. Run it by hand (it is
# not part of any make target); the output is committed. Needs swtpm, swtpm_setup, swtpm_localca
# and tpm2-tools 5.x (Debian: swtpm swtpm-tools tpm2-tools; see /work/shared/TPM.md's recipe).
#
# Two "manufacturers" (swtpm_localca CA directories, a root and an intermediate each), one TPM
# from each. From TPM A: its EK (public, certificate), an RSA AK, an ECC AK, a non-restricted
# signing key, and a credential for the RSA AK made by `tpm2_makecredential -T none`. From TPM B:
# its EK certificate. No private key leaves the scratch directory, which is removed on exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/test/unit/fixtures/tpm
work=$(mktemp -d -t nodeflavor-tpm-fixtures.XXXXXX)
pidfiles=()
cleanup() {
  local f
  for f in "${pidfiles[@]}"; do [[ -s $f ]] && kill "$(cat "$f")" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
for tool in swtpm swtpm_setup swtpm_localca tpm2_createek tpm2_makecredential; do
  command -v "$tool" >/dev/null || { echo "make-tpm-fixtures: $tool is missing" >&2; exit 1; }
done

# A TPM state directory "manufactured" with an EK certificate signed by the CA in $1.
manufacture() {
  local ca=$1 state=$2
  mkdir -p "$ca" "$state"
  cat >"$ca/localca.conf" <<EOF
statedir = $ca
signingkey = $ca/signkey.pem
issuercert = $ca/issuercert.pem
certserial = $ca/certserial
EOF
  printf -- '--platform-manufacturer nodeflavor-test\n--platform-version 2.1\n--platform-model swtpm\n' >"$ca/localca.options"
  cat >"$ca/setup.conf" <<EOF
create_certs_tool = $(command -v swtpm_localca)
create_certs_tool_config = $ca/localca.conf
create_certs_tool_options = $ca/localca.options
EOF
  swtpm_setup --tpm2 --tpmstate "$state" --create-ek-cert --create-platform-cert \
    --config "$ca/setup.conf" --overwrite >/dev/null
}

# Starts swtpm on a free-looking port pair (a taken port makes it exit at once: try another) and
# sets TPM2TOOLS_TCTI for the tpm2_* commands that follow.
start() {
  local state=$1 port attempt
  for attempt in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 40000))
    if swtpm socket --tpm2 --tpmstate dir="$state" --server type=tcp,port="$port" \
      --ctrl type=tcp,port=$((port + 1)) --flags startup-clear --daemon --pid file="$state/swtpm.pid" 2>/dev/null; then
      pidfiles+=("$state/swtpm.pid")
      export TPM2TOOLS_TCTI="swtpm:host=127.0.0.1,port=$port"
      return
    fi
  done
  echo "make-tpm-fixtures: swtpm did not start" >&2
  exit 1
}

# No resource manager in front of swtpm: flush what each command left loaded.
flush() { tpm2_flushcontext -t; tpm2_flushcontext -s; }

cd "$work"
manufacture "$work/ca-a" "$work/tpm-a"
manufacture "$work/ca-b" "$work/tpm-b"

start "$work/tpm-a"
tpm2_createek -c ek.ctx -G rsa -u ek.pub >/dev/null && flush
tpm2_createak -C ek.ctx -c ak.ctx -G rsa -g sha256 -s rsassa -u ak.pub -n ak.name >/dev/null && flush
tpm2_createak -C ek.ctx -c ak-ecc.ctx -G ecc -g sha256 -s ecdsa -u ak-ecc.pub -n ak-ecc.name >/dev/null && flush
# A signing key that is not restricted: it may sign anything, so it must not pass as an AK.
tpm2_createprimary -Q -C o -G rsa2048:rsassa-sha256:null \
  -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign' -c signer.ctx
tpm2_readpublic -Q -c signer.ctx -o signer.pub -n signer.name && flush
tpm2_nvread -Q 0x1c00002 -o ek-cert.der 2>/dev/null
printf 'nodeflavor-fixture-credential-32' >cred.secret
tpm2_makecredential -Q -T none -u ek.pub -s cred.secret -n "$(xxd -p -c 999 ak.name)" -o cred.blob
# The fixture's own proof: TPM A recovers the secret from that blob.
tpm2_startauthsession -Q --policy-session -S session.ctx
tpm2_policysecret -Q -S session.ctx -c e >/dev/null
tpm2_activatecredential -Q -c ak.ctx -C ek.ctx -i cred.blob -o recovered -P session:session.ctx
tpm2_flushcontext session.ctx && flush
cmp cred.secret recovered

start "$work/tpm-b"
tpm2_createek -c ek-b.ctx -G rsa -u tpm-b-ek.pub >/dev/null && flush
tpm2_nvread -Q 0x1c00002 -o tpm-b-ek-cert.der 2>/dev/null

mkdir -p "$out"
cp ek.pub ek-cert.der ak.pub ak.name ak-ecc.pub ak-ecc.name signer.pub signer.name cred.secret cred.blob \
  tpm-b-ek.pub tpm-b-ek-cert.der "$out/"
for m in a b; do
  cp "ca-$m/swtpm-localca-rootca-cert.pem" "$out/manufacturer-$m-root.pem"
  cp "ca-$m/issuercert.pem" "$out/manufacturer-$m-intermediate.pem"
done
chmod 0644 "$out"/* # tpm2-tools writes 0640
echo "make-tpm-fixtures: wrote $(ls "$out" | wc -l) files to ${out#"$root"/}"
