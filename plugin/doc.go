//go:build !wasip1

// Command plugin is the stategate engine as a Wasm module. It only builds for wasip1:
// `make build` compiles it with TinyGo (`make build.go` with standard Go).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "stategate plugin: build for wasip1 with `make build` (TinyGo)")
	os.Exit(2)
}
