package jsonrpc

import (
	"strings"
	"testing"

	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// refCaseVariant is CaseVariant as it was, over gjson.ForEach.
func refCaseVariant(msg gjson.Result) (variant, name string) {
	check := func(obj gjson.Result, names []string) {
		obj.ForEach(func(k, _ gjson.Result) bool {
			for _, n := range names {
				if k.Str != n && strings.EqualFold(k.Str, n) {
					variant, name = k.Str, n
					return false
				}
			}
			return true
		})
	}
	check(msg, envelopeMembers)
	if variant == "" {
		if p := msg.Get("params"); p.IsObject() {
			check(p, paramsMembers)
		}
	}
	return variant, name
}

// refMembers is Members as it was, over gjson.ForEach.
func refMembers(obj gjson.Result, names ...string) []gjson.Result {
	out := make([]gjson.Result, len(names))
	if !obj.IsObject() {
		return out
	}
	obj.ForEach(func(k, v gjson.Result) bool {
		for i, n := range names {
			if k.Str == n && !out[i].Exists() {
				out[i] = v
			}
		}
		return true
	})
	return out
}

var envelopeDocs = []string{
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"records.op1","arguments":{"id":"r1"}}}`,
	"  \n {\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"tools/list\"}",
	` { "id" : "a\u0062" , "method" : "tools/call" , "params" : { "name" : "x" , "task" : {} , "arguments" : [1,{"name":"y"}] , "_meta" : { "a" : 1 , "io.modelcontextprotocol/protocolVersion" : "2025-06-18" } } } `,
	`{"id":null,"method":1,"params":[1,2]}`,
	`{"id":{"a":1},"method":"x","params":"p"}`,
	`{"metHod":"tools/call","method":"ping","id":1}`,
	`{"id":1,"method":"tools/call","params":{"NAME":"a","name":"b"}}`,
	`{"id":1,"method":"tools/call","Params":{"name":"a"},"params":{"Arguments":1}}`,
	`{"id":1,"method":"tools/call","params":{"nam\u0065":"a","paramſ":1,"_META":{}}}`,
	`{"id":1,"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":7}}}`,
	`{"id":1,"params":{"_meta":["io.modelcontextprotocol/protocolVersion"]}}`,
	`{"id":1,"params":{"_meta":{"io.modelcontextprotocol\/protocolVersion":"x"}}}`,
	`{"id":-0.5e3,"params":{}}`, `{}`, `[]`, `[{"id":1}]`, `"x"`, `1`,
	`{"id":"\ud800","method":"initialize","params":{"protocolVersion":"2025-03-26"}}`,
	`{"id":1,"method":"tools/call","params":{"name":"a","arguments":{"name":"b"}},"method":"x"}`,
}

func sameResult(t *testing.T, what, doc string, got, want gjson.Result) {
	t.Helper()
	if !want.Exists() {
		want = gjson.Result{} // gjson gives an absent member its object's Index: no reader uses it
	}
	if got.Type != want.Type || got.Raw != want.Raw || got.Str != want.Str || got.Num != want.Num || got.Index != want.Index || got.Exists() != want.Exists() {
		t.Errorf("%s of %.80s: read %+v, gjson's Get %+v", what, doc, got, want)
	}
}

func checkEnvelope(t *testing.T, doc string) {
	t.Helper()
	msg := gjson.Parse(doc)
	names := []string{"method", "id", "result", "error", "params"}
	for i, m := range Members(msg, names...) {
		sameResult(t, "Members' "+names[i], doc, m, refMembers(msg, names...)[i])
	}
	e := ReadEnvelope(msg)
	if !msg.IsObject() {
		if e.Method.Exists() || e.ID.Exists() || e.Params.Exists() || e.Variant != "" {
			t.Errorf("ReadEnvelope(%.80s) = %+v, want nothing", doc, e)
		}
		return
	}
	sameResult(t, "method", doc, e.Method, msg.Get("method"))
	sameResult(t, "id", doc, e.ID, msg.Get("id"))
	sameResult(t, "params", doc, e.Params, msg.Get("params"))
	sameResult(t, "version", doc, e.Version, msg.Get("params._meta."+gjson.Escape(versionMember)))
	p := msg.Get("params")
	if !p.IsObject() {
		p = gjson.Result{}
	}
	sameResult(t, "params.name", doc, e.Call.Name, p.Get("name"))
	sameResult(t, "params.arguments", doc, e.Call.Arguments, p.Get("arguments"))
	sameResult(t, "params.task", doc, e.Call.Task, p.Get("task"))
	rp := ReadParams(p)
	sameResult(t, "ReadParams' name", doc, rp.Name, e.Call.Name)
	sameResult(t, "ReadParams' arguments", doc, rp.Arguments, e.Call.Arguments)
	sameResult(t, "ReadParams' task", doc, rp.Task, e.Call.Task)
	if v, n := refCaseVariant(msg); v != e.Variant || n != e.VariantOf {
		t.Errorf("case variant of %.80s: %q of %q, gjson's reading %q of %q", doc, e.Variant, e.VariantOf, v, n)
	}
}

func TestReadEnvelope_sameAsGjson(t *testing.T) {
	for _, doc := range envelopeDocs {
		if jsonx.Validate([]byte(doc), 4096) != nil {
			t.Fatalf("not valid JSON: %s", doc)
		}
		checkEnvelope(t, doc)
	}
}

func TestReadEnvelope_allocations(t *testing.T) {
	msg := gjson.Parse(envelopeDocs[0])
	if n := testing.AllocsPerRun(100, func() { ReadEnvelope(msg) }); n != 0 {
		t.Errorf("ReadEnvelope allocates %v times", n)
	}
}

// FuzzReadEnvelope holds the one-pass reading to gjson's Gets on every valid document that
// repeats no member (the core refuses the others before reading them), and to no panic on
// any input.
func FuzzReadEnvelope(f *testing.F) {
	for _, d := range envelopeDocs {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		ReadEnvelope(gjson.Parse(doc))
		if jsonx.Validate([]byte(doc), 4096) != nil || RepeatsMember(gjson.Parse(doc), 0) {
			return
		}
		checkEnvelope(t, doc)
	})
}

// BenchmarkReadEnvelope: the one-pass reading against the Gets and CaseVariant it replaced.
func BenchmarkReadEnvelope(b *testing.B) {
	msg := gjson.Parse(envelopeDocs[0])
	b.Run("one_pass", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ReadEnvelope(msg)
		}
	})
	b.Run("gjson", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			refCaseVariant(msg)
			msg.Get("method")
			msg.Get("id")
			p := msg.Get("params")
			msg.Get("params._meta." + gjson.Escape(versionMember))
			p.Get("name")
			p.Get("task")
			p.Get("arguments")
		}
	})
}
