// Command point rewrites a wasm module in place so that its export NAME names the function
// its export TARGET names (wasmexport.Point):
//
//	go run ./internal/wasmexport/cmd/point FILE NAME TARGET
package main

import (
	"fmt"
	"os"

	"github.com/stategate/stategate/internal/wasmexport"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: point FILE NAME TARGET")
		os.Exit(2)
	}
	file, name, target := os.Args[1], os.Args[2], os.Args[3]
	b, err := os.ReadFile(file)
	if err == nil {
		b, err = wasmexport.Point(b, name, target)
	}
	if err == nil {
		err = os.WriteFile(file, b, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "point: %s: %v\n", file, err)
		os.Exit(1)
	}
}
