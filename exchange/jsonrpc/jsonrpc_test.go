package jsonrpc

import (
	"strings"
	"testing"

	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

func TestIsAnswer(t *testing.T) {
	tests := []struct {
		name, msg, id string
		want          bool
	}{
		{"same number", `{"id":1,"result":{}}`, `1`, true},
		{"number spelled differently", `{"id":1.0,"result":{}}`, `1`, true},
		{"string escaped differently", `{"id":"\u0061","result":{}}`, `"a"`, true},
		{"an error answer", `{"id":1,"error":{"code":1,"message":"x"}}`, `1`, true},
		{"number vs string", `{"id":"1","result":{}}`, `1`, false},
		{"other id", `{"id":2,"result":{}}`, `1`, false},
		{"a request with the same id is not an answer", `{"id":1,"method":"sampling/createMessage"}`, `1`, false},
		{"neither result nor error", `{"id":1}`, `1`, false},
		{"a notification", `{"method":"notifications/progress"}`, `1`, false},
	}
	tests = append(tests, []struct {
		name, msg, id string
		want          bool
	}{
		{"first of repeated ids", `{"id":1,"id":2,"result":{}}`, `1`, true},
		{"first of repeated ids, other", `{"id":2,"id":1,"result":{}}`, `1`, false},
		{"an array", `[{"id":1,"result":{}}]`, `1`, false},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsAnswer(gjson.Parse(tt.msg), []byte(tt.id)); got != tt.want {
				t.Errorf("IsAnswer(%s, %s) = %v", tt.msg, tt.id, got)
			}
			// RewriteJSON reads the members in the validator's pass: the same answer.
			var m AnswerMembers
			err := jsonx.ValidateObject([]byte(tt.msg), 64, m.See(tt.msg))
			if err != nil && !NotAnObject(err) {
				t.Fatal(err)
			}
			result, ok := m.Answer([]byte(tt.id))
			want, wantOK := AnswerOf(gjson.Parse(tt.msg), []byte(tt.id))
			if ok != wantOK || result.Raw != want.Raw || result.Index != want.Index {
				t.Errorf("AnswerMembers on %s = %q at %d, %v; AnswerOf = %q at %d, %v", tt.msg, result.Raw, result.Index, ok, want.Raw, want.Index, wantOK)
			}
		})
	}
}

func TestEchoSafe(t *testing.T) {
	for raw, want := range map[string]bool{
		`1`: true, `-7`: true, `123456789012345`: true, `"abc-1"`: true, `"é"`: true,
		`1.5`: false, `1e3`: false, `1234567890123456`: false, `"a\"b"`: false, `"\u0061"`: false,
		"\"\xff\"": false, "\"a\x01\"": false, `null`: false, `true`: false,
	} {
		if got := EchoSafe(gjson.Parse(raw)); got != want {
			t.Errorf("EchoSafe(%s) = %v, want %v", raw, got, want)
		}
	}
}

func TestMintID(t *testing.T) {
	seen := map[string]bool{}
	for n := 3; n < 40; n++ {
		id := MintID(n)
		if len(id) != n || !gjson.ValidBytes(id) || gjson.ParseBytes(id).Type != gjson.String || !EchoSafe(gjson.ParseBytes(id)) {
			t.Fatalf("MintID(%d) = %s: want an echo-safe JSON string of %d bytes", n, id, n)
		}
		seen[string(id)] = true
	}
	if len(seen) != 37 {
		t.Errorf("minted ids repeat: %d distinct of 37", len(seen))
	}
}

func TestRepeatsMember(t *testing.T) {
	var many strings.Builder
	many.WriteString("{")
	for i := 0; i < 5000; i++ {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`"k` + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)) + `":1`)
	}
	for doc, want := range map[string]bool{
		`{"a":1,"b":{"c":[{"d":1,"d":2}]}}`: true,
		`{"a":1,"b":{"c":[{"d":1,"e":2}]}}`: false,
		`[{"a":1},{"a":1}]`:                 false,
		`{"a":1,"\u0061":2}`:                true, // the same name, spelled differently
		many.String() + `}`:                 false,
		many.String() + `,"kaaa":2}`:        true,
	} {
		if got := RepeatsMember(gjson.Parse(doc), 0); got != want {
			t.Errorf("RepeatsMember(%.60s...) = %v, want %v", doc, got, want)
		}
	}
}

func TestSucceeded(t *testing.T) {
	for msg, want := range map[string]bool{
		`{"id":1,"result":{"content":[]}}`:                                true,
		`{"id":1,"result":{"content":[],"isError":false}}`:                true,
		`{"id":1,"result":{"content":[],"isError":true}}`:                 false,
		`{"id":1,"result":{"content":[],"isError":"false"}}`:              false,
		`{"id":1,"result":{"content":[],"isError":null}}`:                 false,
		`{"id":1,"result":"done"}`:                                        false,
		`{"id":1,"error":{"code":1,"message":"x"}}`:                       false,
		`{"id":1,"result":{"content":[],"isError":true,"isError":false}}`: false,
	} {
		if got := Succeeded(gjson.Parse(msg)); got != want {
			t.Errorf("Succeeded(%s) = %v, want %v", msg, got, want)
		}
	}
}
