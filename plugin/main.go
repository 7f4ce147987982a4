//go:build wasip1

// Command plugin is the stategate engine as a Wasm module: an Extism plugin (the named
// exports, I/O through extism:host/env) that also offers a zero-copy raw entry for the
// project's own wazero host and a stdio entry for Extism hosts that give it stdin and
// stdout. Every export is plugin/exports'. Build with `make build` (TinyGo).
package main

import _ "github.com/stategate/stategate/plugin/exports"

func main() {}
