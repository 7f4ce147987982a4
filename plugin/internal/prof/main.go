// Command prof runs one engine export many times on the benchmark inputs, so the engine
// can be profiled as TinyGo builds it (same compiler, garbage collector and escape
// analysis as the wasm module) with native tools:
//
//	tinygo build -o /tmp/prof -gc=conservative -scheduler=none ./plugin/internal/prof
//	valgrind --tool=callgrind /tmp/prof decorate_tools 200
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/internal/benchinput"
	"github.com/stategate/stategate/plugin/engine"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: prof decorate_tools|decorate_result|check_limits N [config.json]")
		os.Exit(2)
	}
	n, _ := strconv.Atoi(os.Args[2])
	cfgPath := "abi/testdata/config/sample.json"
	if len(os.Args) > 3 {
		cfgPath = os.Args[3]
	}
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var fn abi.Function
	var in []byte
	switch os.Args[1] {
	case "decorate_tools":
		fn, in = abi.FuncDecorateTools, benchinput.ToolsList(1000)
	case "decorate_result":
		fn, in = abi.FuncDecorateResult, benchinput.CallResult(1<<20)
	case "check_limits":
		fn, in = abi.FuncCheckLimits, benchinput.CheckInput()
	default:
		fmt.Fprintln(os.Stderr, "unknown export", os.Args[1])
		os.Exit(2)
	}
	var out []byte
	out = eng.AppendCall(out[:0], fn, in)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		out = eng.AppendCall(out[:0], fn, in)
	}
	runtime.ReadMemStats(&after)
	fmt.Fprintf(os.Stderr, "%s: %d bytes out; per call %d allocations, %d bytes; %d collections in %d calls\n",
		os.Args[1], len(out), (after.Mallocs-before.Mallocs)/uint64(n), (after.TotalAlloc-before.TotalAlloc)/uint64(n), after.NumGC-before.NumGC, n)
}
