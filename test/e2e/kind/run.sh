#!/usr/bin/env bash
# Runs the e2e suite against a kind cluster: creates it, then `make test-e2e` with
# E2E_KUBECONFIG pointing at it. NOT runnable on this project's CI machine (no Docker engine);
# it is the path for users and contributors with Docker. Needs: docker, kind, make.
#   test/e2e/kind/run.sh            create (or reuse) the cluster and run the suite
#   KEEP_CLUSTER=1 test/e2e/kind/run.sh   leave the cluster running afterwards
set -euo pipefail
cd "$(dirname "$0")/../../.."
name=nodeflavor-e2e
kubeconfig=$PWD/.cluster/kind.kubeconfig
mkdir -p .cluster
command -v docker >/dev/null && docker info >/dev/null 2>&1 || { echo "run.sh: needs a running Docker engine" >&2; exit 1; }
command -v kind >/dev/null || { echo "run.sh: needs kind (go install sigs.k8s.io/kind@v0.33.0)" >&2; exit 1; }
if ! kind get clusters | grep -qx "$name"; then
  kind create cluster --config test/e2e/kind/kind-config.yaml --kubeconfig "$kubeconfig" --wait 120s
else
  kind get kubeconfig --name "$name" > "$kubeconfig"
fi
[[ ${KEEP_CLUSTER:-} == 1 ]] || trap 'kind delete cluster --name "$name"' EXIT
E2E_KUBECONFIG=$kubeconfig make test-e2e
