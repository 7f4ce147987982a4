package jsonx

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMember(t *testing.T) {
	doc := `{"a":1, "b" : {"c":[1,{"d":"}"}]}, "r\u0065sult":"x", "e":"q\"}"}`
	tests := []struct {
		name, key, want string
	}{
		{"first member", "a", "1"},
		{"nested object skipped whole", "b", `{"c":[1,{"d":"}"}]}`},
		{"escaped key matches its value", "result", `"x"`},
		{"string with escaped quote and brace", "e", `"q\"}"`},
		{"absent", "z", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Member(doc, 0, tt.key)
			got := ""
			if v >= 0 {
				got = doc[v:SkipValue(doc, v)]
			}
			if got != tt.want {
				t.Errorf("Member(%q) = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
}

// FuzzScan: the scanning helpers never panic on any input, and on valid JSON SkipValue
// ends exactly where the document ends and Unquote agrees with encoding/json.
func FuzzScan(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"c\\"}"}]}`, `"\ud83d\ude00 \ud800 x"`, `[`, `{"a"`, `{"a":`, `"\u12"`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		end := SkipValue(s, SkipWS(s, 0))
		if end < 0 || end > len(s) {
			t.Fatalf("SkipValue out of range: %d", end)
		}
		it := Object(s, SkipWS(s, 0))
		if e := it.End(); e < 0 || e > len(s) {
			t.Fatalf("Object.End out of range: %d", e)
		}
		if Validate([]byte(s), 1000) != nil {
			return
		}
		i := SkipWS(s, 0)
		if e := SkipValue(s, i); SkipWS(s, e) != len(s) {
			t.Fatalf("SkipValue(%q) stopped at %d", s, e)
		}
		if s[i] == '"' {
			var want string
			if err := json.Unmarshal([]byte(s), &want); err != nil {
				t.Fatal(err)
			}
			if got := Unquote(s[i:SkipValue(s, i)]); got != want {
				t.Fatalf("Unquote(%q) = %q, want %q", s, got, want)
			}
		}
	})
}

func TestValidateObject(t *testing.T) {
	doc := []byte(` {"a" : 1, "b":{"x":[1,{}]}, "c":[], "d":{}, "e":"s\"", "f\u0067":null } `)
	var got []string
	if err := ValidateObject(doc, 10, func(k string, s, e int) { got = append(got, k+"="+string(doc[s:e])) }); err != nil {
		t.Fatal(err)
	}
	want := []string{`a=1`, `b={"x":[1,{}]}`, `c=[]`, `d={}`, `e="s\""`, `fg=null`}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("member %d = %q, want %q", i, got[i], want[i])
		}
	}
	if err := ValidateObject([]byte(`[1]`), 10, nil); err == nil {
		t.Error("an array passed ValidateObject")
	}
	if err := ValidateObject([]byte(`{"a":`), 10, func(string, int, int) {}); err == nil {
		t.Error("a broken object passed")
	}
}

// FuzzRuns: each word-at-a-time scan stops where a byte-at-a-time scan stops, from every
// start offset (so every alignment and every tail length is covered).
func FuzzRuns(f *testing.F) {
	for _, s := range []string{"", "abcdefgh\"", "0123456789abcdef\\x", "\x00\x1f\x20\x7f\x80\xff", "héllo wörld \u2028 \"q\" \\ \n", `aaaaaaa"aaaaaaaa\aaaaaaaa`} {
		f.Add(s)
	}
	naive := func(s string, i int, stop func(c byte) bool) int {
		for i < len(s) && !stop(s[i]) {
			i++
		}
		return i
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i := 0; i <= len(s); i++ {
			checks := []struct {
				name string
				got  int
				stop func(c byte) bool
			}{
				{"plainRunBytes", plainRunBytes([]byte(s), i), func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }},
				{"asciiRun", asciiRun(s, i), func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80 }},
				{"quoteRun", quoteRun(s, i), func(c byte) bool { return c == '"' || c == '\\' }},
				{"escapeOrHighRun", escapeOrHighRun(s, i), func(c byte) bool { return c == '\\' || c >= 0x80 }},
			}
			for _, c := range checks {
				if want := naive(s, i, c.stop); c.got != want {
					t.Fatalf("%s(%q, %d) = %d, want %d", c.name, s, i, c.got, want)
				}
			}
			if i < len(s) {
				if got, want := CountByte([]byte(s[i:]), s[i]), strings.Count(s[i:], s[i:i+1]); got != want {
					t.Fatalf("CountByte(%q, %q) = %d, want %d", s[i:], s[i], got, want)
				}
				if got, want := IndexByte(s[i:], s[i]), strings.IndexByte(s[i:], s[i]); got != want {
					t.Fatalf("IndexByte(%q, %q) = %d, want %d", s[i:], s[i], got, want)
				}
				if got, want := IndexByte(s[i:], '['), strings.IndexByte(s[i:], '['); got != want {
					t.Fatalf("IndexByte(%q, '[') = %d, want %d", s[i:], got, want)
				}
			}
		}
	})
}

// TestRunsEveryByte: for every byte value at every position of a 16-byte run, each scan
// stops exactly where the byte rule says.
func TestRunsEveryByte(t *testing.T) {
	for b := 0; b < 256; b++ {
		for pos := 0; pos < 16; pos++ {
			buf := []byte("abcdefghijklmnop")
			buf[pos] = byte(b)
			s := string(buf)
			c := byte(b)
			want := func(stop bool) int {
				if stop {
					return pos
				}
				return len(s)
			}
			if got := plainRunBytes(buf, 0); got != want(c == '"' || c == '\\' || c < 0x20) {
				t.Fatalf("plainRunBytes byte %#x at %d: %d", b, pos, got)
			}
			if got := asciiRun(s, 0); got != want(c == '"' || c == '\\' || c < 0x20 || c >= 0x80) {
				t.Fatalf("asciiRun byte %#x at %d: %d", b, pos, got)
			}
			if got := quoteRun(s, 0); got != want(c == '"' || c == '\\') {
				t.Fatalf("quoteRun byte %#x at %d: %d", b, pos, got)
			}
			if got := escapeOrHighRun(s, 0); got != want(c == '\\' || c >= 0x80) {
				t.Fatalf("escapeOrHighRun byte %#x at %d: %d", b, pos, got)
			}
			for _, look := range []byte{c, '[', 0, 0xff, ','} {
				if got, want := CountByte(buf, look), strings.Count(s, string([]byte{look})); got != want {
					t.Fatalf("CountByte(byte %#x at %d, %#x) = %d, want %d", b, pos, look, got, want)
				}
				if got, want := IndexByte(s, look), strings.IndexByte(s, look); got != want {
					t.Fatalf("IndexByte(byte %#x at %d, %#x) = %d, want %d", b, pos, look, got, want)
				}
			}
		}
	}
}
