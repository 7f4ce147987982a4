package store

import (
	"bytes"
	"errors"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads every message of in, with a reader fed one byte per Read when slow (a
// message split across any number of TCP segments).
func readAll(in string, slow bool) ([]respValue, error) {
	var src io.Reader = strings.NewReader(in)
	if slow {
		src = iotest.OneByteReader(src)
	}
	r := newRESPReader(src)
	var out []respValue
	for {
		v, err := r.read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r.pushes...)
		out = append(out, v)
	}
}

func bulk(s string) respValue { return respValue{kind: '$', str: []byte(s)} }

// TestRESPReader_types reads every type a RESP3 server sends, and RESP2's nulls.
func TestRESPReader_types(t *testing.T) {
	cases := []struct {
		name, in string
		want     respValue
	}{
		{"simple string", "+OK\r\n", respValue{kind: '+', str: []byte("OK")}},
		{"empty simple string", "+\r\n", respValue{kind: '+', str: []byte{}}},
		{"error", "-ERR wrong type\r\n", respValue{kind: '-', str: []byte("ERR wrong type")}},
		{"integer", ":1000\r\n", respValue{kind: ':', num: 1000}},
		{"negative integer", ":-2\r\n", respValue{kind: ':', num: -2}},
		{"plus integer", ":+7\r\n", respValue{kind: ':', num: 7}},
		{"largest integer", ":9223372036854775807\r\n", respValue{kind: ':', num: math.MaxInt64}},
		{"bulk", "$5\r\nhello\r\n", bulk("hello")},
		{"bulk with CRLF inside", "$4\r\na\r\nb\r\n", bulk("a\r\nb")},
		{"empty bulk", "$0\r\n\r\n", bulk("")},
		{"null", "_\r\n", respValue{kind: '_'}},
		{"RESP2 null bulk", "$-1\r\n", respValue{kind: '_'}},
		{"RESP2 null array", "*-1\r\n", respValue{kind: '_'}},
		{"array", "*3\r\n:1\r\n$1\r\na\r\n_\r\n", respValue{kind: '*', elems: []respValue{{kind: ':', num: 1}, bulk("a"), {kind: '_'}}}},
		{"empty array", "*0\r\n", respValue{kind: '*', elems: []respValue{}}},
		{"nested array", "*2\r\n*1\r\n+a\r\n*0\r\n", respValue{kind: '*', elems: []respValue{
			{kind: '*', elems: []respValue{{kind: '+', str: []byte("a")}}}, {kind: '*', elems: []respValue{}}}}},
		{"map", "%2\r\n+proto\r\n:3\r\n$2\r\nid\r\n:9\r\n", respValue{kind: '%', elems: []respValue{
			{kind: '+', str: []byte("proto")}, {kind: ':', num: 3}, bulk("id"), {kind: ':', num: 9}}}},
		{"set", "~2\r\n+a\r\n+b\r\n", respValue{kind: '~', elems: []respValue{{kind: '+', str: []byte("a")}, {kind: '+', str: []byte("b")}}}},
		{"push", ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n", respValue{kind: '>', elems: []respValue{
			bulk("invalidate"), {kind: '*', elems: []respValue{bulk("k")}}}}},
		{"push of flush-all", ">2\r\n$10\r\ninvalidate\r\n_\r\n", respValue{kind: '>', elems: []respValue{bulk("invalidate"), {kind: '_'}}}},
		{"double", ",1.5\r\n", respValue{kind: ',', str: []byte("1.5"), float: 1.5}},
		{"double exponent", ",-1e-3\r\n", respValue{kind: ',', str: []byte("-1e-3"), float: -0.001}},
		{"double inf", ",inf\r\n", respValue{kind: ',', str: []byte("inf"), float: math.Inf(1)}},
		{"double -inf", ",-inf\r\n", respValue{kind: ',', str: []byte("-inf"), float: math.Inf(-1)}},
		{"boolean true", "#t\r\n", respValue{kind: '#', bool: true}},
		{"boolean false", "#f\r\n", respValue{kind: '#'}},
		{"verbatim", "=15\r\ntxt:Some string\r\n", respValue{kind: '=', format: "txt", str: []byte("Some string")}},
		{"empty verbatim", "=4\r\nmkd:\r\n", respValue{kind: '=', format: "mkd", str: []byte{}}},
		{"big number", "(3492890328409238509324850943850943825024385\r\n", respValue{kind: '(', str: []byte("3492890328409238509324850943850943825024385")}},
		{"negative big number", "(-1\r\n", respValue{kind: '(', str: []byte("-1")}},
		{"bulk error", "!21\r\nSYNTAX invalid syntax\r\n", respValue{kind: '!', str: []byte("SYNTAX invalid syntax")}},
		{"attribute", "|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*1\r\n:2\r\n", respValue{
			kind:  '*',
			elems: []respValue{{kind: ':', num: 2}},
			attrs: []respValue{{kind: '+', str: []byte("key-popularity")}, {kind: '%', elems: []respValue{bulk("a"), {kind: ',', str: []byte("0.19"), float: 0.19}}}},
		}},
		{"attribute inside an array", "*2\r\n|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n:1\r\n", respValue{kind: '*', elems: []respValue{
			{kind: '$', str: []byte("v"), attrs: []respValue{{kind: '+', str: []byte("ttl")}, {kind: ':', num: 3}}}, {kind: ':', num: 1}}}},
	}
	for _, c := range cases {
		for _, slow := range []bool{false, true} {
			got, err := readAll(c.in, slow)
			if err != nil || len(got) != 1 {
				t.Errorf("%s (slow %v): %v, %v", c.name, slow, got, err)
				continue
			}
			if !sameValue(got[0], c.want) {
				t.Errorf("%s (slow %v): got %+v, want %+v", c.name, slow, got[0], c.want)
			}
		}
	}
	// The NaN double, which no == matches.
	got, err := readAll(",nan\r\n", false)
	if err != nil || len(got) != 1 || got[0].kind != ',' || !math.IsNaN(got[0].float) {
		t.Errorf("nan: %+v, %v", got, err)
	}
	if e := (respValue{kind: '-', str: []byte("ERR x")}).err(); e == nil || e.Error() != "redis: ERR x" {
		t.Errorf("error value: %v", e)
	}
	if e := (respValue{kind: '!', str: []byte("ERR y")}).err(); e == nil {
		t.Error("bulk error value: no error")
	}
	if e := bulk("x").err(); e != nil {
		t.Errorf("bulk value: %v", e)
	}
}

// TestRESPReader_stream reads messages back to back, as they come on the connection.
func TestRESPReader_stream(t *testing.T) {
	in := "+OK\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n*2\r\n:-1\r\n$2\r\nv1\r\n+PONG\r\n"
	for _, slow := range []bool{false, true} {
		got, err := readAll(in, slow)
		if err != nil || len(got) != 4 {
			t.Fatalf("slow %v: %+v, %v", slow, got, err)
		}
		kinds := string([]byte{got[0].kind, got[1].kind, got[2].kind, got[3].kind})
		if kinds != "+>*+" || string(got[2].elems[1].str) != "v1" || string(got[3].str) != "PONG" {
			t.Fatalf("slow %v: %+v", slow, got)
		}
	}
}

// TestRESPReader_pushInsideAggregate: a push in the middle of a reply (Redis 6, a key
// expiring while a transaction ran) is not one of its elements: it comes out in pushes,
// and the reply keeps its count.
func TestRESPReader_pushInsideAggregate(t *testing.T) {
	in := "*2\r\n:5\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n$1\r\nv\r\n+OK\r\n"
	r := newRESPReader(strings.NewReader(in))
	v, err := r.read()
	if err != nil || v.kind != '*' || len(v.elems) != 2 || v.elems[0].num != 5 || string(v.elems[1].str) != "v" {
		t.Fatalf("%+v, %v", v, err)
	}
	if len(r.pushes) != 1 || string(r.pushes[0].elems[1].elems[0].str) != "k" {
		t.Fatalf("pushes %+v", r.pushes)
	}
	v, err = r.read()
	if err != nil || v.kind != '+' || len(r.pushes) != 0 {
		t.Fatalf("next: %+v, %v, pushes %+v", v, err, r.pushes)
	}
}

// TestRESPReader_malformed: every malformed or oversized message is an error (errRESP, or
// an unexpected end of stream inside a message), never a panic or a value.
func TestRESPReader_malformed(t *testing.T) {
	cases := map[string]string{
		"unknown type":             "?3\r\n",
		"no CR":                    "+OK\n",
		"integer not a number":     ":12a\r\n",
		"integer overflow":         ":9223372036854775808\r\n",
		"empty integer":            ":\r\n",
		"negative bulk length":     "$-2\r\n",
		"bulk length not a number": "$x\r\n",
		"bulk too long":            "$536870913\r\n",
		"bulk without CRLF":        "$2\r\nabcd\r\n",
		"null with data":           "_x\r\n",
		"null map":                 "%-1\r\n",
		"null set":                 "~-1\r\n",
		"null push":                ">-1\r\n",
		"null verbatim":            "=-1\r\n",
		"null bulk error":          "!-1\r\n",
		"boolean":                  "#x\r\n",
		"double":                   ",1.x\r\n",
		"double hex":               ",0x1p3\r\n",
		"double Inf":               ",Inf\r\n",
		"big number":               "(12a\r\n",
		"empty big number":         "(\r\n",
		"verbatim without format":  "=2\r\nab\r\n",
		"verbatim without colon":   "=5\r\ntxtab\r\n",
		"streamed string":          "$?\r\n;4\r\nabcd\r\n;0\r\n",
		"streamed array":           "*?\r\n:1\r\n.\r\n",
		"too many elements":        "*1048577\r\n",
		"too many pairs":           "%524289\r\n",
		"null attribute":           "|-1\r\n",
		"attribute then nothing":   "|1\r\n+a\r\n+b\r\n",
		"truncated bulk":           "$10\r\nabc",
		"truncated array":          "*3\r\n:1\r\n",
		"truncated line":           "+OK",
		"too deep":                 strings.Repeat("*1\r\n", respMaxDepth+2) + ":1\r\n",
		"line too long":            "+" + strings.Repeat("a", respMaxLine+1) + "\r\n",
		"elements over the budget": "*2\r\n*1048576\r\n",
		"attribute chain":          strings.Repeat("|0\r\n", respMaxDepth+2) + ":1\r\n",
		"pushes without end":       "*1\r\n" + strings.Repeat(">0\r\n", respMaxElems+1),
	}
	for name, in := range cases {
		for _, slow := range []bool{false, true} {
			if slow && len(in) > 1<<16 {
				continue // one byte a Read: long enough for the short ones
			}
			got, err := readAll(in, slow)
			if err == nil {
				t.Errorf("%s (slow %v): no error, %+v", name, slow, got)
				continue
			}
			if !errors.Is(err, errRESP) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%s (slow %v): %v, want a protocol error", name, slow, err)
			}
		}
	}
	// Deep but within bounds reads.
	in := strings.Repeat("*1\r\n", respMaxDepth) + ":1\r\n"
	if got, err := readAll(in, false); err != nil || len(got) != 1 {
		t.Errorf("depth %d: %v", respMaxDepth, err)
	}
}

// TestRESPReader_claimedLengthNotAllocated: a bulk string's claimed length is not
// allocated before its bytes come (a hostile server claiming 512 MB and sending 3 bytes
// costs about respChunk).
func TestRESPReader_claimedLengthNotAllocated(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readAll("$536870912\r\nabc", false)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("%v, want an unexpected end of stream", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 8*respChunk {
		t.Fatalf("allocated %d bytes for a 3-byte bulk string claiming 512 MB", n)
	}
	// A long bulk string that does arrive is read whole.
	long := strings.Repeat("x", 3*respChunk+5)
	got, err := readAll("$"+strconv.Itoa(len(long))+"\r\n"+long+"\r\n", false)
	if err != nil || len(got) != 1 || string(got[0].str) != long {
		t.Fatalf("long bulk: %v", err)
	}
}

// TestAppendCommand writes a command as the server reads it.
func TestAppendCommand(t *testing.T) {
	got := string(appendCommand(nil, "GET", "a\r\nb", ""))
	if want := "*3\r\n$3\r\nGET\r\n$4\r\na\r\nb\r\n$0\r\n\r\n"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	v, err := newRESPReader(strings.NewReader(got)).read()
	if err != nil || len(v.elems) != 3 || string(v.elems[1].str) != "a\r\nb" {
		t.Fatalf("read back: %+v, %v", v, err)
	}
}

// FuzzRESPReader: no input makes the reader panic or return a value of an unknown kind;
// a read either gives a value or an error, and an error ends the stream.
func FuzzRESPReader(f *testing.F) {
	for _, s := range []string{
		"+OK\r\n", "-ERR x\r\n", ":1\r\n", "$3\r\nabc\r\n", "_\r\n", "$-1\r\n", "*-1\r\n",
		"*2\r\n:1\r\n$1\r\na\r\n", "%1\r\n+a\r\n:1\r\n", "~1\r\n+a\r\n",
		">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n", ">2\r\n$10\r\ninvalidate\r\n_\r\n",
		",1.5\r\n", ",inf\r\n", "#t\r\n", "=7\r\ntxt:abc\r\n", "(123\r\n", "!3\r\nERR\r\n",
		"|1\r\n+a\r\n:1\r\n+OK\r\n", "*2\r\n:5\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n$1\r\nv\r\n",
		"$536870912\r\nabc", "*1048576\r\n", strings.Repeat("*1\r\n", 40),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := newRESPReader(bytes.NewReader(in))
		for range 64 {
			v, err := r.read()
			if err != nil {
				return
			}
			if !strings.ContainsRune("+-:$_*%~>,#=(!", rune(v.kind)) {
				t.Fatalf("value of kind %q from %q", v.kind, in)
			}
			for _, p := range r.pushes {
				if p.kind != '>' {
					t.Fatalf("push of kind %q", p.kind)
				}
			}
		}
	})
}

// sameValue compares two values (NaN doubles aside).
func sameValue(a, b respValue) bool {
	if a.kind != b.kind || !bytes.Equal(a.str, b.str) || a.format != b.format || a.num != b.num ||
		a.float != b.float || a.bool != b.bool || len(a.elems) != len(b.elems) || len(a.attrs) != len(b.attrs) {
		return false
	}
	if (a.str == nil) != (b.str == nil) && a.kind != '_' {
		return false
	}
	for i := range a.elems {
		if !sameValue(a.elems[i], b.elems[i]) {
			return false
		}
	}
	for i := range a.attrs {
		if !sameValue(a.attrs[i], b.attrs[i]) {
			return false
		}
	}
	return true
}
