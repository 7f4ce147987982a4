# stategate make targets. `make run` sets up and runs the demo; `make test` runs every test.
SHELL := /bin/bash
GO ?= go
BUILD := build
PLUGIN_SRC := $(shell find plugin abi -path plugin/built -prune -o -name '*.go' -not -name '*_test.go' -print) go.mod go.sum
# The module the stategate binary embeds (plugin/built): a committed copy of $(BUILD)/stategate.wasm.
EMBEDDED := plugin/built/stategate.wasm
TINYGO_FLAGS := -target=wasip1 -buildmode=c-shared -no-debug -scheduler=none -gc=conservative -panic=trap -opt=s
WASM_FEATURES := --enable-bulk-memory --enable-sign-ext --enable-nontrapping-float-to-int --enable-mutable-globals

# (docker-mcp: Docker's MCP gateway for the end-to-end tests behind it, internal/dockermcp)
.PHONY: build build.exchange build.httpwasm build.traefik traefik build.go build.debug build.cli tinygo docker-mcp test check.embedded browser oci bench bench.peers fuzz fuzz.long check run clean node

build: $(BUILD)/stategate.wasm

# TinyGo is installed on first use (scripts/install-tinygo.sh, idempotent, ~1 min once).
# The module is built with build/tinygo.mod: go.mod with github.com/tidwall/pretty replaced
# by plugin/internal/nopretty (gjson's unused @pretty modifier would otherwise bring
# encoding/json into the module: about 150 KB; RATIONALE.md). Budget 400,000 -> 405,000 B
# for issue 41 (403,258 B: the approvals list's parser and checks, about 4.4 KB of it, and
# check_limits' approval, explain and unmet).
$(BUILD)/stategate.wasm: $(PLUGIN_SRC)
	@mkdir -p $(BUILD)
	@cp go.mod $(BUILD)/tinygo.mod && cp go.sum $(BUILD)/tinygo.sum
	@$(GO) mod edit -modfile=$(BUILD)/tinygo.mod -replace github.com/tidwall/pretty=$(CURDIR)/plugin/internal/nopretty
	@TINYGO=$$(scripts/install-tinygo.sh) && PATH="$$(dirname $$($(GO) env GOROOT)/bin/go):$$PATH" \
		GOFLAGS=-modfile=$(BUILD)/tinygo.mod $$TINYGO build $(TINYGO_FLAGS) -o $(BUILD)/stategate.tinygo.wasm ./plugin
	wasm-opt -Oz $(WASM_FEATURES) $(BUILD)/stategate.tinygo.wasm -o $@
	@scripts/check-size.sh $@ 405000
	@cmp -s $@ $(EMBEDDED) || { cp $@ $(EMBEDDED) && echo "$(EMBEDDED) updated from $@: commit it"; }

# The exchange module: the engine and the exchange core (exchange/, exchange/flow) in one
# Extism plugin, with the exchange exports (abi/ABI.md, "The exchange exports") beside the
# engine's. A second module: the exchange costs more than the engine module's budget
# (RATIONALE.md, "The exchange in the module"). Budget 800,000 -> 810,000 B for issue 38
# (803,476 B: answers a client could read otherwise withheld, task records by principal);
# 810,000 -> 860,000 B for human approval (issue 41: exchange/approval, 23 KB, and the
# engine's approvals, 5 KB) and the exchange's split into packages (about 5 KB);
# 860,000 -> 862,000 B for a server that asks too (issue 41: the approval's continuation,
# 2.2 KB); 862,000 -> 864,000 B for the services structs that took tool health, the
# operator's hold, the tally and event stamping out of the root package (issue 39: 1.3 KB;
# 862,181 B then).
EXCHANGE_SRC := $(PLUGIN_SRC) $(shell find exchange -name '*.go' -not -name '*_test.go' -not -path 'exchange/exchangetest/*')
build.exchange: $(BUILD)/stategate-exchange.wasm

$(BUILD)/stategate-exchange.wasm: $(EXCHANGE_SRC)
	@mkdir -p $(BUILD)
	@cp go.mod $(BUILD)/tinygo.mod && cp go.sum $(BUILD)/tinygo.sum
	@$(GO) mod edit -modfile=$(BUILD)/tinygo.mod -replace github.com/tidwall/pretty=$(CURDIR)/plugin/internal/nopretty
	@TINYGO=$$(scripts/install-tinygo.sh) && PATH="$$(dirname $$($(GO) env GOROOT)/bin/go):$$PATH" \
		GOFLAGS=-modfile=$(BUILD)/tinygo.mod $$TINYGO build $(TINYGO_FLAGS) -o $(BUILD)/stategate-exchange.tinygo.wasm ./exchange/module
	wasm-opt -Oz $(WASM_FEATURES) $(BUILD)/stategate-exchange.tinygo.wasm -o $@
	@scripts/check-size.sh $@ 864000

# The http-wasm build: the engine and the exchange core behind http-wasm's handle_request
# and handle_response (httpwasm/), for Traefik's and Dapr's http-wasm middleware. A command
# module (-buildmode=wasi-legacy): Dapr calls _start only, Traefik calls either. Budget
# 850,000 -> 890,000 B with the exchange module's (human approval, the exchange's packages).
HTTPWASM_SRC := $(EXCHANGE_SRC) $(shell find httpwasm -name '*.go' -not -name '*_test.go')
HTTPWASM_FLAGS := -target=wasip1 -buildmode=wasi-legacy -no-debug -scheduler=none -gc=conservative -panic=trap -opt=s
build.httpwasm: $(BUILD)/stategate-httpwasm.wasm

$(BUILD)/stategate-httpwasm.wasm: $(HTTPWASM_SRC)
	@mkdir -p $(BUILD)
	@cp go.mod $(BUILD)/tinygo.mod && cp go.sum $(BUILD)/tinygo.sum
	@$(GO) mod edit -modfile=$(BUILD)/tinygo.mod -replace github.com/tidwall/pretty=$(CURDIR)/plugin/internal/nopretty
	@TINYGO=$$(scripts/install-tinygo.sh) && PATH="$$(dirname $$($(GO) env GOROOT)/bin/go):$$PATH" \
		GOFLAGS=-modfile=$(BUILD)/tinygo.mod $$TINYGO build $(HTTPWASM_FLAGS) -o $(BUILD)/stategate-httpwasm.tinygo.wasm ./httpwasm
	wasm-opt -Oz $(WASM_FEATURES) $(BUILD)/stategate-httpwasm.tinygo.wasm -o $@
	@scripts/check-size.sh $@ 890000

# Traefik's local plugin folder (examples/traefik): plugins-local/src/MODULE/ with the
# manifest and the http-wasm build as plugin.wasm. Run Traefik from $(BUILD)/traefik.
TRAEFIK_PLUGIN := $(BUILD)/traefik/plugins-local/src/github.com/stategate/stategate
build.traefik: build.httpwasm
	@mkdir -p $(TRAEFIK_PLUGIN)
	cp examples/traefik/.traefik.yml $(TRAEFIK_PLUGIN)/.traefik.yml
	cp $(BUILD)/stategate-httpwasm.wasm $(TRAEFIK_PLUGIN)/plugin.wasm

# Traefik v3.6.12 built from the Go module proxy into ~/.cache/stategate/traefik
# (scripts/install-traefik.sh: about 10 min once, instant after; never in the repo).
traefik:
	@scripts/install-traefik.sh >/dev/null

# What the binary embeds is what the source builds to: after `make build`, the committed
# $(EMBEDDED) must be unchanged (a fresh clone builds the module and compares).
check.embedded: build
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		git ls-files --error-unmatch $(EMBEDDED) >/dev/null 2>&1 && git diff --quiet HEAD -- $(EMBEDDED) || { echo "$(EMBEDDED) is not what \`make build\` makes from the source: commit the rebuilt module"; git diff --stat HEAD -- $(EMBEDDED); exit 1; }; \
		echo "$(EMBEDDED): the committed module is what the source builds to ($$(sha256sum < $(EMBEDDED) | cut -c1-16)...)"; \
	else echo "check.embedded: not a git work tree, nothing to compare"; fi

# The same module with panic messages and debug names, for diagnosing a trap (not size-capped).
build.debug:
	@mkdir -p $(BUILD)
	@TINYGO=$$(scripts/install-tinygo.sh) && $$TINYGO build -target=wasip1 -buildmode=c-shared -scheduler=none -gc=conservative -o $(BUILD)/stategate-debug.wasm ./plugin

# Fallback where TinyGo cannot be had: the same module from standard Go (larger, slower).
build.go: $(BUILD)/stategate-go.wasm

$(BUILD)/stategate-go.wasm: $(PLUGIN_SRC)
	@mkdir -p $(BUILD)
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags=-s -o $@ ./plugin

tinygo:
	@scripts/install-tinygo.sh

# Docker's MCP gateway, built from the Go module proxy into ~/.cache/stategate/docker-mcp
# (scripts/install-docker-mcp.sh: about 1.5 min once, instant after; never in the repo).
docker-mcp:
	@scripts/install-docker-mcp.sh >/dev/null

# The Node Extism host of the conformance kit, the official TypeScript MCP client test of
# cut results (testharness/tsclient), the official MCP conformance suite and the xstate
# reference of the statechart differential test.
node: testharness/node/node_modules testharness/tsclient/node_modules testharness/conformance/node_modules testharness/field/node_modules testharness/xstate/node_modules

# One npm project a folder, installed as its lockfile says: testharness/node (the Node host),
# testharness/tsclient (the official TypeScript client on cut results), testharness/field
# (the official TypeScript client, server-everything and a stateless official-SDK server for
# the field tests, testharness/field_test.go), testharness/conformance (the official MCP
# conformance suite, its reference server's SDK and server-everything,
# testharness/conformance_mcp_test.go), testharness/xstate (xstate 5.33.x, the reference the
# engine's statecharts are held to, testharness/xstate_test.go).
testharness/%/node_modules: testharness/%/package.json testharness/%/package-lock.json
	cd testharness/$* && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# Debian's Chromium for the status page's browser tests (chromedp), installed when missing.
browser:
	@scripts/install-debian.sh chromium

# gofmt, vet and go.mod tidiness, then every test on the built artifacts (a missing artifact
# fails instead of skipping), then
# a short run of every fuzz target.
test: check build check.embedded build.exchange build.httpwasm build.traefik build.go build.envoy build.envoy.go oci node node.extism-node docker-mcp traefik browser
	STATEGATE_REQUIRE_ALL=1 $(GO) test ./... -count=1
	scripts/fuzz.sh $(or $(FUZZTIME),5s)

# Every fuzz target (scripts/fuzz.sh finds them), FUZZTIME each; FUZZ=regex picks targets
# by "package/FuzzName".
fuzz:
	scripts/fuzz.sh $(or $(FUZZTIME),60s) '$(or $(FUZZ),.)'

# The long proof run: every target for FUZZTIME (default 10m) each, going on past a failure,
# with executions per target; failing inputs stay under the package's testdata/fuzz as
# regression cases.
fuzz.long:
	scripts/fuzz.sh --keep-going $(or $(FUZZTIME),10m) '$(or $(FUZZ),.)'

bench: build build.envoy build.envoy.go build.exchange
	STATEGATE_REQUIRE_ALL=1 $(GO) test ./testharness/ ./host/ -run '^$$' -bench . -benchmem
	STATEGATE_REQUIRE_ALL=1 $(GO) test ./envoy/filter/ -run '^$$' -bench . -benchmem -benchtime 1000x
	STATEGATE_REQUIRE_ALL=1 $(GO) test ./host/gateway/ -run '^$$' -bench 'Gateway$$|GatewayParallel' -benchtime 2000x
	STATEGATE_REQUIRE_ALL=1 $(GO) test ./host/gateway/ -run '^$$' -bench GatewayPaths -benchtime 1x
	STATEGATE_REQUIRE_ALL=1 $(GO) test ./host/gateway/ -run '^$$' -bench RoundTrips -benchtime 2000x
	STATEGATE_REQUIRE_ALL=1 $(GO) test ./examples/extism-go/ -run '^$$' -bench Exchange -benchtime 2000x

# stategate side by side with the MCP gateways users would pick instead (testharness/peers):
# one upstream, one load generator, ratios to a plain reverse proxy in the same run. Long
# (several minutes; the first run also builds docker-mcp and thv from the Go module proxy and
# installs the npm proxies into ~/.cache/stategate): not part of `make test`. A peer that
# cannot be had is printed as "not run" with the reason.
bench.peers: build
	$(GO) test ./testharness/peers/ -run '^$$' -bench Peers -benchtime 1x -timeout 60m

check:
	@test -z "$$(gofmt -l .)" || (gofmt -l . ; echo 'gofmt: files above need formatting'; exit 1)
	$(GO) vet ./...
	$(GO) mod tidy -diff

# The demo needs only Go: the binary carries the committed module (plugin/built), which
# `make test` checks is what the source builds to; no TinyGo on the way to the first output.
# The binary is built without cgo, as the OCI image's is: static, and no C compiler on the
# way either.
run: build.cli
	$(BUILD)/stategate demo

build.cli:
	@mkdir -p $(BUILD)
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -o $(BUILD)/stategate ./host/cmd/stategate

# OCI image layouts under build/oci (go-containerregistry, no Docker daemon): envoy-filter (the
# Envoy filter as a Wasm image, oci variant), envoy-filter-compat (the same as an ordinary
# image holding plugin.wasm) and gateway (the static stategate binary, non-root). Push one
# with `crane push build/oci/gateway REGISTRY/stategate:TAG`.
OCI_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
OCI_ARCH ?= $(shell $(GO) env GOARCH)

oci: build.envoy build
	@mkdir -p $(BUILD)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(OCI_ARCH) $(GO) build -trimpath -ldflags=-s -buildvcs=auto -o $(BUILD)/stategate-static ./host/cmd/stategate
	$(GO) run ./internal/ocibuild/writeoci -filter $(ENVOY_WASM) -gateway $(BUILD)/stategate-static -arch $(OCI_ARCH) -version $(OCI_VERSION) -out $(BUILD)/oci

clean:
	rm -rf $(BUILD)

include envoy/envoy.mk
