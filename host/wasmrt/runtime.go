// Package wasmrt runs the stategate plugin on wazero: it compiles the module once, checks
// at load time that it exports the ABI, and calls it through the zero-copy raw entry or
// through the named Extism exports.
package wasmrt

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/stategate/stategate/abi"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Options tunes a Runtime. The zero value is usable.
type Options struct {
	// MemoryLimitPages caps each instance's linear memory, in 64 KiB pages (default 4096:
	// 256 MiB).
	MemoryLimitPages uint32
	// Interruptible makes a call stop when its context is done (a per-call deadline), at
	// a small cost in every loop of the guest.
	Interruptible bool
	// Logger receives the plugin's Extism log lines and its stderr; nil discards them.
	Logger *slog.Logger
	// Name names the module in errors (default "stategate.wasm").
	Name string
}

// Runtime holds one compiled plugin; instantiate it once per configuration and per
// concurrent caller (an instance is single-threaded).
type Runtime struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	opts     Options
}

// New compiles wasm, registers the host modules and checks the plugin's exports and
// imports.
func New(ctx context.Context, wasm []byte, opts Options) (*Runtime, error) {
	if opts.MemoryLimitPages == 0 {
		opts.MemoryLimitPages = 4096
	}
	if opts.Name == "" {
		opts.Name = "stategate.wasm"
	}
	cfg := wazero.NewRuntimeConfig().WithMemoryLimitPages(opts.MemoryLimitPages).WithCloseOnContextDone(opts.Interruptible)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	fail := func(err error) (*Runtime, error) {
		rt.Close(ctx)
		return nil, err
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return fail(fmt.Errorf("module[%s]: wasi: %w", opts.Name, err))
	}
	if err := instantiateExtismEnv(ctx, rt); err != nil {
		return fail(fmt.Errorf("module[%s]: extism env: %w", opts.Name, err))
	}
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return fail(fmt.Errorf("module[%s]: compile: %w", opts.Name, err))
	}
	if err := Check(compiled, opts.Name); err != nil {
		return fail(err)
	}
	return &Runtime{rt: rt, compiled: compiled, opts: opts}, nil
}

// Close releases the runtime and every instance.
func (r *Runtime) Close(ctx context.Context) error { return r.rt.Close(ctx) }

// Check verifies that compiled exports every required ABI function with its signature and
// imports nothing the host does not provide. Each problem is named precisely.
func Check(compiled wazero.CompiledModule, name string) error {
	var errs []error
	exports := compiled.ExportedFunctions()
	want := func(export string, params, results []api.ValueType) {
		f, ok := exports[export]
		if !ok {
			errs = append(errs, fmt.Errorf("module[%s] function[%s]: not exported", name, export))
			return
		}
		if !sameTypes(f.ParamTypes(), params) || !sameTypes(f.ResultTypes(), results) {
			errs = append(errs, fmt.Errorf("module[%s] function[%s]: signature %s, want %s", name, export,
				sig(f.ParamTypes(), f.ResultTypes()), sig(params, results)))
		}
	}
	for _, fn := range abi.Required {
		want(fn.Name(), nil, []api.ValueType{i32})
	}
	want(abi.ExportRawAlloc, []api.ValueType{i32}, []api.ValueType{i32})
	want(abi.ExportRawCall, []api.ValueType{i32, i32, i32}, []api.ValueType{i64})
	if _, ok := exports[abi.ExportInitialize]; !ok {
		errs = append(errs, fmt.Errorf("module[%s] function[%s]: not exported: build the plugin as a reactor (-buildmode=c-shared)", name, abi.ExportInitialize))
	}
	provided := map[string]hostFunc{}
	for _, f := range extismFunctions() {
		provided[f.name] = f
	}
	for _, imp := range compiled.ImportedFunctions() {
		mod, fn, _ := imp.Import()
		switch mod {
		case wasi_snapshot_preview1.ModuleName:
		case abi.ExtismModule:
			f, ok := provided[fn]
			if !ok {
				errs = append(errs, fmt.Errorf("module[%s] import[%s.%s]: not provided by this host", name, mod, fn))
			} else if !sameTypes(imp.ParamTypes(), f.params) || !sameTypes(imp.ResultTypes(), f.results) {
				errs = append(errs, fmt.Errorf("module[%s] import[%s.%s]: signature %s, host has %s", name, mod, fn,
					sig(imp.ParamTypes(), imp.ResultTypes()), sig(f.params, f.results)))
			}
		default:
			errs = append(errs, fmt.Errorf("module[%s] import[%s.%s]: unknown module", name, mod, fn))
		}
	}
	return errors.Join(errs...)
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sig(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ",")
	}
	return "(" + names(params) + ")->(" + names(results) + ")"
}

// Instance is one instantiated plugin with its configuration. It is not safe for
// concurrent use; a trapped instance must be discarded (Call reports ErrTrapped).
type Instance struct {
	mod     api.Module
	mem     api.Memory
	alloc   api.Function
	call    api.Function
	extism  map[abi.Function]api.Function
	k       *kernel
	stack   [3]uint64
	stderr  *tailBuffer
	trapped bool
	name    string
}

// ErrTrapped wraps every error from a call that trapped the guest.
var ErrTrapped = errors.New("plugin trapped")

// Instantiate creates an instance whose Extism config key abi.ConfigKey holds config.
func (r *Runtime) Instantiate(ctx context.Context, config []byte) (*Instance, error) {
	stderr := &tailBuffer{max: 4096}
	k := newKernel(map[string]string{abi.ConfigKey: string(config)}, r.opts.Logger)
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(abi.ExportInitialize).
		WithRandSource(rand.Reader).
		WithStderr(stderr).
		WithStdout(stderr).
		WithSysWalltime().WithSysNanotime()
	kctx := context.WithValue(ctx, kernelKey{}, k)
	mod, err := r.rt.InstantiateModule(kctx, r.compiled, mc)
	if err != nil {
		return nil, fmt.Errorf("module[%s]: instantiate: %w%s", r.opts.Name, err, stderr.suffix())
	}
	in := &Instance{
		mod: mod, mem: mod.Memory(), k: k, stderr: stderr, name: r.opts.Name,
		alloc:  mod.ExportedFunction(abi.ExportRawAlloc),
		call:   mod.ExportedFunction(abi.ExportRawCall),
		extism: map[abi.Function]api.Function{},
	}
	for _, fn := range abi.Functions {
		if f := mod.ExportedFunction(fn.Name()); f != nil {
			in.extism[fn] = f
		}
	}
	return in, nil
}

// Close releases the instance.
func (in *Instance) Close(ctx context.Context) error { return in.mod.Close(ctx) }

// Trapped reports whether a call trapped this instance (or it was retired); it must
// then be discarded.
func (in *Instance) Trapped() bool { return in.trapped }

// retire marks the instance for replacement without a trap (it overran its deadline).
func (in *Instance) retire() { in.trapped = true }

// Call runs fn on input through the raw entry and returns a copy of the output.
func (in *Instance) Call(ctx context.Context, fn abi.Function, input []byte) ([]byte, error) {
	return in.AppendCall(ctx, nil, fn, input)
}

// AppendCall is Call appending the output to dst.
func (in *Instance) AppendCall(ctx context.Context, dst []byte, fn abi.Function, input []byte) ([]byte, error) {
	if in.trapped {
		return dst, fmt.Errorf("module[%s]: %w earlier; discard the instance", in.name, ErrTrapped)
	}
	if uint64(len(input)) > 1<<31-1 {
		return dst, fmt.Errorf("module[%s] function[%s]: input of %d bytes is too large", in.name, fn.Name(), len(input))
	}
	in.k.reset(nil)
	kctx := context.WithValue(ctx, kernelKey{}, in.k)
	s := in.stack[:]
	s[0] = uint64(len(input))
	if err := in.alloc.CallWithStack(kctx, s[:]); err != nil {
		return dst, in.trap(fn, err)
	}
	ptr := uint32(s[0])
	if len(input) > 0 && ptr == 0 {
		return dst, fmt.Errorf("module[%s] function[%s]: the plugin refused an input of %d bytes", in.name, fn.Name(), len(input))
	}
	if len(input) > 0 && !in.mem.Write(ptr, input) {
		return dst, in.trap(fn, errors.New("input buffer out of range"))
	}
	s[0], s[1], s[2] = uint64(fn), uint64(ptr), uint64(len(input))
	if err := in.call.CallWithStack(kctx, s[:]); err != nil {
		return dst, in.trap(fn, err)
	}
	outPtr, outLen := uint32(s[0]>>32), uint32(s[0])
	out, ok := in.mem.Read(outPtr, outLen)
	if !ok {
		return dst, in.trap(fn, errors.New("output out of range"))
	}
	return append(dst, out...), nil
}

// CallExtism runs fn through its named Extism export, as any Extism host would.
func (in *Instance) CallExtism(ctx context.Context, fn abi.Function, input []byte) ([]byte, error) {
	if in.trapped {
		return nil, fmt.Errorf("module[%s]: %w earlier; discard the instance", in.name, ErrTrapped)
	}
	f := in.extism[fn]
	if f == nil {
		return nil, fmt.Errorf("module[%s] function[%s]: not exported", in.name, fn.Name())
	}
	in.k.reset(input)
	kctx := context.WithValue(ctx, kernelKey{}, in.k)
	s := in.stack[:1]
	if err := f.CallWithStack(kctx, s); err != nil {
		return nil, in.trap(fn, err)
	}
	if rc := uint32(s[0]); rc != 0 {
		msg := in.k.errMsg
		return nil, fmt.Errorf("module[%s] function[%s]: returned %d: %s", in.name, fn.Name(), rc, msg)
	}
	return append([]byte(nil), in.k.output...), nil
}

func (in *Instance) trap(fn abi.Function, err error) error {
	in.trapped = true
	return fmt.Errorf("module[%s] function[%s]: %w: %v%s", in.name, fn.Name(), ErrTrapped, err, in.stderr.suffix())
}

// tailBuffer keeps the last max bytes written to it (the guest's stderr, for trap
// messages).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return ""
	}
	return " (plugin stderr: " + s + ")"
}
