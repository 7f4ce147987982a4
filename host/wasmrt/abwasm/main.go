//go:build linux

// Command abwasm compares builds of the plugin module on one export: it runs each module
// through the project's host in turn, round after round, and reports per module the CPU
// time of its calling thread per call, the least of its rounds. Thread CPU time and the
// least of interleaved rounds hide most of what other processes on the machine do to
// wall-clock benchmarks (a fuzzer or a test run on the other core), so a change of a few
// per cent shows between two builds made minutes apart:
//
//	make build && cp build/stategate.wasm /tmp/a.wasm   # before the change
//	make build && cp build/stategate.wasm /tmp/b.wasm   # after it
//	go run ./internal/abwasm -fn decorate_tools /tmp/a.wasm /tmp/b.wasm
//
// The inputs are the benchmarks' (internal/benchinput); the figures for docs/performance.md
// stay the `make bench` ones.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/stategate/stategate/internal/benchinput"
	"github.com/tidwall/gjson"
)

func main() {
	fnName := flag.String("fn", "decorate_tools", "export: decorate_tools (1000 tools), decorate_result (1 MB), check_limits (1 KB), transition (a stored snapshot)")
	cfgPath := flag.String("config", "abi/testdata/config/sample.json", "plugin configuration")
	rounds := flag.Int("rounds", 11, "rounds (the first is a warm-up)")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: abwasm [-fn export] [-config file] [-rounds n] module.wasm...")
		os.Exit(2)
	}
	if err := run(*fnName, *cfgPath, *rounds, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "abwasm:", err)
		os.Exit(1)
	}
}

func run(fnName, cfgPath string, rounds int, modules []string) error {
	var fn abi.Function
	var in []byte
	calls := 60
	switch fnName {
	case "decorate_tools":
		fn, in = abi.FuncDecorateTools, benchinput.ToolsList(1000)
	case "decorate_result":
		fn, in = abi.FuncDecorateResult, benchinput.CallResult(1<<20)
	case "check_limits":
		fn, in, calls = abi.FuncCheckLimits, benchinput.CheckInput(), 20000
	case "transition":
		fn, calls = abi.FuncTransition, 20000 // the input needs a snapshot: made below
	default:
		return fmt.Errorf("unknown export %q", fnName)
	}
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	ctx := context.Background()
	insts := make([]*wasmrt.Instance, len(modules))
	for k, path := range modules {
		wasm, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rt, err := wasmrt.New(ctx, wasm, wasmrt.Options{})
		if err != nil {
			return err
		}
		defer rt.Close(ctx)
		if insts[k], err = rt.Instantiate(ctx, cfg); err != nil {
			return err
		}
	}
	if fn == abi.FuncTransition {
		if in, err = transitionInput(ctx, insts[0]); err != nil {
			return err
		}
	}
	runtime.LockOSThread()
	best := make([]time.Duration, len(modules))
	var out []byte
	for r := 0; r < rounds; r++ {
		for k, inst := range insts {
			start := threadCPU()
			for i := 0; i < calls; i++ {
				if out, err = inst.AppendCall(ctx, out[:0], fn, in); err != nil {
					return fmt.Errorf("%s: %w", modules[k], err)
				}
			}
			d := threadCPU() - start
			if r > 0 && (best[k] == 0 || d < best[k]) {
				best[k] = d
			}
		}
	}
	for k, path := range modules {
		fmt.Printf("%-40s %10v CPU per call (least of %d rounds of %d)\n", path, best[k]/time.Duration(calls), rounds-1, calls)
	}
	return nil
}

// transitionInput is a moving call of sample.json's cart.add_item as the gateway sends it
// once the workflow has a snapshot (BenchmarkTransition/bound_stored).
func transitionInput(ctx context.Context, inst *wasmrt.Instance) ([]byte, error) {
	const key = "stategate/v1/checkout/session//s1"
	out, err := inst.Call(ctx, abi.FuncTransition, []byte(`{"tool":"cart.add_item","session":"s1","states":{"`+key+`":null}}`))
	if err != nil {
		return nil, err
	}
	snap := gjson.GetBytes(out, "states."+gjson.Escape(key)).Raw
	if snap == "" {
		return nil, fmt.Errorf("transition wrote no snapshot: %s", out)
	}
	return []byte(`{"session":"s1","principal":"","protocolVersion":"2025-06-18","tool":"cart.add_item","arguments":{"id":"r1","qty":2},"isError":false,"states":{"` + key + `":` + snap + `}}`), nil
}

// threadCPU is the calling thread's CPU time (user and system).
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil { // 1: RUSAGE_THREAD
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
