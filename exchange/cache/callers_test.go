package cache

import (
	"net/http"
	"strings"
	"testing"
)

// pairs is a host's headers as field lines (the Envoy filter's proxy-wasm pairs).
type pairs [][2]string

func (p pairs) Get(name string) string {
	if v := p.Values(name); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (p pairs) Values(name string) []string {
	var out []string
	for _, kv := range p {
		if strings.EqualFold(kv[0], name) {
			out = append(out, kv[1])
		}
	}
	return out
}

// TestCallerKeys: credentials that differ in any way make another key; the same ones
// (header names in any case) the same key; nothing of a credential shows in the key.
func TestCallerKeys(t *testing.T) {
	k := newCallerKeys("X-User", []string{"x-tenant", "X-USER", "authorization"})
	if want := []string{"authorization", "x-user", "x-tenant"}; strings.Join(k.names, ",") != strings.Join(want, ",") {
		t.Fatalf("names %q, want %q", k.names, want)
	}
	key := func(h http.Header) string { return k.key("enginekey", h) }
	base := key(http.Header{"Authorization": {"Bearer a"}, "X-User": {"u"}, "X-Tenant": {"t"}})
	if len(base) != 64 || strings.Contains(base, "Bearer") {
		t.Fatalf("key %q is not a hex digest", base)
	}
	same := http.Header{}
	same.Set("authorization", "Bearer a")
	same.Set("x-user", "u")
	same.Set("X-TENANT", "t")
	same.Set("X-Other", "ignored")
	if got := key(same); got != base {
		t.Errorf("the same credentials make another key")
	}
	seen := map[string]string{base: "base"}
	for name, h := range map[string]http.Header{
		"another token":          {"Authorization": {"Bearer b"}, "X-User": {"u"}, "X-Tenant": {"t"}},
		"another principal":      {"Authorization": {"Bearer a"}, "X-User": {"v"}, "X-Tenant": {"t"}},
		"another tenant":         {"Authorization": {"Bearer a"}, "X-User": {"u"}, "X-Tenant": {"t2"}},
		"no tenant":              {"Authorization": {"Bearer a"}, "X-User": {"u"}},
		"an empty tenant":        {"Authorization": {"Bearer a"}, "X-User": {"u"}, "X-Tenant": {""}},
		"a repeated token":       {"Authorization": {"Bearer a", "Bearer b"}, "X-User": {"u"}, "X-Tenant": {"t"}},
		"repeated, other order":  {"Authorization": {"Bearer b", "Bearer a"}, "X-User": {"u"}, "X-Tenant": {"t"}},
		"values moved between":   {"Authorization": {"Bearer a"}, "X-User": {"ut"}, "X-Tenant": {""}},
		"no credentials at all":  {},
		"two empty tokens":       {"Authorization": {"", ""}, "X-User": {"u"}, "X-Tenant": {"t"}},
		"one empty token":        {"Authorization": {""}, "X-User": {"u"}, "X-Tenant": {"t"}},
		"a token in the tenant":  {"Authorization": {"u"}, "X-Tenant": {"Bearer a"}},
		"framing: value carries": {"Authorization": {"Bearer a\x00x-user"}, "X-Tenant": {"t"}},
	} {
		got := key(h)
		if other, dup := seen[got]; dup {
			t.Errorf("%s: the same key as %s", name, other)
		}
		seen[got] = name
	}
	if k.key("other", same) == base {
		t.Error("another engine key makes the same key")
	}
	if newCallerKeys("X-User", []string{"x-tenant"}).key("enginekey", same) == base {
		t.Error("two cores share a secret")
	}
	// A host whose headers are field lines keys as http.Header; nil headers are all absent.
	if k.key("enginekey", pairs{{"authorization", "Bearer a"}, {"X-User", "u"}, {"x-tenant", "t"}}) != base {
		t.Error("field-line headers key differently from http.Header")
	}
	if k.key("enginekey", nil) != key(http.Header{}) {
		t.Error("nil headers are not the request without credentials")
	}
}
