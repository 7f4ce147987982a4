package answer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

func TestSet(t *testing.T) {
	for _, tc := range []struct {
		name, doc, raw string
		path           []string
		want           string // "" when Set refuses, as sjson does
	}{
		{"error_data_new", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m"}}`, `{"dev.stategate/error":{"code":"X"}}`,
			[]string{"error", "data"}, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m","data":{"dev.stategate/error":{"code":"X"}}}}`},
		{"meta_created", `{"content":[]}`, `{"hit":true}`, []string{"_meta", "dev.stategate/cache"},
			`{"content":[],"_meta":{"dev.stategate/cache":{"hit":true}}}`},
		{"meta_extended", `{"content":[],"_meta":{"a":1}}`, `1`, []string{"_meta", "dev.stategate/cache"},
			`{"content":[],"_meta":{"a":1,"dev.stategate/cache":1}}`},
		{"value_replaced_in_place", `{"ttlMs":-5,"cacheScope":"x","tools":[]}`, `0`, []string{"ttlMs"}, `{"ttlMs":0,"cacheScope":"x","tools":[]}`},
		{"first_of_repeated_replaced", `{"a":1,"a":2}`, `3`, []string{"a"}, `{"a":3,"a":2}`},
		{"escaped_name_matched", `{"\u0061":1}`, `2`, []string{"a"}, `{"\u0061":2}`},
		{"empty_object", `{ }`, `1`, []string{"a"}, `{ "a":1}`},
		{"space_before_brace_kept", `{"x":1 }`, `1`, []string{"a"}, `{"x":1 ,"a":1}`},
		{"space_around_document_goes", " \n{\"x\":1} \n", `1`, []string{"a"}, `{"x":1,"a":1}`},
		{"space_around_document_kept_on_replace", " {\"a\":0} ", `1`, []string{"a"}, ` {"a":1} `},
		{"scalar_parent_replaced", `{"_meta":"x"}`, `1`, []string{"_meta", "d"}, `{"_meta":{"d":1}}`},
		{"null_parent_replaced", `{"_meta":null,"b":2}`, `1`, []string{"_meta", "d"}, `{"_meta":{"d":1},"b":2}`},
		{"array_parent_refused", `{"_meta":[1]}`, `1`, []string{"_meta", "d"}, ""},
		{"array_document_refused", `[1]`, `1`, []string{"a"}, ""},
		{"scalar_document_replaced", `7`, `1`, []string{"a", "b"}, `{"a":{"b":1}}`},
		{"empty_document", ``, `1`, []string{"a"}, `{"a":1}`},
		{"name_escaped_as_sjson", `{}`, `1`, []string{"<a\"\n\x01\u2028\xff>"}, `{"\u003ca\"\n\u0001\u2028\ufffd\u003e":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := Set([]byte(tc.doc), []byte(tc.raw), tc.path...)
			if tc.want == "" {
				if ok || string(out) != tc.doc {
					t.Errorf("Set = %s, %v; want the document unchanged, false", out, ok)
				}
			} else if !ok || string(out) != tc.want {
				t.Errorf("Set = %s, %v; want %s", out, ok, tc.want)
			}
			ref, err := sjson.SetRawBytes([]byte(tc.doc), sjsonPath(tc.path), []byte(tc.raw))
			if (err == nil) != ok || (ok && string(ref) != string(out)) {
				t.Errorf("sjson = %s, %v; Set = %s, %v", ref, err, out, ok)
			}
		})
	}
}

func TestSetString(t *testing.T) {
	for _, v := range []string{"private", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "<&>\"\\\b\f\n\r\t\x00\x7f\u2029\xc3", ""} {
		doc := []byte(`{"content":[],"_meta":{}}`)
		out, ok := SetString(doc, v, "_meta", "dev.stategate/denial")
		ref, err := sjson.SetBytes(doc, "_meta.dev\\.stategate/denial", v)
		if !ok || err != nil || string(out) != string(ref) {
			t.Errorf("SetString(%q) = %s, %v; sjson %s, %v", v, out, ok, ref, err)
		}
	}
}

// sjsonPath writes names as an sjson path.
func sjsonPath(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = gjson.Escape(n)
	}
	return strings.Join(parts, ".")
}

// sjsonName reports whether sjson reads name as a member name: not an array index, not
// empty, not its ":" prefix (which it strips).
func sjsonName(name string) bool {
	if name == "" || name == "-1" || name[0] == ':' {
		return false
	}
	return strings.Trim(name, "0123456789") != ""
}

// FuzzSet holds Set to sjson: the same bytes, or both refusing, on every valid document;
// on any input, no panic.
func FuzzSet(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m"}}`, `{"a":1}`, "error\x00data", false)
	f.Add(`{"content":[],"_meta":{"x":"y"}}`, `true`, "_meta\x00dev.stategate/cache", true)
	f.Add(`{"tools":[],"ttlMs":"5"}`, `0`, "ttlMs", false)
	f.Add(` {"a" : { "b" : [ ] } , "c":null } `, `"s"`, "a\x00b\x00c", true)
	f.Add(`"x"`, `1`, "a\x00b", false)
	f.Fuzz(func(t *testing.T, doc, raw, names string, asString bool) {
		path := strings.Split(names, "\x00")
		if len(path) > 4 {
			return
		}
		var out []byte
		var ok bool
		if asString {
			out, ok = SetString([]byte(doc), raw, path...)
		} else {
			out, ok = Set([]byte(doc), []byte(raw), path...)
		}
		if !json.Valid([]byte(doc)) || (!asString && !json.Valid([]byte(raw))) {
			return
		}
		for _, n := range path {
			if !sjsonName(n) {
				return
			}
		}
		var ref []byte
		var err error
		if asString {
			ref, err = sjson.SetBytes([]byte(doc), sjsonPath(path), raw)
		} else {
			ref, err = sjson.SetRawBytes([]byte(doc), sjsonPath(path), []byte(raw))
		}
		if (err == nil) != ok || (ok && string(ref) != string(out)) {
			t.Fatalf("Set(%q, %q, %q) = %q, %v; sjson %q, %v", doc, raw, path, out, ok, ref, err)
		}
		if !ok && string(out) != doc {
			t.Fatalf("refused, but the document changed: %q", out)
		}
	})
}

// BenchmarkSet sets the cache member on a cached result, by Set and by sjson.
func BenchmarkSet(b *testing.B) {
	doc := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 400) + `"}],"_meta":{"a":1}}`)
	meta := []byte(`{"hit":true,"ageMs":12}`)
	b.Run("answer.Set", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Set(doc, meta, "_meta", "dev.stategate/cache")
		}
	})
	b.Run("sjson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sjson.SetRawBytes(doc, "_meta.dev\\.stategate/cache", meta)
		}
	})
}

// BenchmarkAppendQuoted writes strings as sjson would: a plain one, one with escapes.
func BenchmarkAppendQuoted(b *testing.B) {
	for _, in := range []struct{ name, s string }{
		{"plain", strings.Repeat("Reads a file from the workspace and returns it. ", 8)},
		{"escapes", strings.Repeat("line \"one\"\n\tline two\\ <b>&</b>\r\n", 12)},
		{"unicode", strings.Repeat("Ärger über Öl – “quoted” 日本語\u2028 ", 10)},
	} {
		buf := make([]byte, 0, 4*len(in.s))
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.s)))
			for b.Loop() {
				buf = appendQuoted(buf[:0], in.s)
			}
		})
	}
}
