package exchange

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
			if got := isAnswer(gjson.Parse(tt.msg), []byte(tt.id)); got != tt.want {
				t.Errorf("isAnswer(%s, %s) = %v", tt.msg, tt.id, got)
			}
			// RewriteJSON reads the members in the validator's pass: the same answer.
			var m answerMembers
			err := jsonx.ValidateObject([]byte(tt.msg), 64, m.see(tt.msg))
			if err != nil && !notAnObject(err) {
				t.Fatal(err)
			}
			result, ok := m.answer([]byte(tt.id))
			want, wantOK := answerOf(gjson.Parse(tt.msg), []byte(tt.id))
			if ok != wantOK || result.Raw != want.Raw || result.Index != want.Index {
				t.Errorf("answerMembers on %s = %q at %d, %v; answerOf = %q at %d, %v", tt.msg, result.Raw, result.Index, ok, want.Raw, want.Index, wantOK)
			}
		})
	}
}

// TestResultOf: the decorated list's result is found by position under the core's own
// envelope, and by gjson otherwise.
func TestResultOf(t *testing.T) {
	for msg, want := range map[string]string{
		listEnvelope + `{"tools":[{"name":"a"}],"nextCursor":"x"}}`: `{"tools":[{"name":"a"}],"nextCursor":"x"}`,
		listEnvelope + `{}}`:                             `{}`,
		`{"id":0,"jsonrpc":"2.0","result":{"tools":[]}}`: `{"tools":[]}`,
		listEnvelope + `{"tools":[]},"x":1}`:             `{"tools":[]}`,
	} {
		if got := resultOf(gjson.Parse(msg)); got.Raw != want || !got.IsObject() {
			t.Errorf("resultOf(%s) = %s, want %s", msg, got.Raw, want)
		}
	}
}

func TestEchoSafe(t *testing.T) {
	for raw, want := range map[string]bool{
		`1`: true, `-7`: true, `123456789012345`: true, `"abc-1"`: true, `"é"`: true,
		`1.5`: false, `1e3`: false, `1234567890123456`: false, `"a\"b"`: false, `"\u0061"`: false,
		"\"\xff\"": false, "\"a\x01\"": false, `null`: false, `true`: false,
	} {
		if got := echoSafe(gjson.Parse(raw)); got != want {
			t.Errorf("echoSafe(%s) = %v, want %v", raw, got, want)
		}
	}
}

func TestMintID(t *testing.T) {
	seen := map[string]bool{}
	for n := 3; n < 40; n++ {
		id := mintID(n)
		if len(id) != n || !gjson.ValidBytes(id) || gjson.ParseBytes(id).Type != gjson.String || !echoSafe(gjson.ParseBytes(id)) {
			t.Fatalf("mintID(%d) = %s: want an echo-safe JSON string of %d bytes", n, id, n)
		}
		seen[string(id)] = true
	}
	if len(seen) != 37 {
		t.Errorf("minted ids repeat: %d distinct of 37", len(seen))
	}
}

func TestSessionOwned(t *testing.T) {
	for key, want := range map[string]bool{
		"stategate/v1/checkout/session//s1":        true,
		"stategate/v1/cart/arg.cart_id/alice/c-42": false,
		"stategate/v1/cart/arg.session/alice/c-42": false,
		"stategate/v1/w/session/p%2Fq/a%2Fsession": true,
		"garbage": false,
	} {
		if got := sessionOwned(key); got != want {
			t.Errorf("sessionOwned(%q) = %v, want %v", key, got, want)
		}
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
		if got := repeatsMember(gjson.Parse(doc), 0); got != want {
			t.Errorf("repeatsMember(%.60s...) = %v, want %v", doc, got, want)
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
		if got := succeeded(gjson.Parse(msg)); got != want {
			t.Errorf("succeeded(%s) = %v, want %v", msg, got, want)
		}
	}
}

func TestOriginPolicy(t *testing.T) {
	loop := OriginPolicy{Loopback: true}
	for _, tc := range []struct {
		name         string
		p            OriginPolicy
		origin, host string
		ok           bool
	}{
		{"no origin, loopback host", loop, "", "127.0.0.1:8080", true},
		{"localhost origin", loop, "http://localhost:6274", "localhost:8080", true},
		{"ipv6 loopback host", loop, "", "[::1]:8080", true},
		{"rebinding host", loop, "", "evil.example:8080", false},
		{"foreign origin", loop, "http://evil.example", "127.0.0.1:8080", false},
		{"null origin", loop, "null", "127.0.0.1:8080", false},
		{"allowed origin", OriginPolicy{Loopback: true, AllowedOrigins: []string{"https://app.example"}}, "https://app.example", "127.0.0.1", true},
		{"loopback origin not in an explicit list", OriginPolicy{AllowedOrigins: []string{"https://app.example"}}, "http://localhost", "mcp.example", false},
		{"any origin", OriginPolicy{AllowedOrigins: []string{"*"}}, "http://evil.example", "mcp.example", true},
		{"public listener, any host", OriginPolicy{}, "", "mcp.example", true},
		{"allowed host", OriginPolicy{AllowedHosts: []string{"mcp.example"}}, "", "mcp.example:443", true},
		{"host outside the allowed list", OriginPolicy{AllowedHosts: []string{"mcp.example"}}, "", "other.example", false},
	} {
		if err := tc.p.Check(tc.origin, tc.host); (err == nil) != tc.ok {
			t.Errorf("%s: Check(%q, %q) = %v, want ok=%v", tc.name, tc.origin, tc.host, err, tc.ok)
		}
	}
}

func TestWithListChanged(t *testing.T) {
	for in, want := range map[string]string{
		`{"id":1,"result":{"capabilities":{"tools":{}}}}`:                    `{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}}}}`,
		`{"id":1,"result":{"capabilities":{"tools":{"listChanged":false}}}}`: `{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}}}}`,
		`{"id":1,"result":{"capabilities":{}}}`:                              `{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}}}}`,
		`{"id":1,"result":{"x":1}}`:                                          `{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}},"x":1}}`,
	} {
		out, ok := withListChanged([]byte(in))
		if !ok || string(out) != want {
			t.Errorf("withListChanged(%s) = %s %v; want %s", in, out, ok, want)
		}
	}
	if _, ok := withListChanged([]byte(`{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}}}}`)); ok {
		t.Error("changed an answer that already declares listChanged")
	}
}
