//go:build wasip1

// Command plugin is the stategate engine as a Wasm module: an Extism plugin (the named
// exports, I/O through extism:host/env) that also offers a zero-copy raw entry for the
// project's own wazero host. Build with `make build` (TinyGo).
package main

import (
	"unsafe"

	"github.com/extism/go-pdk"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
)

func main() {}

// The engine is built on the first call, from the Extism config key abi.ConfigKey, and
// kept for the life of the instance (an Extism plugin's config is fixed at creation).
var (
	eng    *engine.Engine
	engErr []byte
	cfgRaw []byte
	ready  bool
)

func load() {
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
}

func handle(dst []byte, fn abi.Function, in []byte) []byte {
	load()
	if eng == nil {
		if fn == abi.FuncCheckConfig {
			return append(dst, engine.CheckConfig(cfgRaw)...)
		}
		return append(dst, engErr...)
	}
	return eng.AppendCall(dst, fn, in)
}

func extism(fn abi.Function) int32 {
	pdk.Output(handle(nil, fn, pdk.Input()))
	return 0
}

//go:wasmexport decorate_tools
func decorateTools() int32 { return extism(abi.FuncDecorateTools) }

//go:wasmexport decorate_result
func decorateResult() int32 { return extism(abi.FuncDecorateResult) }

//go:wasmexport transition
func transition() int32 { return extism(abi.FuncTransition) }

//go:wasmexport check_limits
func checkLimits() int32 { return extism(abi.FuncCheckLimits) }

//go:wasmexport check_config
func checkConfig() int32 { return extism(abi.FuncCheckConfig) }

//go:wasmexport tool_health
func toolHealth() int32 { return extism(abi.FuncToolHealth) }

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
	if cap(rawOut) > rawKeep {
		rawOut = nil
	}
	rawOut = handle(rawOut[:0], abi.Function(fn), in)
	if cap(rawIn) > rawKeep {
		rawIn = nil
	}
	return pack(rawOut)
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
