#!/usr/bin/env bash
# Runs the e2e suite against a kind cluster (hosts with Docker only: NOT runnable on this
# project's CI machine, which has no Docker engine).
#   1. creates (or reuses) the kind cluster nodeflavor-e2e (kind-config.yaml: kubeadm defaults,
#      bootstrap token auth, Node authorizer, NodeRestriction; + bootstrapsigner/tokencleaner);
#   2. builds the image from the Dockerfile and loads it into kind;
#   3. installs the Helm chart (CRDs, RBAC, ServiceAccount, Deployment with 0 replicas: the e2e
#      suite starts its own operator processes, as the chart's ServiceAccount, so it can kill and
#      restart them; set OPERATOR_REPLICAS=2 to run the in-cluster Deployment instead, e.g. for
#      a manual look);
#   4. runs `make test-e2e` with E2E_KUBECONFIG pointing at the cluster.
# Known limit: the admission e2e registers its webhook by a 127.0.0.1 URL, which kind's API
# server (in a container) cannot reach; that file needs the in-cluster Service path instead.
#   KEEP_CLUSTER=1 test/e2e/kind/run.sh   leaves the cluster running afterwards
set -euo pipefail
cd "$(dirname "$0")/../../.."
name=nodeflavor-e2e
image=nodeflavor:e2e
kubeconfig=$PWD/.cluster/kind.kubeconfig
mkdir -p .cluster
command -v docker >/dev/null && docker info >/dev/null 2>&1 || { echo "run.sh: needs a running Docker engine" >&2; exit 1; }
command -v kind >/dev/null || { echo "run.sh: needs kind (go install sigs.k8s.io/kind@v0.33.0)" >&2; exit 1; }
make binaries >/dev/null
# shellcheck source=../cluster/versions.env
source test/e2e/cluster/versions.env
helm=${NODEFLAVOR_CACHE:-$HOME/.cache/nodeflavor}/helm-$HELM_VERSION/helm

if ! kind get clusters | grep -qx "$name"; then
  kind create cluster --config test/e2e/kind/kind-config.yaml --kubeconfig "$kubeconfig" --wait 120s
else
  kind get kubeconfig --name "$name" > "$kubeconfig"
fi
[[ ${KEEP_CLUSTER:-} == 1 ]] || trap 'kind delete cluster --name "$name"' EXIT

docker build -t "$image" .
kind load docker-image "$image" --name "$name"
"$helm" upgrade --install nodeflavor deploy/helm/nodeflavor --kubeconfig "$kubeconfig" \
  --namespace nodeflavor --create-namespace \
  --set image.repository=nodeflavor --set image.tag=e2e --set image.pullPolicy=Never \
  --set replicaCount="${OPERATOR_REPLICAS:-0}" --wait

E2E_KUBECONFIG=$kubeconfig make test-e2e
