// Command stategate-envoy is the stategate proxy-wasm HTTP filter for Envoy (and Envoy-based
// gateways: Envoy Gateway, Istio). `make build.envoy` builds it with TinyGo
// (build/stategate-envoy.wasm, under 1 MB); `make build.envoy.go` builds the same filter
// with standard Go, the fallback:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/stategate-envoy-go.wasm ./envoy
//
// The plugin configuration is the stategate configuration document; the optional VM
// configuration holds the filter's own settings (filter.Settings). See docs/envoy.md.
package main

import (
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"

	"github.com/stategate/stategate/envoy/filter"
)

func main() {}

func init() { proxywasm.SetVMContext(filter.NewVMContext()) }
