# platform-apiserver: see README.md. Every target works on a fresh machine;
# the control plane binaries are built once into ~/.cache/platform-apiserver.

GO        ?= go
BIN       := _output/bin
FUZZTIME  ?= 10s
BENCHTIME ?= 5x

.PHONY: all help build deps tools run test test-all test-slow unit integration verify lint generate update-schema bench fuzz clean image image-push image-dispatcher image-dispatcher-push

# The linters are Go tools pinned in their own module (hack/lint/go.mod), so
# their dependencies never enter the server's go.mod.
LINT_TOOL := $(GO) tool -modfile=hack/lint/go.mod

## all: the default target: build
all: build

## help: list the targets with their descriptions
help:
	@awk 'match($$0, /^## [A-Za-z0-9_-]+:/) { printf "  %-21s %s\n", substr($$0, 4, RLENGTH - 4), substr($$0, RLENGTH + 2) }' $(firstword $(MAKEFILE_LIST))

## build: the platform-apiserver binary and the kubectl plugin kubectl-platform in _output/bin
## (put _output/bin on your PATH and kubectl runs it as kubectl platform)
build:
	$(GO) build -o $(BIN)/platform-apiserver ./cmd/apiserver
	$(GO) build -o $(BIN)/kubectl-platform ./cmd/kubectl-platform

## deps: PostgreSQL 15, shellcheck and promtool (package prometheus) from Debian's packages, if missing
deps:
	@hack/install-deps.sh

## tools: etcd, kube-apiserver, kube-controller-manager, kubectl v1.37.2, kwok, metrics-server and helm
## (cached; reused from KUBEBUILDER_ASSETS or PATH when the versions match)
tools:
	@hack/build-tools.sh all

# The images: IMAGE names the server's, DISPATCHER_IMAGE the dispatcher's (the
# archive's tag, the registry reference to push to); PLATFORMS lists os/arch
# pairs (PLATFORMS=linux/amd64 builds one). --binary names the binary in the
# image: its entrypoint /usr/local/bin/<binary> and the archive <binary>.tar.
IMAGE     ?= platform-apiserver:dev
PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_DIR ?= _output/image
DISPATCHER_IMAGE     ?= platform-kueue-dispatcher:dev
DISPATCHER_IMAGE_DIR ?= $(IMAGE_DIR)/kueue-dispatcher

## image: a static, nonroot OCI image without a container engine: $(IMAGE_DIR)/platform-apiserver.tar
## (docker load, podman load, ctr import) and the OCI layout $(IMAGE_DIR)/oci
image:
	$(GO) run ./hack/image build --binary platform-apiserver --package ./cmd/apiserver --image $(IMAGE) --platforms $(PLATFORMS) --output $(IMAGE_DIR)

## image-push: push what make image built to IMAGE (e.g. IMAGE=registry.example.com/platform/platform-apiserver:v0.1.0)
## with the credentials of docker login / podman login
image-push:
	$(GO) run ./hack/image push --image $(IMAGE) --from $(IMAGE_DIR)

## image-dispatcher: the platform-kueue-dispatcher image, as make image builds the server's: $(DISPATCHER_IMAGE_DIR)/platform-kueue-dispatcher.tar
## and the OCI layout $(DISPATCHER_IMAGE_DIR)/oci (DISPATCHER_IMAGE_DIR defaults to $(IMAGE_DIR)/kueue-dispatcher), tagged DISPATCHER_IMAGE
image-dispatcher:
	$(GO) run ./hack/image build --binary platform-kueue-dispatcher --package ./cmd/kueue-dispatcher --image $(DISPATCHER_IMAGE) --platforms $(PLATFORMS) --output $(DISPATCHER_IMAGE_DIR)

## image-dispatcher-push: push what make image-dispatcher built to DISPATCHER_IMAGE (e.g. DISPATCHER_IMAGE=registry.example.com/platform/platform-kueue-dispatcher:v0.1.0)
## with the credentials of docker login / podman login
image-dispatcher-push:
	$(GO) run ./hack/image push --image $(DISPATCHER_IMAGE) --from $(DISPATCHER_IMAGE_DIR)

## run: a local control plane, Postgres and platform-apiserver in the foreground (Ctrl-C stops it)
run: deps build
	$(GO) run ./hack/localup --platform-apiserver-binary=$(abspath $(BIN))/platform-apiserver

# The slow tier: integration tests that need real wall time (a ten-minute
# soak, grace periods and staleness bounds, real Prometheus alerts, the image
# installed in a chroot, hung and failed-over databases, two releases side by
# side). make test skips them, make test-slow runs only them; CI runs both.
# hack/verify-test-tiers.sh checks that each names a test of test/integration.
SLOW_TESTS := TestDiscoveryQuietSoak|TestHungMigratorLetsTheLockGo|TestMonitoring|TestInstall|TestMemberFreshness|TestRegistryHungPrimary|TestRegistryHungStandby|TestRegistryFailover|TestRollingUpgradeSideBySide|TestKueueDispatcher
# How many parallel integration tests run at once: most of their time is
# waiting for a condition, not computing, so more than the cores.
TEST_PARALLEL ?= 4

## test: the fast tier, every unit and integration test but SLOW_TESTS, against real Postgres, etcd and kube-apiserver
## (one test: go test -count=1 -run '^TestWatch$' ./test/integration/)
test: deps tools
	$(GO) test -count=1 -timeout 30m -parallel $(TEST_PARALLEL) -skip '^($(SLOW_TESTS))$$' ./...

## test-all: every test: the fast tier, then the slow tier (about 22 minutes; CI runs the two as separate steps)
test-all: test test-slow

## test-slow: the slow tier, SLOW_TESTS only (about 12 minutes, most of it a soak and alerts waiting)
test-slow: deps tools
	@hack/build-tools.sh kueue >/dev/null
	$(GO) test -count=1 -timeout 60m -parallel $(TEST_PARALLEL) -run '^($(SLOW_TESTS))$$' ./test/integration/

## unit: tests that need no control plane (Postgres is still real)
unit: deps
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /test/)

## verify: every check CI runs besides the tests: gofmt, vet, tidy, generated code, the registry's schema.sql, the alerts (promtool) and lint
verify:
	hack/verify-gofmt.sh
	$(GO) vet ./...
	hack/verify-gomod.sh
	hack/verify-codegen.sh
	hack/verify-schema.sh
	hack/verify-alerts.sh
	hack/verify-docs-identifiers.sh
	hack/verify-test-tiers.sh
	@$(MAKE) --no-print-directory lint

## lint: golangci-lint (.golangci.yml), logcheck (structured, contextual klog) and shellcheck (hack/, .ci/)
lint:
	$(LINT_TOOL) golangci-lint run ./...
	$(LINT_TOOL) logcheck -check-contextual -config hack/lint/logcheck.conf ./...
	hack/verify-shellcheck.sh

## generate: regenerate deepcopy, conversion, OpenAPI, clientset, listers and informers
generate:
	hack/update-codegen.sh

## update-schema: regenerate pkg/registry/postgres/schema/schema.sql from a throwaway PostgreSQL 15, migrated from empty
update-schema: deps
	hack/update-schema.sh

## fuzz: run each fuzz target for FUZZTIME
fuzz:
	hack/fuzz.sh $(FUZZTIME)

## bench: every benchmark (list/get and watch side by side with kube-apiserver, discovery, the 20-member fleet, reads from a standby and failover, time to fresh after faults), see docs/benchmarks.md; over an hour
bench: deps tools
	$(GO) test -count=1 -timeout 150m -run '^$$' -bench . -benchtime $(BENCHTIME) ./test/bench/

## clean: remove _output
clean:
	rm -rf _output
