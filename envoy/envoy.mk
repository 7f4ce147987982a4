# Envoy filter and Extism example targets. The main Makefile includes this file
# (`include envoy/envoy.mk`); BUILD and GO come from it, with the same defaults here.
BUILD ?= build
GO ?= go
ENVOY_WASM := $(BUILD)/stategate-envoy.wasm
ENVOY_SRC = $(shell find envoy exchange plugin abi internal/termsafe -name '*.go' -not -name '*_test.go') go.mod go.sum
EXTISM_NODE := examples/extism-node

.PHONY: build.envoy test.envoy bench.envoy e2e.envoy node.extism-node

# The filter, from standard Go (the proxy-wasm Go SDK targets Go >= 1.24, not TinyGo).
build.envoy: $(ENVOY_WASM)

$(ENVOY_WASM): $(ENVOY_SRC)
	@mkdir -p $(BUILD)
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags=-s -o $@ ./envoy

node.extism-node: $(EXTISM_NODE)/node_modules

$(EXTISM_NODE)/node_modules: $(EXTISM_NODE)/package.json $(EXTISM_NODE)/package-lock.json
	cd $(EXTISM_NODE) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The filter's tests in both modes (native Go and the built .wasm under proxytest), the
# sample configurations, and the Extism examples (over the exchange module; the Node one
# also runs the official client's field scripts, hence `node`); a missing artifact fails.
test.envoy: build.envoy $(BUILD)/stategate.wasm $(BUILD)/stategate-exchange.wasm node node.extism-node
	STATEGATE_REQUIRE_ALL=1 $(GO) test ./envoy/... ./examples/... -count=1

# Per-request cost through the .wasm under proxytest, beside native Go and the engine alone.
bench.envoy: build.envoy
	STATEGATE_REQUIRE_ALL=1 $(GO) test ./envoy/filter/ -run '^$$' -bench . -benchmem

# Real Envoy against the demo upstream; skips with a message where no envoy binary exists.
e2e.envoy: build.envoy
	GO=$(GO) envoy/e2e.sh
