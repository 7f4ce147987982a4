package configfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stategate/stategate/plugin/engine"
)

// TestYAMLToJSON: YAML 1.2 core-schema semantics, key order kept, numbers exact.
func TestYAMLToJSON(t *testing.T) {
	for _, tt := range []struct{ name, yaml, json string }{
		{"on is a key", "on: {GO: done}\n", `{"on":{"GO":"done"}}`},
		{"yes no on off y n are strings", "a: yes\nb: no\nc: on\nd: off\ne: y\nf: n\ng: Yes\nh: OFF\n",
			`{"a":"yes","b":"no","c":"on","d":"off","e":"y","f":"n","g":"Yes","h":"OFF"}`},
		{"core booleans", "a: true\nb: False\nc: TRUE\n", `{"a":true,"b":false,"c":true}`},
		{"nulls", "a: null\nb: ~\nc:\nd: NULL\n", `{"a":null,"b":null,"c":null,"d":null}`},
		{"integers in decimal", "a: 42\nb: -7\nc: +3\nd: 0o17\ne: 0x1F\nf: 0777\ng: 123456789012345678901234567890\nh: -0\n",
			`{"a":42,"b":-7,"c":3,"d":15,"e":31,"f":777,"g":123456789012345678901234567890,"h":0}`},
		{"YAML 1.1 numbers are strings", "a: 1_000\nb: 1:20\nc: 0b101\nd: 0X1F\n", `{"a":"1_000","b":"1:20","c":"0b101","d":"0X1F"}`},
		{"floats keep their digits", "a: 0.9\nb: .5\nc: +1.5\nd: 1.\ne: 1e3\nf: -2.50E-3\ng: 007.5\n",
			`{"a":0.9,"b":0.5,"c":1.5,"d":1.0,"e":1e3,"f":-2.50E-3,"g":7.5}`},
		{"quoted scalars are strings", "a: \"true\"\nb: '42'\nc: |\n  x\nd: \"on\"\n", `{"a":"true","b":"42","c":"x\n","d":"on"}`},
		{"key order kept", "z: 1\na: 2\nm: 3\n", `{"z":1,"a":2,"m":3}`},
		{"keys are their text", "1: a\ntrue: b\nnull: c\n", `{"1":"a","true":"b","null":"c"}`},
		{"tags of the core schema", "a: !!str 42\nb: !!int \"42\"\nc: !!float 1\nd: !!bool true\ne: !!null ~\n",
			`{"a":"42","b":42,"c":1,"d":true,"e":null}`},
		{"anchors and aliases", "base: &b {x: 1}\nuse: *b\nlist: [*b, *b]\n", `{"base":{"x":1},"use":{"x":1},"list":[{"x":1},{"x":1}]}`},
		{"flow JSON-like", `{"a": [1, 2.5, "x", null, true]}` + " # comment\n", `{"a":[1,2.5,"x",null,true]}`},
		{"strings escaped", "a: \"tab\\there \\\"q\\\" \\u00e9\"\n", `{"a":"tab\there \"q\" é"}`},
		{"a document marker", "---\nversion: 1\n...\n", `{"version":1}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := YAMLToJSON([]byte(tt.yaml))
			if err != nil {
				t.Fatalf("YAMLToJSON(%q): %v", tt.yaml, err)
			}
			if string(got) != tt.json {
				t.Fatalf("YAMLToJSON(%q)\n got %s\nwant %s", tt.yaml, got, tt.json)
			}
			if !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
}

// TestYAMLToJSON_refused: what JSON cannot say, or what could be read two ways, is refused
// with an error that names the line and the reason.
func TestYAMLToJSON_refused(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"repeated key", "a: 1\nb: 2\na: 3\n", `line 3: key "a" repeated in one mapping (first at line 1)`},
		{"repeated key in flow", "x: {a: 1, a: 2}\n", `key "a" repeated`},
		{"repeated key, quoted differently", "a: 1\n\"a\": 2\n", `key "a" repeated`},
		{"merge key", "base: &b {x: 1}\nuse:\n  <<: *b\n  y: 2\n", "line 3: the merge key << is YAML 1.1"},
		{"YAML 1.1 boolean under !!bool", "a: !!bool yes\n", `line 1: "yes" is not a !!bool in YAML 1.2`},
		{"unknown tag", "a: !!timestamp 2001-12-14\n", "tag !!timestamp is not supported"},
		{"local tag", "a: !thing x\n", "tag !thing is not supported"},
		{"binary", "a: !!binary aGk=\n", "tag !!binary is not supported"},
		{"set", "a: !!set {x, y}\n", "tag !!set is not supported"},
		{"infinity", "a: .inf\n", "line 1: .inf has no JSON form"},
		{"not a number", "a: .NaN\n", ".NaN has no JSON form"},
		{"sequence as key", "? [a]\n: 1\n", "a mapping key must be a scalar"},
		{"two documents", "a: 1\n---\nb: 2\n", "more than one YAML document"},
		{"empty", "", "empty: no YAML document"},
		{"only a comment", "# nothing\n", "empty: no YAML document"},
		{"syntax", "a: [1, 2\n", "not valid YAML"},
		{"tab indentation", "a:\n\tb: 1\n", "not valid YAML"},
		{"self-referencing alias", "a: &x [1, *x]\n", "line 1: alias *x is inside the node it names"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := YAMLToJSON([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("YAMLToJSON(%q) = %s, want an error", tt.yaml, got)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("YAMLToJSON(%q): %v, want %q", tt.yaml, err, tt.want)
			}
		})
	}
}

// TestYAMLToJSON_billionLaughs: nine levels of nine aliases stand for 9^9 (387 million)
// strings in 700 bytes; the conversion stops at MaxNodes and allocates a bounded amount.
func TestYAMLToJSON_billionLaughs(t *testing.T) {
	var b strings.Builder
	b.WriteString(`a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		b.WriteString(n + ": &" + n + " [" + strings.Repeat("*"+prev+",", 8) + "*" + prev + "]\n")
		prev = n
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := YAMLToJSON([]byte(b.String()))
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "over 100000 values") {
		t.Fatalf("billion laughs: %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("billion laughs allocated %d MiB before it was refused", alloc>>20)
	} else {
		t.Logf("billion laughs refused after %d KiB allocated", alloc>>10)
	}
	// Wide rather than many: a long string repeated by aliases hits the byte bound.
	long := "s: &s \"" + strings.Repeat("x", 1<<20) + "\"\nl: [" + strings.Repeat("*s,", 40) + "*s]\n"
	if _, err := YAMLToJSON([]byte(long)); err == nil || !strings.Contains(err.Error(), "bytes as JSON") {
		t.Fatalf("a long string repeated by aliases: %v", err)
	}
}

// TestDecode: a file that is valid JSON is read as it is; a .json file that is not valid
// JSON is refused with the JSON error; anything else is YAML.
func TestDecode(t *testing.T) {
	js := []byte(` {"version": 1, "on": true} `)
	if got, err := Decode(js, false); err != nil || string(got) != string(js) {
		t.Fatalf("JSON: %s, %v", got, err)
	}
	if _, err := Decode([]byte("{\"version\": 1,\n}"), true); err == nil || !strings.Contains(err.Error(), "not valid JSON: line 2") {
		t.Fatalf(".json with a trailing comma: %v", err)
	}
	if got, err := Decode([]byte("{version: 1}"), false); err != nil || string(got) != `{"version":1}` {
		t.Fatalf("YAML flow mapping: %s, %v", got, err)
	}
	if _, err := Decode(make([]byte, MaxBytes+1), false); err == nil {
		t.Fatal("an oversized file was read")
	}
}

// TestLoad_workflowWithOn: a workflow written in YAML as people write it (on:, states
// named on and off, yes/no in strings) is a valid configuration for the engine; under
// YAML 1.1 (`on:` read as true) the engine refused it.
func TestLoad_workflowWithOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stategate.yaml")
	os.WriteFile(path, []byte(`# a toggle, as people write it
version: 1
principal:
  header: x-user
workflows:
  - id: lights
    initial: off
    states:
      off:
        on: {TOGGLE: on}
      on:
        on: {TOGGLE: off}
    tools:
      lights.toggle: {states: [off, on], event: TOGGLE}
      lights.status: {states: [on]}
stateSync:
  fromAnnotations: false
  policies:
    - match: lights.status
      cacheControl: no-store
`), 0o644)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatalf("engine refuses %s: %v", cfg, err)
	}
	w := e.Config().Workflows[0]
	// States[0] is the workflow's root; its states follow.
	if w.Initial != "off" || len(w.States) != 3 || w.States[1].Name != "off" || w.States[1].On[0].Event != "TOGGLE" || w.States[1].On[0].Target != "on" {
		t.Fatalf("workflow read as %+v", w)
	}
}

// TestLoad_yaml11BooleanInABooleanPosition: `fromAnnotations: yes` is the string "yes" in
// YAML 1.2; the engine refuses it where a boolean is expected, naming the member, rather
// than the loader guessing.
func TestLoad_yaml11BooleanInABooleanPosition(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stategate.yml")
	os.WriteFile(path, []byte("version: 1\nstateSync:\n  fromAnnotations: yes\n"), 0o644)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg) != `{"version":1,"stateSync":{"fromAnnotations":"yes"}}` {
		t.Fatalf("read as %s", cfg)
	}
	_, err = engine.New(cfg)
	var ee *engine.Error
	if err == nil || !errors.As(err, &ee) || !strings.Contains(strings.Join(ee.Details, "\n"), "stateSync.fromAnnotations") {
		t.Fatalf("engine: %v", err)
	}
}

// TestYAMLToJSON_nel: U+0085 (NEL) is a line break to YAML 1.1 readers and text to JSON,
// so a raw one is refused (naming its line), and an escaped one (\N, \u0085) is written
// escaped, so the output reads back as the same string (FuzzYAMLToJSON found both).
func TestYAMLToJSON_nel(t *testing.T) {
	for _, src := range []string{"\"\u0085\"", "a: 1\nb: \"x\u0085y\"\n"} {
		if out, err := YAMLToJSON([]byte(src)); err == nil || !strings.Contains(err.Error(), "U+0085") {
			t.Errorf("YAMLToJSON(%q) = %q, %v; want the raw NEL refused", src, out, err)
		}
	}
	for _, src := range []string{`"\N"`, `a: "\u0085"`, `"\u2028\u2029"`} {
		out, err := YAMLToJSON([]byte(src))
		if err != nil || bytes.Contains(out, []byte("\u0085")) || bytes.Contains(out, []byte("\u2028")) {
			t.Fatalf("YAMLToJSON(%q) = %q, %v; want it escaped", src, out, err)
		}
		if again, err := YAMLToJSON(out); err != nil || !bytes.Equal(again, out) {
			t.Errorf("%q read back as %q, %v", out, again, err)
		}
	}
}
