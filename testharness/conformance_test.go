package testharness

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stategate/stategate/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden outputs of abi/testdata from the native engine")

const (
	vectorsDir = "../abi/testdata"
	tinyGoWasm = "../build/stategate.wasm"
	stdGoWasm  = "../build/stategate-go.wasm"
	nodeDir    = "node"
)

func need(t *testing.T, path string) {
	t.Helper()
	testenv.NeedFile(t, path, "run `make build build.go`")
}

// engines returns every engine the conformance suite runs, skipping (or failing, under
// STATEGATE_REQUIRE_ALL=1) those whose artifacts are absent.
func engines(t *testing.T) []Engine {
	es := []Engine{Native{}}
	for _, w := range []Wasm{
		{Label: "tinygo/raw", Path: tinyGoWasm},
		{Label: "tinygo/extism", Path: tinyGoWasm, Extism: true},
		{Label: "go/raw", Path: stdGoWasm},
		{Label: "go/extism", Path: stdGoWasm, Extism: true},
	} {
		if _, err := os.Stat(w.Path); err != nil {
			if testenv.RequireAll() {
				t.Fatalf("%s is missing: run `make build build.go`", w.Path)
			}
			t.Logf("skipping %s: %s is missing", w.Label, w.Path)
			continue
		}
		es = append(es, w)
	}
	if err := NodeAvailable(nodeDir); err != nil {
		if testenv.RequireAll() {
			t.Fatalf("node extism host: %v", err)
		}
		t.Logf("skipping node/extism: %v", err)
	} else if _, err := os.Stat(tinyGoWasm); err == nil {
		abs, _ := filepath.Abs(tinyGoWasm)
		es = append(es, NodeExtism{Wasm: abs, Dir: nodeDir})
	}
	return es
}

// TestConformance runs every golden vector on every engine: each answer must equal the
// golden output, and all engines must answer byte for byte the same.
func TestConformance(t *testing.T) {
	vs, err := LoadVectors(vectorsDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) < 20 {
		t.Fatalf("only %d vectors found under %s", len(vs), vectorsDir)
	}
	ctx := context.Background()
	jobs := Jobs(vs)
	results := map[string][][]byte{}
	es := engines(t)
	for _, e := range es {
		out, err := e.RunBatch(ctx, jobs)
		if err != nil {
			t.Fatalf("engine[%s]: %v", e.Name(), err)
		}
		results[e.Name()] = out
	}
	native := results["native"]
	if *update {
		for i, v := range vs {
			if err := rewriteGolden(v, native[i]); err != nil {
				t.Fatal(err)
			}
		}
		t.Log("golden outputs rewritten from the native engine: review the diff")
		return
	}
	for i, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			if len(v.Output) == 0 {
				t.Fatalf("%s has no golden output: run go test ./testharness -run TestConformance -update", v.Path)
			}
			same, err := SameJSON(native[i], v.Output)
			if err != nil {
				t.Fatalf("native output is not JSON: %v\n%s", err, native[i])
			}
			if !same {
				t.Errorf("native output differs from golden %s\n got: %s\nwant: %s", v.Path, native[i], compactOrRaw(v.Output))
			}
			for _, e := range es[1:] {
				if got := results[e.Name()][i]; !bytes.Equal(got, native[i]) {
					t.Errorf("engine[%s] differs from native\n%s: %s\nnative: %s", e.Name(), e.Name(), got, native[i])
				}
			}
		})
	}
	t.Logf("%d vectors on %d engines", len(vs), len(es))
}

func compactOrRaw(raw []byte) []byte {
	if c, err := compact(raw); err == nil {
		return c
	}
	return raw
}

func rewriteGolden(v Vector, output []byte) error {
	raw, err := os.ReadFile(v.Path)
	if err != nil {
		return err
	}
	var vf vectorFile
	if err := json.Unmarshal(raw, &vf); err != nil {
		return err
	}
	vf.Output = json.RawMessage(output)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(vf); err != nil {
		return err
	}
	return os.WriteFile(v.Path, b.Bytes(), 0o644)
}
