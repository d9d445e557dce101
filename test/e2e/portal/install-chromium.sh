#!/usr/bin/env bash
# Installs Debian's chromium, the headless browser test/e2e/portal.test.ts drives with
# playwright-core (a browser download of playwright's own does not work on closed networks),
# when it runs as root on Linux and chromium is missing. Anywhere else it says why it skipped and
# exits 0: the page's e2e test then reports itself skipped with that reason.
set -euo pipefail
log() { printf '[chromium] %s\n' "$*" >&2; }
if [[ -x /usr/bin/chromium ]]; then exit 0; fi
if [[ $(uname -s) != Linux ]]; then log "not Linux: install chromium at /usr/bin/chromium by hand; skipped"; exit 0; fi
if [[ $(id -u) != 0 ]]; then log "not root: cannot install chromium (apt-get install chromium); skipped"; exit 0; fi
command -v apt-get >/dev/null || { log "no apt-get: install chromium by hand"; exit 1; }
log "installing chromium from Debian"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends chromium >/dev/null
log "installed: $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
