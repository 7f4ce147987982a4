// Package testharness is the conformance kit: it runs the golden vectors of abi/testdata
// against any engine (the native Go engine, the built Wasm module on the project's wazero
// host through either entry, the same module under Node's Extism host) and checks that
// every engine answers byte for byte the same.
package testharness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/stategate/stategate/plugin/engine"
)

// Engine runs jobs; outputs are returned in job order.
type Engine interface {
	Name() string
	RunBatch(ctx context.Context, jobs []Job) ([][]byte, error)
}

// Vector is one golden case: abi/testdata/<function>/<case>.json.
type Vector struct {
	Name   string // <function>/<case>
	Path   string
	Fn     abi.Function
	Config []byte
	Input  []byte
	Output json.RawMessage // the expected answer
	Doc    string
}

type vectorFile struct {
	Description string          `json:"description"`
	Config      json.RawMessage `json:"config"` // an object, or the name of abi/testdata/config/<name>.json
	Input       json.RawMessage `json:"input"`
	Output      json.RawMessage `json:"output"`
}

// LoadVectors reads every vector under dir (abi/testdata).
func LoadVectors(dir string) ([]Vector, error) {
	var out []Vector
	for _, fn := range abi.Functions {
		files, err := filepath.Glob(filepath.Join(dir, fn.Name(), "*.json"))
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
		for _, f := range files {
			v, err := loadVector(dir, fn, f)
			if err != nil {
				return nil, fmt.Errorf("vector[%s]: %w", f, err)
			}
			out = append(out, v)
		}
	}
	return out, nil
}

func loadVector(dir string, fn abi.Function, path string) (Vector, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Vector{}, err
	}
	var vf vectorFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&vf); err != nil {
		return Vector{}, err
	}
	cfg := []byte(vf.Config)
	var name string
	if json.Unmarshal(vf.Config, &name) == nil {
		if cfg, err = os.ReadFile(filepath.Join(dir, "config", name+".json")); err != nil {
			return Vector{}, err
		}
	}
	in, err := compact(vf.Input)
	if err != nil {
		return Vector{}, fmt.Errorf("input: %w", err)
	}
	// An input given as a JSON string is sent as its contents, verbatim: the way to test
	// malformed JSON.
	var s string
	if json.Unmarshal(vf.Input, &s) == nil {
		in = []byte(s)
	}
	return Vector{
		Name: fn.Name() + "/" + strings.TrimSuffix(filepath.Base(path), ".json"),
		Path: path, Fn: fn, Config: cfg, Input: in, Output: vf.Output, Doc: vf.Description,
	}, nil
}

func compact(raw []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Jobs turns vectors into jobs.
func Jobs(vs []Vector) []Job {
	jobs := make([]Job, len(vs))
	for i, v := range vs {
		jobs[i] = Job{Config: v.Config, Fn: v.Fn, Input: v.Input}
	}
	return jobs
}

// SameJSON reports whether a and b are the same JSON value (object member order matters
// to neither).
func SameJSON(a, b []byte) (bool, error) {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		return false, fmt.Errorf("first: %w", err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		return false, fmt.Errorf("second: %w", err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya), nil
}

// Native runs the engine as Go code.
type Native struct{}

// Name implements Engine.
func (Native) Name() string { return "native" }

// RunBatch implements Engine.
func (Native) RunBatch(_ context.Context, jobs []Job) ([][]byte, error) {
	engines := map[string]*engine.Engine{}
	out := make([][]byte, len(jobs))
	for i, j := range jobs {
		e, ok := engines[string(j.Config)]
		if !ok {
			var err error
			if e, err = engine.New(j.Config); err != nil {
				out[i] = engine.ConfigError(err)
				if j.Fn == abi.FuncCheckConfig {
					out[i] = engine.CheckConfig(j.Config)
				}
				continue
			}
			engines[string(j.Config)] = e
		}
		out[i] = e.Call(j.Fn, j.Input)
	}
	return out, nil
}

// Wasm runs a built module on the project's wazero host, through the raw entry or, with
// Extism set, through the named Extism exports.
type Wasm struct {
	Label  string
	Path   string
	Extism bool
}

// Name implements Engine.
func (w Wasm) Name() string { return w.Label }

// RunBatch implements Engine. A trap fails the batch.
func (w Wasm) RunBatch(ctx context.Context, jobs []Job) ([][]byte, error) {
	wasm, err := os.ReadFile(w.Path)
	if err != nil {
		return nil, err
	}
	rt, err := wasmrt.New(ctx, wasm, wasmrt.Options{Name: filepath.Base(w.Path)})
	if err != nil {
		return nil, err
	}
	defer rt.Close(ctx)
	instances := map[string]*wasmrt.Instance{}
	out := make([][]byte, len(jobs))
	for i, j := range jobs {
		in, ok := instances[string(j.Config)]
		if !ok {
			if in, err = rt.Instantiate(ctx, j.Config); err != nil {
				return nil, err
			}
			instances[string(j.Config)] = in
		}
		if w.Extism {
			out[i], err = in.CallExtism(ctx, j.Fn, j.Input)
		} else {
			out[i], err = in.Call(ctx, j.Fn, j.Input)
		}
		if err != nil {
			return nil, fmt.Errorf("job %d (%s): %w", i, j.Fn.Name(), err)
		}
	}
	return out, nil
}
