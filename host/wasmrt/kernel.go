package wasmrt

import (
	"context"
	"encoding/binary"
	"log/slog"

	"github.com/stategate/stategate/abi"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// kernel is the per-instance state behind the Extism host functions: the host memory
// blocks the guest addresses by offset, the call's input and output, config and vars.
// It replaces Extism's Wasm kernel with plain Go, which is what makes a call cheap.
type kernel struct {
	mem    []byte            // block storage; offset 0 is never handed out
	blocks map[uint64]uint64 // offset -> length of live blocks
	input  []byte
	output []byte
	errMsg string
	errSet bool
	config map[string]string
	vars   map[string][]byte
	logger *slog.Logger
}

func newKernel(config map[string]string, logger *slog.Logger) *kernel {
	return &kernel{mem: make([]byte, 8, 4096), blocks: map[uint64]uint64{}, config: config, vars: map[string][]byte{}, logger: logger}
}

// reset starts a call: blocks from earlier calls are gone (the guest keeps none).
func (k *kernel) reset(input []byte) {
	k.mem = k.mem[:8]
	clear(k.blocks)
	k.input, k.output, k.errMsg, k.errSet = input, nil, "", false
}

func (k *kernel) alloc(n uint64) uint64 {
	if n > uint64(maxKernelBlock) {
		return 0
	}
	off := uint64(len(k.mem))
	off = (off + 7) &^ 7
	need := int(off + n)
	if need > cap(k.mem) {
		grown := make([]byte, need, 2*need)
		copy(grown, k.mem)
		k.mem = grown
	} else {
		k.mem = k.mem[:need]
		clear(k.mem[off:need])
	}
	k.blocks[off] = n
	return off
}

// allocCopy returns a new block holding v, or 0 when !ok (absent) or out of room.
func (k *kernel) allocCopy(ok bool, v string) uint64 {
	if !ok {
		return 0
	}
	off := k.alloc(uint64(len(v)))
	if off != 0 {
		copy(k.mem[off:], v)
	}
	return off
}

func (k *kernel) block(off uint64) []byte {
	n, ok := k.blocks[off]
	if !ok {
		return nil
	}
	return k.mem[off : off+n]
}

const maxKernelBlock = 256 << 20

type kernelKey struct{}

func kernelOf(ctx context.Context) *kernel {
	k, _ := ctx.Value(kernelKey{}).(*kernel)
	if k == nil {
		panic("stategate host: Extism host function called outside a call")
	}
	return k
}

// outOfBounds traps the guest: wazero turns a host-function panic into a call error.
func outOfBounds(fn string) {
	panic("stategate host: " + fn + ": offset out of bounds")
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// extismFunctions lists the extism:host/env functions with their Wasm signatures.
type hostFunc struct {
	name    string
	params  []api.ValueType
	results []api.ValueType
	fn      func(ctx context.Context, stack []uint64)
}

func extismFunctions() []hostFunc {
	return []hostFunc{
		{"input_length", nil, []api.ValueType{i64}, func(ctx context.Context, s []uint64) {
			s[0] = uint64(len(kernelOf(ctx).input))
		}},
		{"input_load_u8", []api.ValueType{i64}, []api.ValueType{i32}, func(ctx context.Context, s []uint64) {
			k := kernelOf(ctx)
			if s[0] >= uint64(len(k.input)) {
				outOfBounds("input_load_u8")
			}
			s[0] = uint64(k.input[s[0]])
		}},
		{"input_load_u64", []api.ValueType{i64}, []api.ValueType{i64}, func(ctx context.Context, s []uint64) {
			k := kernelOf(ctx)
			if s[0]+8 > uint64(len(k.input)) || s[0]+8 < s[0] {
				outOfBounds("input_load_u64")
			}
			s[0] = binary.LittleEndian.Uint64(k.input[s[0]:])
		}},
		{"input_offset", nil, []api.ValueType{i64}, func(ctx context.Context, s []uint64) {
			k := kernelOf(ctx)
			s[0] = k.allocCopy(true, string(k.input))
		}},
		{"output_set", []api.ValueType{i64, i64}, nil, func(ctx context.Context, s []uint64) {
			k := kernelOf(ctx)
			off, n := s[0], s[1]
			if off+n > uint64(len(k.mem)) || off+n < off {
				outOfBounds("output_set")
			}
			k.output = append(k.output[:0], k.mem[off:off+n]...)
		}},
		{"error_set", []api.ValueType{i64}, nil, func(ctx context.Context, s []uint64) {
			k := kernelOf(ctx)
			k.errMsg, k.errSet = string(k.block(s[0])), true
		}},
		{"config_get", []api.ValueType{i64}, []api.ValueType{i64}, func(ctx context.Context, s []uint64) {
			k := kernelOf(ctx)
			v, ok := k.config[string(k.block(s[0]))]
			s[0] = k.allocCopy(ok, v)
		}},
		{"var_get", []api.ValueType{i64}, []api.ValueType{i64}, func(ctx context.Context, s []uint64) {
			k := kernelOf(ctx)
			v, ok := k.vars[string(k.block(s[0]))]
			s[0] = k.allocCopy(ok, string(v))
		}},
		{"var_set", []api.ValueType{i64, i64}, nil, func(ctx context.Context, s []uint64) {
			k := kernelOf(ctx)
			key := string(k.block(s[0]))
			if s[1] == 0 {
				delete(k.vars, key)
				return
			}
			k.vars[key] = append([]byte(nil), k.block(s[1])...)
		}},
		{"alloc", []api.ValueType{i64}, []api.ValueType{i64}, func(ctx context.Context, s []uint64) {
			s[0] = kernelOf(ctx).alloc(s[0])
		}},
		{"free", []api.ValueType{i64}, nil, func(ctx context.Context, s []uint64) {
			delete(kernelOf(ctx).blocks, s[0])
		}},
		{"length", []api.ValueType{i64}, []api.ValueType{i64}, func(ctx context.Context, s []uint64) {
			s[0] = kernelOf(ctx).blocks[s[0]]
		}},
		{"length_unsafe", []api.ValueType{i64}, []api.ValueType{i64}, func(ctx context.Context, s []uint64) {
			s[0] = kernelOf(ctx).blocks[s[0]]
		}},
		{"load_u8", []api.ValueType{i64}, []api.ValueType{i32}, func(ctx context.Context, s []uint64) {
			k := kernelOf(ctx)
			if s[0] >= uint64(len(k.mem)) {
				outOfBounds("load_u8")
			}
			s[0] = uint64(k.mem[s[0]])
		}},
		{"load_u64", []api.ValueType{i64}, []api.ValueType{i64}, func(ctx context.Context, s []uint64) {
			k := kernelOf(ctx)
			if s[0]+8 > uint64(len(k.mem)) || s[0]+8 < s[0] {
				outOfBounds("load_u64")
			}
			s[0] = binary.LittleEndian.Uint64(k.mem[s[0]:])
		}},
		{"store_u8", []api.ValueType{i64, i32}, nil, func(ctx context.Context, s []uint64) {
			k := kernelOf(ctx)
			if s[0] >= uint64(len(k.mem)) {
				outOfBounds("store_u8")
			}
			k.mem[s[0]] = byte(s[1])
		}},
		{"store_u64", []api.ValueType{i64, i64}, nil, func(ctx context.Context, s []uint64) {
			k := kernelOf(ctx)
			if s[0]+8 > uint64(len(k.mem)) || s[0]+8 < s[0] {
				outOfBounds("store_u64")
			}
			binary.LittleEndian.PutUint64(k.mem[s[0]:], s[1])
		}},
		{"get_log_level", nil, []api.ValueType{i32}, func(ctx context.Context, s []uint64) {
			s[0] = uint64(logLevelWarn)
		}},
		logFunc("log_trace", slog.LevelDebug-4),
		logFunc("log_debug", slog.LevelDebug),
		logFunc("log_info", slog.LevelInfo),
		logFunc("log_warn", slog.LevelWarn),
		logFunc("log_error", slog.LevelError),
		{"http_request", []api.ValueType{i64, i64}, []api.ValueType{i64}, func(ctx context.Context, s []uint64) {
			panic("stategate host: http_request is not allowed")
		}},
		{"http_status_code", nil, []api.ValueType{i32}, func(ctx context.Context, s []uint64) { s[0] = 0 }},
		{"http_headers", nil, []api.ValueType{i64}, func(ctx context.Context, s []uint64) { s[0] = 0 }},
	}
}

// Extism log levels as go-pdk numbers them (trace 0 .. error 4): the guest logs at or
// above the level the host reports.
const logLevelWarn = 3

func logFunc(name string, level slog.Level) hostFunc {
	return hostFunc{name, []api.ValueType{i64}, nil, func(ctx context.Context, s []uint64) {
		k := kernelOf(ctx)
		if k.logger != nil {
			k.logger.Log(ctx, level, string(k.block(s[0])), "source", "plugin")
		}
	}}
}

// instantiateExtismEnv registers the extism:host/env module on rt.
func instantiateExtismEnv(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(abi.ExtismModule)
	for _, f := range extismFunctions() {
		b.NewFunctionBuilder().WithGoFunction(api.GoFunc(f.fn), f.params, f.results).Export(f.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}
