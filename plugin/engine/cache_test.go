package engine

import (
	"testing"

	"github.com/tidwall/gjson"
)

const cacheConfig = `{"version":1,"principal":{"header":"X-User"},
 "stateSync":{"defaults":{"cacheControl":"no-store"},"policies":[{"match":"countries.*","cacheControl":"immutable"}]},
 "cache":{}}`

func cacheKey(t *testing.T, e *Engine, in string) string {
	t.Helper()
	out, err := e.CheckLimits([]byte(in))
	if err != nil {
		t.Fatalf("check_limits(%s): %v", in, err)
	}
	return gjson.GetBytes(out, "cache.key").Str
}

// TestCacheKey_spellings: every spelling of the same arguments has one key; another
// value, tool or principal has another; a repeated member has none (not cacheable).
func TestCacheKey_spellings(t *testing.T) {
	e, err := New([]byte(cacheConfig))
	if err != nil {
		t.Fatal(err)
	}
	base := cacheKey(t, e, `{"tool":"countries.list","principal":"a","arguments":{"region":"EU","n":10,"tags":["x"]}}`)
	if len(base) != 64 {
		t.Fatalf("key %q is not a hex SHA-256", base)
	}
	for _, same := range []string{
		`{"tool":"countries.list","principal":"a","arguments":{ "tags" : [ "x" ] , "n" : 10 , "region" : "EU" }}`,
		`{"tool":"countries.list","principal":"a","arguments":{"region":"\u0045U","n":10,"tags":["\u0078"]}}`,
		`{"tool":"countries.list","principal":"a","session":"other","arguments":{"region":"EU","n":10,"tags":["x"]}}`,
	} {
		if k := cacheKey(t, e, same); k != base {
			t.Errorf("%s: key %s, want %s", same, k, base)
		}
	}
	for _, other := range []string{
		`{"tool":"countries.list","principal":"b","arguments":{"region":"EU","n":10,"tags":["x"]}}`,
		`{"tool":"countries.get","principal":"a","arguments":{"region":"EU","n":10,"tags":["x"]}}`,
		`{"tool":"countries.list","principal":"a","arguments":{"region":"EU","n":10,"tags":["x","y"]}}`,
		`{"tool":"countries.list","principal":"a","arguments":{"region":"EU","n":"10","tags":["x"]}}`,
		// Number literals as written (issue 25, finding 4): readers that keep integers or
		// decimals tell these apart.
		`{"tool":"countries.list","principal":"a","arguments":{"region":"EU","n":10.0,"tags":["x"]}}`,
		`{"tool":"countries.list","principal":"a","arguments":{"region":"EU","n":1e1,"tags":["x"]}}`,
		`{"tool":"countries.list","principal":"a","arguments":{"region":"eu","n":10,"tags":["x"]}}`,
		`{"tool":"countries.list","principal":"a","arguments":{"region":"EU","n":10,"tags":["x"],"extra":null}}`,
	} {
		if k := cacheKey(t, e, other); k == base || k == "" {
			t.Errorf("%s: key %q, want another key than %s", other, k, base)
		}
	}
	for _, none := range []string{
		`{"tool":"countries.list","principal":"a","arguments":{"a":1,"a":2}}`,
		`{"tool":"countries.list","principal":"a","arguments":{"a":"\ud800\u0041"}}`,
	} {
		if k := cacheKey(t, e, none); k != "" {
			t.Errorf("%s: key %q, want none (readers disagree on these arguments)", none, k)
		}
	}
}

// TestCacheKey_numberLiterals (issue 25, finding 4): integers past 2^53 and ids that a
// float64 rounds alike each get their own key.
func TestCacheKey_numberLiterals(t *testing.T) {
	e, err := New([]byte(cacheConfig))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, n := range []string{"9007199254740992", "9007199254740993", "12345678901234567890",
		"12345678901234567891", "1e400", "1E400", "-0", "0", "0.1", "0.10"} {
		k := cacheKey(t, e, `{"tool":"countries.list","principal":"a","arguments":{"id":`+n+`}}`)
		if k == "" {
			t.Fatalf("id %s: not cacheable", n)
		}
		if other, dup := seen[k]; dup {
			t.Errorf("ids %s and %s share a cache key", other, n)
		}
		seen[k] = n
	}
}
