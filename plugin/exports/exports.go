//go:build wasip1

// Package exports is the engine's Wasm glue, one for every module that carries the engine
// (plugin/main.go: build/stategate.wasm; exchange/module: build/stategate-exchange.wasm).
// Importing it is what exports, from the importing module:
//
//   - the engine's six Extism exports (abi.Functions), the engine built on the first call
//     from the Extism config key abi.ConfigKey and kept for the life of the instance;
//   - the raw entry (abi.ExportRawAlloc, abi.ExportRawCall) for hosts that call a module's
//     exports and write its memory themselves (the project's wazero host, host/wasmrt);
//   - the stdio entry (abi.ExportStdioCall), an Extism export whose input and output go
//     through WASI stdin and stdout, for Extism hosts that give the module those streams
//     but not its memory (the Extism Go SDK: examples/extism-go).
//
// The raw and stdio entries move a call's input and output with one copy each, where
// go-pdk's Input and Output take one host call per 8 bytes (RATIONALE.md). A module adds
// functions of its own with Register (the exchange module: abi.ExchangeFunctions); every
// entry runs the same code for a function, so outputs are byte-identical whichever is used.
package exports

import (
	"unsafe"

	"github.com/extism/go-pdk"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
)

var (
	eng    *engine.Engine
	engErr []byte
	cfgRaw []byte
	ready  bool
	onLoad func()
)

// Load builds the engine on the first call and then runs the function given to OnLoad;
// later calls do nothing. Every entry calls it before a function runs.
func Load() {
	if ready {
		return
	}
	ready = true
	growHeap()
	cfg, _ := pdk.GetConfig(abi.ConfigKey)
	cfgRaw = []byte(cfg)
	e, err := engine.New(cfgRaw)
	if err != nil {
		engErr = engine.ConfigError(err)
		return
	}
	eng = e
	if onLoad != nil {
		onLoad()
	}
}

// OnLoad sets what Load runs once the engine is built (not when its configuration fails).
func OnLoad(f func()) { onLoad = f }

// Engine is the engine Load built, or nil when the configuration failed (ConfigError).
func Engine() *engine.Engine { return eng }

// ConfigError is the engine's INVALID_CONFIG document when the configuration failed.
func ConfigError() []byte { return engErr }

// Config is the configuration as the host gave it.
func Config() []byte { return cfgRaw }

// A Handler answers one call of a module's own function. It may keep in: every call gets
// an input buffer of its own.
type Handler func(in []byte) []byte

var handlers []struct {
	fn abi.Function
	h  Handler
}

// Register adds a function of the module's own, answered by every entry; its Extism export
// is the module's (`//go:wasmexport NAME` calling Extism(fn)).
func Register(fn abi.Function, h Handler) {
	handlers = append(handlers, struct {
		fn abi.Function
		h  Handler
	}{fn, h})
}

// run answers fn on in, appending to dst where the function allows. A Handler gets in
// itself when the caller owns it, else a copy (in is a buffer the entry reuses).
func run(dst []byte, fn abi.Function, in []byte, owned bool) []byte {
	Load()
	for _, e := range handlers {
		if e.fn == fn {
			if !owned {
				in = append([]byte(nil), in...)
			}
			return e.h(in)
		}
	}
	if eng == nil {
		if fn == abi.FuncCheckConfig {
			return append(dst, engine.CheckConfig(cfgRaw)...)
		}
		return append(dst, engErr...)
	}
	return eng.AppendCall(dst, fn, in)
}

// byName is the registered or engine function exported as name, or 0.
func byName(name []byte) abi.Function {
	for _, e := range handlers {
		if e.fn.Name() == string(name) {
			return e.fn
		}
	}
	fn, _ := abi.FunctionByName(string(name))
	return fn
}

// Extism answers fn through the Extism kernel: the input from pdk.Input, the output by
// pdk.Output. Every Extism export of a function is `return exports.Extism(fn)`.
func Extism(fn abi.Function) int32 {
	pdk.Output(run(nil, fn, pdk.Input(), true))
	return 0
}

//go:wasmexport decorate_tools
func decorateTools() int32 { return Extism(abi.FuncDecorateTools) }

//go:wasmexport decorate_result
func decorateResult() int32 { return Extism(abi.FuncDecorateResult) }

//go:wasmexport transition
func transition() int32 { return Extism(abi.FuncTransition) }

//go:wasmexport check_limits
func checkLimits() int32 { return Extism(abi.FuncCheckLimits) }

//go:wasmexport check_config
func checkConfig() int32 { return Extism(abi.FuncCheckConfig) }

//go:wasmexport tool_health
func toolHealth() int32 { return Extism(abi.FuncToolHealth) }

// Raw entry: the host writes the input into the buffer stategate_alloc returns, then
// stategate_call answers (outPtr<<32 | outLen). Both buffers are reused across calls, so
// a steady stream of calls allocates nothing; a buffer grown past rawKeep is released
// after use.
//
// rawKeep is high on purpose: linear memory never shrinks, so releasing a buffer gives
// nothing back to the host, while allocating a large one afresh on every call fragments
// TinyGo's heap until it outgrows the memory limit (10 MB results: the memory doubled to
// 256 MB within six calls and the guest trapped on the twelfth with a 4 MB rawKeep).
var rawIn, rawOut []byte

const rawKeep = 64 << 20

var one [1]byte

// rawMax bounds one raw input: above it stategate_alloc answers 0 instead of trapping on
// out-of-memory.
const rawMax = 256 << 20

//go:wasmexport stategate_alloc
func rawAlloc(size int32) int32 {
	if size < 0 || size > rawMax {
		return 0
	}
	if int(size) > cap(rawIn) {
		rawIn = make([]byte, size)
	}
	rawIn = rawIn[:size]
	if size == 0 {
		return int32(uintptr(unsafe.Pointer(&one[0])))
	}
	return int32(uintptr(unsafe.Pointer(&rawIn[0])))
}

//go:wasmexport stategate_call
func rawCall(fn, ptr, length int32) int64 {
	var in []byte
	if length > 0 && int(length) <= len(rawIn) && ptr == int32(uintptr(unsafe.Pointer(&rawIn[0]))) {
		in = rawIn[:length]
	} else if length != 0 {
		rawOut = append(rawOut[:0], `{"error":{"code":"INVALID_INPUT","message":"stategate_call: input was not written to the buffer from stategate_alloc"}}`...)
		return pack(rawOut)
	}
	rawOut = answer(fn, in)
	return pack(rawOut)
}

// answer runs fn on in (rawIn or a part of it) into rawOut, releasing buffers grown past rawKeep.
func answer(fn int32, in []byte) []byte {
	if cap(rawOut) > rawKeep {
		rawOut = nil
	}
	out := run(rawOut[:0], abi.Function(fn), in, false)
	if cap(rawIn) > rawKeep {
		rawIn = nil
	}
	return out
}

func pack(out []byte) int64 {
	if len(out) == 0 {
		return 0
	}
	return int64(uint32(uintptr(unsafe.Pointer(&out[0]))))<<32 | int64(uint32(len(out)))
}

// heapReserve is heap the guest takes once and gives back at once, so that TinyGo keeps it
// as free space: with the large input and output buffers live, a heap without room to
// spare is collected on nearly every call, and each collection scans those buffers.
const heapReserve = 4 << 20

var reserve []byte

func growHeap() {
	reserve = make([]byte, heapReserve)
	reserve = nil
}
