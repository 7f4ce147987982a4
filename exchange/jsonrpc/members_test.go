package jsonrpc

import (
	"strings"
	"testing"

	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// refRepeatsMember and refSucceeded are the closure-based readers RepeatsMember and
// Succeeded replaced (gjson.ForEach and Get), as they were: the walk must agree with them
// on every valid document.
func refRepeatsMember(v gjson.Result, depth int) bool {
	if depth > maxKeyDepth {
		return false
	}
	switch {
	case v.IsObject():
		var seen []string
		var set map[string]struct{}
		dup := false
		v.ForEach(func(k, val gjson.Result) bool {
			if set != nil {
				if _, ok := set[k.Str]; ok {
					dup = true
					return false
				}
				set[k.Str] = struct{}{}
			} else {
				for _, s := range seen {
					if s == k.Str {
						dup = true
						return false
					}
				}
				seen = append(seen, k.Str)
				if len(seen) > 16 {
					set = make(map[string]struct{}, 64)
					for _, s := range seen {
						set[s] = struct{}{}
					}
				}
			}
			if refRepeatsMember(val, depth+1) {
				dup = true
				return false
			}
			return true
		})
		return dup
	case v.IsArray():
		dup := false
		v.ForEach(func(_, val gjson.Result) bool {
			dup = refRepeatsMember(val, depth+1)
			return !dup
		})
		return dup
	}
	return false
}

func refSucceeded(msg gjson.Result) bool {
	res := msg.Get("result")
	if msg.Get("error").Exists() || !res.IsObject() {
		return false
	}
	if e := res.Get("isError"); e.Exists() && e.Type != gjson.False {
		return false
	}
	return !refRepeatsMember(msg, 0)
}

var memberDocs = []string{
	`{}`, `[]`, `1`, `"x"`, `null`, ` { "a" : 1 , "a" : 2 } `,
	`{"a":1,"b":{"c":[{"d":1,"d":2}]}}`,
	`{"a":1,"b":{"c":[{"d":1,"e":2}]}}`,
	`[{"a":1},{"a":1}]`,
	`{"a":1,"\u0061":2}`,
	`{"a\"b":1,"a\u0022b":2}`,
	`{"\ud800":1,"\udc00":2}`,
	`{"\ud800\u0041":1,"\ufffd":2}`,
	`{"a":{},"b":[],"c":{"a":[]},"a ":1}`,
	`{"x":[[[{"k":1}],{"k":2}]],"y":{"k":1,"z":{"k":1}}}`,
	`{"id":1,"result":{"content":[]}}`,
	`{"id":1,"result":{"content":[],"isError":false}}`,
	`{"id":1,"result":{"content":[],"isError":true}}`,
	`{"id":1,"result":{"content":[],"isError":"false"}}`,
	`{"id":1,"result":{"content":[],"isError":null}}`,
	`{"id":1,"result":{"content":[],"isError":{"a":false}}}`,
	`{"id":1,"result":{"content":[],"isError":[false]}}`,
	`{"id":1,"result":"done"}`,
	`{"id":1,"result":[{"isError":true}]}`,
	`{"id":1,"result":{"x":{"isError":true}}}`,
	`{"id":1,"result":{"content":[]},"error":null}`,
	`{"id":1,"error":{"code":1,"message":"x"}}`,
	`{"id":1,"result":{"content":[],"isError":true,"isError":false}}`,
	`{"id":1,"result":{},"result":{"isError":true}}`,
	`{"id":1,"res\u0075lt":{"isError":false}}`,
	`{"id":1,"result":{"is\u0045rror":true}}`,
	`{"id":1,"result":{"content":[{"type":"text","text":"ok","isError":true}]}}`,
	`{"result":{"isError":false},"id":{"result":{"isError":true}}}`,
}

func deepDoc(n int, inner string) string {
	return strings.Repeat(`{"a":[`, n) + inner + strings.Repeat(`]}`, n)
}

func manyMembers(n int, extra string) string {
	var b strings.Builder
	b.WriteString(`{"o":{"in":{"p":1,"p":2}},`)
	for i := 0; i < n; i++ {
		b.WriteString(`"k` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + `":{"k":1,"j":[1,{"k":2}]},`)
	}
	b.WriteString(extra + `"end":1}`)
	return b.String()
}

func TestRepeatsMember_sameAsGjson(t *testing.T) {
	docs := append([]string{}, memberDocs...)
	for _, n := range []int{1, 15, 16, 17, 100, 127, 128, 129, 200} {
		docs = append(docs, deepDoc(n, `{"d":1,"d":2}`), deepDoc(n, `{"d":1,"e":2}`))
	}
	for _, n := range []int{15, 16, 17, 40, 700} {
		docs = append(docs, manyMembers(n, ""), manyMembers(n, `"kaa":1,`), manyMembers(n, `"\u006baa":1,`))
	}
	for _, doc := range docs {
		if jsonx.Validate([]byte(doc), 4096) != nil {
			t.Fatalf("not valid JSON: %.80s", doc)
		}
		v := gjson.Parse(doc)
		for _, depth := range []int{0, 1, 255, 256, 257} {
			if got, want := RepeatsMember(v, depth), refRepeatsMember(v, depth); got != want {
				t.Errorf("RepeatsMember(%.80s, %d) = %v, gjson's reading %v", doc, depth, got, want)
			}
		}
		if got, want := Succeeded(v), refSucceeded(v); got != want {
			t.Errorf("Succeeded(%.80s) = %v, gjson's reading %v", doc, got, want)
		}
	}
}

// TestRepeatsMember_depth: objects nested deeper than maxKeyDepth are not looked into, as
// before (the engine refuses deeper arguments itself).
func TestRepeatsMember_depth(t *testing.T) {
	for n, want := range map[int]bool{127: true, 128: true, 129: false, 300: false} {
		// n levels of {"a":[ put the inner object at depth 2n.
		if got := RepeatsMember(gjson.Parse(deepDoc(n, `{"d":1,"d":2}`)), 0); got != want {
			t.Errorf("a repeat at depth %d: RepeatsMember = %v, want %v", 2*n, got, want)
		}
	}
}

func TestRepeatsMember_allocations(t *testing.T) {
	for _, doc := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"records.op1","arguments":{"id":"r1","deep":[{"a":1,"b":[2,{"c":3}]}]}}}`,
		deepDoc(7, `{"d":1,"e":2}`), // deeper than 16 levels, the walk grows its stack
	} {
		v := gjson.Parse(doc)
		if n := testing.AllocsPerRun(100, func() { RepeatsMember(v, 0); Succeeded(v) }); n != 0 {
			t.Errorf("RepeatsMember and Succeeded allocate %v times on %.60s", n, doc)
		}
	}
}

// FuzzRepeatsMember holds the walk to gjson's reading on every valid document, and to no
// panic on any input.
func FuzzRepeatsMember(f *testing.F) {
	for _, d := range memberDocs {
		f.Add(d)
	}
	f.Add(deepDoc(130, `{"d":1,"d":2}`))
	f.Add(manyMembers(20, `"kaa":1,`))
	f.Fuzz(func(t *testing.T, doc string) {
		v := gjson.Parse(doc)
		got, gotOK := RepeatsMember(v, 0), Succeeded(v)
		if jsonx.Validate([]byte(doc), 4096) != nil {
			return // not JSON: callers validate first; no panic is all that is asked
		}
		if want := refRepeatsMember(v, 0); got != want {
			t.Errorf("RepeatsMember(%q) = %v, gjson's reading %v", doc, got, want)
		}
		if want := refSucceeded(v); gotOK != want {
			t.Errorf("Succeeded(%q) = %v, gjson's reading %v", doc, gotOK, want)
		}
	})
}

// BenchmarkRepeatsMember: the walk against the closure-based reading it replaced, on the
// request and the answer of BenchmarkGatewayCall's gated call.
//
//	go test ./exchange/jsonrpc -run '^$' -bench 'RepeatsMember|ReadEnvelope' -benchmem
func BenchmarkRepeatsMember(b *testing.B) {
	req := gjson.Parse(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"records.op1","arguments":{"id":"r1"}}}`)
	ans := gjson.Parse(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}],"structuredContent":{"id":"r1","ok":true}}}`)
	b.Run("request/walk", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			RepeatsMember(req, 0)
		}
	})
	b.Run("request/gjson", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			refRepeatsMember(req, 0)
		}
	})
	b.Run("succeeded/walk", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			Succeeded(ans)
		}
	})
	b.Run("succeeded/gjson", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			refSucceeded(ans)
		}
	})
}
