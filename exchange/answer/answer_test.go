package answer

import (
	"math"
	"testing"

	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

func TestWithListChanged(t *testing.T) {
	for in, want := range map[string]string{
		`{"id":1,"result":{"capabilities":{"tools":{}}}}`:                    `{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}}}}`,
		`{"id":1,"result":{"capabilities":{"tools":{"listChanged":false}}}}`: `{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}}}}`,
		`{"id":1,"result":{"capabilities":{}}}`:                              `{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}}}}`,
		`{"id":1,"result":{"x":1}}`:                                          `{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}},"x":1}}`,
	} {
		out, ok := WithListChanged([]byte(in))
		if !ok || string(out) != want {
			t.Errorf("WithListChanged(%s) = %s %v; want %s", in, out, ok, want)
		}
	}
	if _, ok := WithListChanged([]byte(`{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}}}}`)); ok {
		t.Error("changed an answer that already declares listChanged")
	}
}

// refWithDuration is WithDuration as it was: gjson reads and sjson sets. The splice must
// give the same bytes.
func refWithDuration(msg []byte, ms float64) []byte {
	path := durationPath
	if !gjson.GetBytes(msg, "result").IsObject() {
		e := gjson.GetBytes(msg, "error")
		if d := e.Get("data"); !e.IsObject() || (d.Exists() && !d.IsObject()) {
			return msg
		}
		path = errorDurationPath
	}
	out, err := sjson.SetBytes(msg, sjsonPath(path), ms)
	if err != nil {
		return msg
	}
	return out
}

var durationMsgs = []string{
	`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}]}}`,
	`{"jsonrpc":"2.0","id":7,"result":{}}`,
	`{"jsonrpc":"2.0","id":7,"result":{ }}`,
	` { "id" : 7 , "result" : { "a" : 1 , "_meta" : { "x" : 1 } } } `,
	`{"id":7,"result":{"_meta":{}}}`,
	`{"id":7,"result":{"_meta":{"dev.stategate/durationMs":"old","b":2}}}`,
	`{"id":7,"result":{"_meta":{"dev.stategate/durationMs":{"a":[1]} ,"b":2}}}`,
	`{"id":7,"result":{"_meta":"text"}}`,
	`{"id":7,"result":{"_meta":null}}`,
	`{"id":7,"result":{"_meta":[1,2]}}`,
	`{"id":7,"result":{"_meta":{"x":1},"_meta":{"y":2}}}`,
	`{"id":7,"result":{"_m\u0065ta":{"dev.stategate\/durationMs":1}}}`,
	`{"id":7,"res\u0075lt":{"a":1}}`,
	`{"id":7,"result":{"a":1},"result":{"b":2}}`,
	`{"id":7,"result":"done"}`,
	`{"id":7,"result":"done","error":{"code":1}}`,
	`{"id":7,"error":{"code":-32603,"message":"x"}}`,
	`{"id":7,"error":{"code":-32603,"message":"x","data":{"a":1}}}`,
	`{"id":7,"error":{"code":-32603,"message":"x","data":{}}}`,
	`{"id":7,"error":{"code":-32603,"message":"x","data":"server's"}}`,
	`{"id":7,"error":{"code":-32603,"message":"x","data":null}}`,
	`{"id":7,"error":"text"}`,
	`{"id":7}`, `[]`, `[{"result":{}}]`, `"x"`, `{}`,
}

func TestWithDuration_sameAsSjson(t *testing.T) {
	for _, msg := range durationMsgs {
		for _, ms := range []float64{0, 1.234, 12345.678, 0.001} {
			got, want := withDurationMs([]byte(msg), ms), refWithDuration([]byte(msg), ms)
			if string(got) != string(want) {
				t.Errorf("WithDuration(%s, %v)\n = %s\nsjson's %s", msg, ms, got, want)
			}
		}
	}
}

func TestWithDuration_allocations(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}]}}`)
	if n := testing.AllocsPerRun(100, func() { withDurationMs(msg, 1.5) }); n != 1 {
		t.Errorf("WithDuration allocates %v times; want 1 (the answer)", n)
	}
}

// FuzzWithDuration holds the splice to sjson's bytes on every valid message.
func FuzzWithDuration(f *testing.F) {
	for _, m := range durationMsgs {
		f.Add(m, 1.5)
	}
	f.Fuzz(func(t *testing.T, msg string, ms float64) {
		if !gjson.Valid(msg) || jsonx.Validate([]byte(msg), 4096) != nil {
			return // callers hand in valid JSON
		}
		if math.IsNaN(ms) || math.IsInf(ms, 0) {
			return
		}
		got, want := withDurationMs([]byte(msg), ms), refWithDuration([]byte(msg), ms)
		if string(got) != string(want) {
			t.Errorf("WithDuration(%s, %v)\n = %s\nsjson's %s", msg, ms, got, want)
		}
	})
}

// BenchmarkWithDuration: the splice against sjson's set it replaced.
func BenchmarkWithDuration(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}],"structuredContent":{"id":"r1","ok":true}}}`)
	b.Run("splice", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			withDurationMs(msg, 1.234)
		}
	})
	b.Run("sjson", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			refWithDuration(msg, 1.234)
		}
	})
}
