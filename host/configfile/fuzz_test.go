package configfile

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzYAMLToJSON: the YAML path never panics; what it accepts is valid JSON that reads back
// through it unchanged (its output is YAML too); and YAML that is valid JSON gives the same
// document as JSON or an error (a repeated key, an escape YAML lacks), never another
// document. A file that is valid JSON is read as JSON (Decode), byte for byte.
func FuzzYAMLToJSON(f *testing.F) {
	for _, s := range []string{
		"on: {GO: done}\n", "a: yes\nb: no\nc: off\n", "a: 0x1F\nb: 0o17\nc: +.5\nd: 1.\ne: -0\n",
		"base: &b {x: 1}\nuse: *b\n", "a: &x [1, *x]\n", "a: !!bool yes\n", "a: 1\na: 2\n",
		`{"a": [1, 2.5e-3, "x\u00e9", null, true], "b": {"c": -0}}`, `[1E400, "\ud83d\ude00", "\/"]`,
		"s: |\n  line\n  more\n", "k: 'it''s'\n", "? complex\n: 1\n",
	} {
		f.Add([]byte(s))
	}
	for _, glob := range []string{"../../abi/testdata/config/*.json", "../../examples/*/*.yaml", "../../testharness/field/*.json"} {
		files, _ := filepath.Glob(glob)
		for _, name := range files {
			if b, err := os.ReadFile(name); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		out, err := YAMLToJSON(src)
		if err == nil {
			if !json.Valid(out) {
				t.Fatalf("YAMLToJSON(%q) = %q: not JSON", src, out)
			}
			// JSON is YAML but for one limit: YAML reads a key of over 1024 characters
			// followed by ':' as no key at all, so such a document is not read back.
			if again, err := YAMLToJSON(out); (err != nil || !bytes.Equal(again, out)) && !longKey(decodeNumbers(t, out)) {
				t.Fatalf("output %q read back as %q, %v", out, again, err)
			}
		}
		if !json.Valid(src) {
			return
		}
		if got, err := Decode(src, false); err != nil || !bytes.Equal(got, src) {
			t.Fatalf("Decode(valid JSON %q) = %q, %v", src, got, err)
		}
		if err == nil && !sameJSON(t, src, out) {
			t.Fatalf("valid JSON %q read as YAML gives another document: %q", src, out)
		}
	})
}

// longKey reports whether v (decodeNumbers's) holds an object member whose name is over
// 1024 characters, YAML's limit for an implicit key.
func longKey(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if len([]rune(k)) > 1024 || longKey(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if longKey(x) {
				return true
			}
		}
	}
	return false
}

// sameJSON reports whether a and b are the same JSON document: numbers by their text,
// objects by members (a's repeated names are the last one's).
func sameJSON(t *testing.T, a, b []byte) bool {
	return same(decodeNumbers(t, a), decodeNumbers(t, b))
}

func decodeNumbers(t *testing.T, b []byte) any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return v
}

func same(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			if w, ok := bm[k]; !ok || !same(v, w) {
				return false
			}
		}
		return true
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !same(a[i], bs[i]) {
				return false
			}
		}
		return true
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		// JSON writes no '+' and no leading zeros, so YAML keeps a JSON number's text, but
		// for the integer -0, which is 0.
		return a == bn || (a == "-0" && bn == "0")
	}
	return a == b
}
