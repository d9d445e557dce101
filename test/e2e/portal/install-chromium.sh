#!/usr/bin/env bash
# Installs Debian's chromium, the headless browser test/e2e/portal.test.ts drives with
# playwright-core (a browser download of playwright's own does not work on closed networks),
# when it runs as root on Linux and chromium is missing. Anywhere else it says why it skipped and
# exits 0: the page's e2e test then reports itself skipped with that reason. In CI
# (NODEFLAVOR_REQUIRE_ALL_TESTS=1, set by .ci/run) it fails instead, at once, with the reason.
set -euo pipefail
log() { printf '[chromium] %s\n' "$*" >&2; }
skipped() {
  if [[ ${NODEFLAVOR_REQUIRE_ALL_TESTS:-} == 1 ]]; then
    log "$1, and NODEFLAVOR_REQUIRE_ALL_TESTS=1 (CI) requires every test to run"
    exit 1
  fi
  log "$1; skipped"
  exit 0
}
if [[ -x /usr/bin/chromium ]]; then exit 0; fi
if [[ $(uname -s) != Linux ]]; then skipped "not Linux: install chromium at /usr/bin/chromium by hand"; fi
if [[ $(id -u) != 0 ]]; then skipped "not root: cannot install chromium (apt-get install chromium)"; fi
command -v apt-get >/dev/null || { log "no apt-get: install chromium by hand"; exit 1; }
log "installing chromium from Debian"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends chromium >/dev/null
log "installed: $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
