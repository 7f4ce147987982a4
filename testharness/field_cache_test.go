package testharness

import (
	"context"
	"strings"
	"testing"
	"time"
)

// fieldCacheConfig caches the stateless server's whoami (its answer depends on the
// caller's Authorization header) with the cache section's defaults.
const fieldCacheConfig = `{"version": 1, "stateSync": {"defaults": {"cacheControl": "no-store"},
  "policies": [{"match": "whoami", "cacheControl": "immutable"}]}, "cache": {}}`

// TestField_cacheCredentials (issue 24): through the real `stategate serve`, two official
// TypeScript clients with two bearer tokens each get the whoami answer for their own token;
// the same token in a new client hits the cache; neither token shows in the gateway's log.
func TestField_cacheCredentials(t *testing.T) {
	bin := fieldRequire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	up := fieldStateless(ctx, t)
	gw := fieldServe(ctx, t, bin, fieldCacheConfig, up)
	const a, b = "field-token-a-5f1c", "field-token-b-9e2d"
	out := fieldNode(ctx, t, "cache_credentials.mjs", "GATEWAY_URL="+gw.URL, "TOKEN_A="+a, "TOKEN_B="+b)
	t.Logf("%s", out)
	for _, tok := range []string{a, b} {
		if strings.Contains(gw.Log(), tok) {
			t.Errorf("the gateway's log shows a bearer token in clear:\n%s", gw.Log())
		}
	}
}
