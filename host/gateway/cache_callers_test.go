package gateway_test

import (
	"net/http"
	"testing"
)

// TestCache_credentialsSplitEntries (issue 24): with the default cache section, a caller
// presenting another bearer token is never served the first caller's cached result; the
// same token in another session still hits; no Authorization and an empty one are two
// more callers.
func TestCache_credentialsSplitEntries(t *testing.T) {
	up := newKeyedUpstream()
	e := newEnv(t, envOptions{config: keyedConfig(`{}`, ""), upstream: up.handler()})
	as := func(auth ...string) *client {
		h := http.Header{}
		if auth != nil {
			h["Authorization"] = auth
		}
		return e.connectAs(t, h)
	}
	alice, bob, alice2, anon, empty := as("Bearer alice"), as("Bearer bob"), as("Bearer alice"), as(), as("")
	steps := []struct {
		who   string
		c     *client
		want  string
		calls int  // upstream whoami calls after the step
		hit   bool // answered from the cache
	}{
		{"alice", alice, "auth=Bearer alice user= tenant=", 1, false},
		{"bob", bob, "auth=Bearer bob user= tenant=", 2, false},
		{"alice again, another session", alice2, "auth=Bearer alice user= tenant=", 2, true},
		{"bob again", bob, "auth=Bearer bob user= tenant=", 2, true},
		{"no Authorization", anon, "auth= user= tenant=", 3, false},
		{"an empty Authorization", empty, "auth= user= tenant=", 4, false},
		{"no Authorization again", anon, "auth= user= tenant=", 4, true},
	}
	for _, s := range steps {
		got, res := s.c.callText(t, "whoami", nil)
		if got != s.want {
			t.Fatalf("%s: whoami answered %q, want %q (another caller's cached result)", s.who, got, s.want)
		}
		if n := e.upstream.count("whoami"); n != s.calls {
			t.Fatalf("%s: the upstream ran whoami %d times, want %d", s.who, n, s.calls)
		}
		if hit := cacheMeta(res)["hit"] == true; hit != s.hit {
			t.Fatalf("%s: cache hit %v, want %v", s.who, hit, s.hit)
		}
	}
}

// TestCache_principalAndVaryHeaders: the principal header and every header of
// cache.varyHeaders split entries too, in the shared scope as well; the same values
// (header names in any case) hit.
func TestCache_principalAndVaryHeaders(t *testing.T) {
	for _, scope := range []string{"principal", "shared", "session"} {
		t.Run(scope, func(t *testing.T) {
			up := newKeyedUpstream()
			e := newEnv(t, envOptions{config: keyedConfig(`{"scope":"`+scope+`","varyHeaders":["x-TENANT"]}`, "X-User"), upstream: up.handler()})
			as := func(user, tenant string) *client {
				return e.connectAs(t, http.Header{"Authorization": {"Bearer shared-token"}, "X-User": {user}, "X-Tenant": {tenant}})
			}
			a1 := as("ann", "t1")
			calls := 0
			for _, s := range []struct {
				who  string
				c    *client
				want string
			}{
				{"ann in t1", a1, "auth=Bearer shared-token user=ann tenant=t1"},
				{"ann in t2", as("ann", "t2"), "auth=Bearer shared-token user=ann tenant=t2"},
				{"ben in t1", as("ben", "t1"), "auth=Bearer shared-token user=ben tenant=t1"},
			} {
				got, res := s.c.callText(t, "whoami", nil)
				calls++
				if got != s.want || cacheMeta(res) != nil {
					t.Fatalf("%s: whoami answered %q (cache %v), want %q from the upstream", s.who, got, cacheMeta(res), s.want)
				}
				if n := e.upstream.count("whoami"); n != calls {
					t.Fatalf("%s: the upstream ran whoami %d times, want %d", s.who, n, calls)
				}
			}
			// The same caller again hits (in the session scope only in the same session).
			again := a1
			if scope != "session" {
				again = as("ann", "t1")
			}
			got, res := again.callText(t, "whoami", nil)
			if got != "auth=Bearer shared-token user=ann tenant=t1" || cacheMeta(res)["hit"] != true {
				t.Fatalf("ann in t1 again: %q, cache %v; want a hit", got, cacheMeta(res))
			}
		})
	}
}
