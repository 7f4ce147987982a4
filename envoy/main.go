// Command stategate-envoy is the stategate proxy-wasm HTTP filter for Envoy (and Envoy-based
// gateways: Envoy Gateway, Istio). Build it with standard Go, not TinyGo:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/stategate-envoy.wasm ./envoy
//
// The plugin configuration is the stategate configuration document; the optional VM
// configuration holds the filter's own settings (filter.Settings). See README.md.
package main

import (
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"

	"github.com/stategate/stategate/envoy/filter"
)

func main() {}

func init() { proxywasm.SetVMContext(filter.NewVMContext()) }
