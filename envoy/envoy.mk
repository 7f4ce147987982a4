# Envoy filter and Extism example targets. The main Makefile includes this file
# (`include envoy/envoy.mk`); BUILD and GO come from it, with the same defaults here.
BUILD ?= build
GO ?= go
ENVOY_WASM := $(BUILD)/stategate-envoy.wasm
ENVOY_SRC = $(shell find envoy exchange plugin abi internal/termsafe internal/wasmexport -name '*.go' -not -name '*_test.go' -not -path 'envoy/mosnhost/*') go.mod go.sum
EXTISM_NODE := examples/extism-node

.PHONY: build.envoy build.envoy.go test.envoy bench.envoy e2e.envoy node.extism-node

# The filter, from TinyGo (the proxy-wasm Go SDK builds with it: //go:wasmexport, and the
# exchange core's TinyGo seams in exchange/runtime_tinygo.go), with the engine module's
# flags and build/tinygo-envoy.mod (go.mod with the engine's nopretty replacement; a file of
# its own, so `make -j build build.envoy` never races on build/tinygo.mod), except -opt=2
# (faster; the filter's budget allows it) and -gc=precise (the collector skips the buffered
# bodies and the list memo instead of scanning them word by word: tools/list twice as fast).
# TinyGo is installed on first use (scripts/install-tinygo.sh). Size budget 1.5 MB (issue 31).
# The `malloc` export is pointed at `proxy_on_memory_allocate`: Envoy copies every value it
# hands the guest (headers, bodies, shared data) into memory from `malloc` when the module
# exports one, and TinyGo's `malloc` keeps each allocation alive until `free`, which Envoy
# never calls (RATIONALE.md, "The filter's malloc"; TestLongLivedVM_memoryIsFlat).
ENVOY_WASM_GO := $(BUILD)/stategate-envoy-go.wasm
ENVOY_TINYGO_FLAGS := $(subst -gc=conservative,-gc=precise,$(subst -opt=s,-opt=2,$(TINYGO_FLAGS)))

build.envoy: $(ENVOY_WASM)

$(ENVOY_WASM): $(ENVOY_SRC)
	@mkdir -p $(BUILD)
	@cp go.mod $(BUILD)/tinygo-envoy.mod && cp go.sum $(BUILD)/tinygo-envoy.sum
	@$(GO) mod edit -modfile=$(BUILD)/tinygo-envoy.mod -replace github.com/tidwall/pretty=$(CURDIR)/plugin/internal/nopretty
	@TINYGO=$$(scripts/install-tinygo.sh) && PATH="$$(dirname $$($(GO) env GOROOT)/bin/go):$$PATH" \
		GOFLAGS=-modfile=$(BUILD)/tinygo-envoy.mod $$TINYGO build $(ENVOY_TINYGO_FLAGS) -o $(BUILD)/stategate-envoy.tinygo.wasm ./envoy
	wasm-opt -Oz $(WASM_FEATURES) $(BUILD)/stategate-envoy.tinygo.wasm -o $@.tmp
	$(GO) run ./internal/wasmexport/cmd/point $@.tmp malloc proxy_on_memory_allocate
	@mv $@.tmp $@
	@scripts/check-size.sh $@ 1500000

# The same filter from standard Go (GOOS=wasip1): the fallback where TinyGo cannot be had
# (about 6 MB, 2-3x slower), and the baseline the filter's tests and benchmarks run beside
# the TinyGo module (runner wasm_go).
build.envoy.go: $(ENVOY_WASM_GO)

$(ENVOY_WASM_GO): $(ENVOY_SRC)
	@mkdir -p $(BUILD)
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags=-s -o $@ ./envoy

node.extism-node: $(EXTISM_NODE)/node_modules

$(EXTISM_NODE)/node_modules: $(EXTISM_NODE)/package.json $(EXTISM_NODE)/package-lock.json
	cd $(EXTISM_NODE) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The filter's tests in both modes (native Go and the built .wasm under proxytest), the
# sample configurations, and the Extism examples (over the exchange module; the Node one
# also runs the official client's field scripts, hence `node`); a missing artifact fails.
test.envoy: build.envoy build.envoy.go $(BUILD)/stategate.wasm $(BUILD)/stategate-exchange.wasm node node.extism-node
	STATEGATE_REQUIRE_ALL=1 $(GO) test ./envoy/... ./examples/... -count=1

# Per-request cost through the TinyGo .wasm under proxytest, beside the standard-Go .wasm,
# native Go and the engine alone.
bench.envoy: build.envoy build.envoy.go
	STATEGATE_REQUIRE_ALL=1 $(GO) test ./envoy/filter/ -run '^$$' -bench . -benchmem

# Real Envoy against the demo upstream; skips with a message where no envoy binary exists.
e2e.envoy: build.envoy
	GO=$(GO) envoy/e2e.sh
