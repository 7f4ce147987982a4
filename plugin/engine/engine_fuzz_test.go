package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/internal/decorate"
	"github.com/tidwall/gjson"
)

// seeds adds every golden input of fn (abi/testdata/<fn>) to the fuzz corpus.
func seeds(f *testing.F, fn abi.Function) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "abi", "testdata", fn.Name(), "*.json"))
	if len(files) == 0 {
		f.Fatalf("no golden vectors for %s", fn.Name())
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var v struct {
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			f.Fatal(err)
		}
		var s string
		if json.Unmarshal(v.Input, &s) == nil {
			f.Add([]byte(s))
		} else {
			f.Add([]byte(v.Input))
		}
	}
}

func sampleEngine(t testing.TB) *Engine { return configEngine(t, "sample") }

// configEngine is an engine for abi/testdata/config/<name>.json.
func configEngine(t testing.TB, name string) *Engine {
	cfg, err := os.ReadFile(filepath.Join("..", "..", "abi", "testdata", "config", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// fuzzExport checks the contract every export keeps on any input: no panic, and one
// valid JSON document out; decorated messages are valid JSON and within limits; an
// annotation record written is one the engine reads back as it wrote it. Each input runs
// under sample.json, annotations.json (fromAnnotations, categories) and statechart.json
// (compound and parallel states, guards) and approvals.json (approvals, when destructive).
func fuzzExport(f *testing.F, fn abi.Function) {
	seeds(f, fn)
	engines := []*Engine{sampleEngine(f), configEngine(f, "annotations"), configEngine(f, "statechart"), configEngine(f, "approvals")}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, e := range engines {
			checkExport(t, e, fn, in)
		}
	})
}

func checkExport(t *testing.T, e *Engine, fn abi.Function, in []byte) {
	{
		out := e.Call(fn, in)
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON for input %q:\n%s", in, out)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("output is not an object: %s", out)
		}
		if m, ok := doc["message"]; ok && fn == abi.FuncDecorateResult {
			if len(m) > 65536 && strings.Contains(string(in), `"result"`) {
				// sample.json sets maxResponseBytes 65536: a decorated result never exceeds it
				if _, isErr := doc["error"]; !isErr {
					t.Fatalf("decorated message of %d bytes exceeds the limit", len(m))
				}
			}
		}
		if st, ok := doc["states"]; ok && fn == abi.FuncDecorateTools {
			gjson.ParseBytes(st).ForEach(func(k, rec gjson.Result) bool {
				n := 0
				rec.Get("tools").ForEach(func(name, class gjson.Result) bool {
					n++
					if c := class.Str; c != "read" && c != "write" && c != "destructive" {
						t.Fatalf("record %s holds class %q for %q", k.Str, c, name.Str)
					}
					return true
				})
				if n == 0 || n > MaxRememberedTools {
					t.Fatalf("record %s holds %d tools", k.Str, n)
				}
				again := newMemo(rec)
				if again.changed || len(again.names) != n {
					t.Fatalf("record %s does not read back as written: %d of %d", k.Str, len(again.names), n)
				}
				return true
			})
		}
	}
}

// FuzzCheckConfig: check_config answers any input with one JSON object (an error only for
// input that is not JSON or whose tools is not an array), and explains every named tool.
func FuzzCheckConfig(f *testing.F) {
	seeds(f, abi.FuncCheckConfig)
	engines := []*Engine{sampleEngine(f), configEngine(f, "annotations"), configEngine(f, "statechart"), configEngine(f, "approvals")}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, e := range engines {
			out := e.Call(abi.FuncCheckConfig, in)
			var doc struct {
				Error   json.RawMessage   `json:"error"`
				Valid   bool              `json:"valid"`
				Explain []json.RawMessage `json:"explain"`
			}
			if !json.Valid(out) || json.Unmarshal(out, &doc) != nil {
				t.Fatalf("output is not a JSON object for input %q:\n%s", in, out)
			}
			if doc.Error == nil && !doc.Valid {
				t.Fatalf("a valid configuration reported invalid: %s", out)
			}
		}
	})
}

func FuzzDecorateTools(f *testing.F) { fuzzExport(f, abi.FuncDecorateTools) }

// FuzzDecorateResult also runs each input under small-limit.json (maxResponseBytes 1024),
// where most results are cut: the message stays within the limit, and a successful result
// keeps its structuredContent whole or is withheld as isError, which strict clients accept.
func FuzzDecorateResult(f *testing.F) {
	seeds(f, abi.FuncDecorateResult)
	e := sampleEngine(f)
	cfg, err := os.ReadFile(filepath.Join("..", "..", "abi", "testdata", "config", "small-limit.json"))
	if err != nil {
		f.Fatal(err)
	}
	small, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, eng := range []*Engine{e, small} {
			out := eng.Call(abi.FuncDecorateResult, in)
			var doc struct {
				Error   json.RawMessage `json:"error"`
				Message json.RawMessage `json:"message"`
			}
			if !json.Valid(out) || json.Unmarshal(out, &doc) != nil {
				t.Fatalf("output is not a JSON object for input %q:\n%s", in, out)
			}
			if doc.Error != nil {
				continue
			}
			_, limit, _ := eng.cfg.Limits.For(gjson.GetBytes(in, "tool").Str)
			if limit > 0 && len(doc.Message) > limit {
				t.Fatalf("decorated message of %d bytes exceeds the %d limit", len(doc.Message), limit)
			}
			msg := gjson.GetBytes(in, "message").Raw
			sc := gjson.Get(msg, "result.structuredContent")
			if !sc.Exists() || !decorate.Succeeded(msg) {
				continue
			}
			got := gjson.ParseBytes(doc.Message)
			if got.Get("result.structuredContent").Raw != sc.Raw && got.Get("result.isError").Type != gjson.True {
				t.Fatalf("a success lost its structuredContent without isError:\n in %s\nout %s", in, out)
			}
		}
	})
}
func FuzzTransition(f *testing.F)  { fuzzExport(f, abi.FuncTransition) }
func FuzzCheckLimits(f *testing.F) { fuzzExport(f, abi.FuncCheckLimits) }

// FuzzNew feeds arbitrary configurations to New: an error or an engine, never a panic,
// and an engine always answers check_config as valid.
func FuzzNew(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "abi", "testdata", "config", "*.json"))
	for _, file := range files {
		raw, _ := os.ReadFile(file)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, cfg []byte) {
		e, err := New(cfg)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T", err)
			}
			if !json.Valid(ConfigError(err)) || !json.Valid(CheckConfig(cfg)) {
				t.Fatal("error documents are not valid JSON")
			}
			return
		}
		var doc struct {
			Valid bool `json:"valid"`
		}
		if err := json.Unmarshal(e.Call(abi.FuncCheckConfig, nil), &doc); err != nil || !doc.Valid {
			t.Fatalf("engine built but check_config says %v %v", doc, err)
		}
	})
}
