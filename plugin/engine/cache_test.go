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
		`{"tool":"countries.list","principal":"a","arguments":{ "tags" : [ "x" ] , "n" : 1e1 , "region" : "EU" }}`,
		`{"tool":"countries.list","principal":"a","arguments":{"region":"\u0045U","n":10.0,"tags":["\u0078"]}}`,
		`{"tool":"countries.list","principal":"a","session":"other","arguments":{"region":"EU","n":100e-1,"tags":["x"]}}`,
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
	} {
		if k := cacheKey(t, e, other); k == base || k == "" {
			t.Errorf("%s: key %q, want another key than %s", other, k, base)
		}
	}
	if k := cacheKey(t, e, `{"tool":"countries.list","principal":"a","arguments":{"a":1,"a":2}}`); k != "" {
		t.Errorf("repeated member: key %q, want none", k)
	}
}
