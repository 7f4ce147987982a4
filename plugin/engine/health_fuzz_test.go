package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/internal/health"
	"github.com/tidwall/gjson"
)

// healthEngines are the engines of the health configurations (unit tool and server).
func healthEngines(t testing.TB) []*Engine {
	var out []*Engine
	for _, name := range []string{"health.json", "health-server.json"} {
		cfg, err := os.ReadFile(filepath.Join("..", "..", "abi", "testdata", "config", name))
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// fuzzHealth checks an export under the health configurations on any input: no panic,
// one JSON object out, and every record it asks to store reads back as a record.
func fuzzHealth(f *testing.F, fn abi.Function) {
	seeds(f, fn)
	engines := healthEngines(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, e := range engines {
			out := e.Call(fn, in)
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(out, &doc); err != nil {
				t.Fatalf("output is not a JSON object for input %q:\n%s", in, out)
			}
			gjson.GetBytes(out, "states").ForEach(func(k, v gjson.Result) bool {
				if k.Str != abi.HealthIndexKey && abi.IsHealthKey(k.Str) {
					if _, ok := health.Read(v); !ok {
						t.Fatalf("%s: record %s does not read back: %s", k.Str, v.Raw, out)
					}
				}
				return true
			})
		}
	})
}

func FuzzToolHealth(f *testing.F)          { fuzzHealth(f, abi.FuncToolHealth) }
func FuzzHealthDecorateTools(f *testing.F) { fuzzHealth(f, abi.FuncDecorateTools) }
func FuzzHealthTransition(f *testing.F)    { fuzzHealth(f, abi.FuncTransition) }
func FuzzHealthCheckLimits(f *testing.F)   { fuzzHealth(f, abi.FuncCheckLimits) }
