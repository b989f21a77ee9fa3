# agentrun: see README.md. Every target is a thin shell around a hack/ script
# or a go command, so CI and people run the same thing.

GO ?= go
BIN := bin
# The commit `agentrun --version` prints (the go command records none in a git worktree).
COMMIT := $(shell c=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null || c=$$c-dirty; echo $$c; })
LDFLAGS := -X github.com/agentrun-dev/agentrun/internal/version.Commit=$(COMMIT)

.PHONY: all build kubectl-agentrun plugin-release setup test test-unit test-clis-latest fuzz bench bench-ui ui-build demo-local lint fmt generate manifests docs envtest otel-collector demo demo-down test-e2e

all: build

# agentrun and the sandbox's init are static (no cgo), as in the runner image:
# no dynamic loader on every start of a sandbox.
build: kubectl-agentrun
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/agentrun ./cmd/agentrun
	CGO_ENABLED=0 $(GO) build -o $(BIN)/agentrun-sandbox-init ./cmd/agentrun-sandbox-init
	$(GO) build -o $(BIN)/agentrun-validate ./cmd/agentrun-validate
	$(GO) build -o $(BIN)/mockmodel ./cmd/mockmodel

## kubectl-agentrun: the kubectl plugin (`kubectl agentrun` once bin/kubectl-agentrun is on PATH).
kubectl-agentrun:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-agentrun ./cmd/kubectl-agentrun

## plugin-release: the plugin's release tarballs and krew manifest in dist/ (VERSION=vX.Y.Z).
plugin-release:
	hack/plugin-release.sh $(VERSION)

setup:
	hack/setup.sh

## test: everything CI runs (set-up, gofmt, vet, all tests, short fuzzing).
test:
	hack/test.sh

## test-unit: the Go tests only, no set-up.
test-unit:
	$(GO) test ./...

fuzz:
	hack/fuzz.sh $(FUZZTIME)

## test-clis-latest: the real-CLI suites against the newest published CLIs beside the pinned
## ones (adapters/clis.txt), and what changed; not part of test (it changes with the registry).
test-clis-latest:
	hack/test-clis-latest.sh $(RUN)

## bench: translate+aggregate throughput of every runtime against a line-split baseline.
bench:
	hack/bench.sh

## bench-ui: kubectl agentrun ui's runs list of 1,000 AgentRuns in headless Chromium (first render, server heap).
bench-ui:
	hack/bench-ui.sh

## ui-build: kubectl agentrun ui's script (kubectlplugin/ui/assets/app.js) from its pinned npm packages.
ui-build:
	hack/ui-build.sh

## demo-local: the real claude-code CLI against the mock model, through agentrun run.
demo-local: build setup
	hack/demo-local.sh

## lint: gofmt, go vet and golangci-lint (pinned, built into .cache/tools; .golangci.yml).
lint:
	gofmt -l . | grep -v '^.cache/' | (! grep .)
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/e2e/
	hack/golangci-lint.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

## generate: deepcopy code from the API markers (pinned controller-gen, built into .cache/tools).
generate:
	hack/k8s-generate.sh generate

## manifests: the CRD and RBAC (config/, and their copies in charts/agentrun) from the markers.
manifests:
	hack/k8s-generate.sh manifests

## docs: docs/api-reference.md from the Go types (pinned crd-ref-docs, built into .cache/tools),
## and docs/api.md's generated table of condition types and reasons.
docs:
	hack/api-docs.sh
	$(GO) test ./docs -run TestConditionsTable -update

## envtest: build or locate kube-apiserver, etcd and kubectl for the controller tests (10-14 min cold).
envtest:
	@hack/envtest-assets.sh

## otel-collector: build or locate the OpenTelemetry Collector the telemetry tests export to (a few minutes cold).
otel-collector:
	@hack/otel-collector.sh

## demo: a real single-node Kubernetes (hack/cluster.sh, unless KUBECONFIG is set), the images
## built without Docker, the operator installed with its Helm chart, one claude-code AgentRun
## against the mock model, printed with its status.
demo: setup
	hack/cluster-demo.sh up

## demo-down: stop what demo started (the cluster too, if demo started it).
demo-down:
	hack/cluster-demo.sh down

## test-e2e: the end-to-end tests on a cluster they bring up and down (test/e2e).
test-e2e: setup
	$(GO) test -tags e2e -count=1 -timeout 40m -v ./test/e2e/
