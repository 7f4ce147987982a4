package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callRaw calls tool with arguments given as raw JSON (sent as written, compacted) and
// returns the text of its result and whether it came from the cache.
func (c *client) callRaw(t *testing.T, tool, args string) (string, bool) {
	t.Helper()
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
	if err != nil || res.IsError {
		t.Fatalf("%s %s: %v %q", tool, args, err, texts(res))
	}
	return strings.Join(texts(res), ""), cacheMeta(res)["hit"] == true
}

// TestCache_numberLiteralsAreDistinctKeys (issue 25, finding 4): arguments a float64
// would merge (integers past 2^53, 20-digit ids differing in the last digit, 10 and 10.0)
// are each their own entry, as are other strings, case, null against absent and array
// order, so each caller gets the upstream's answer to its own arguments; the same
// arguments spelled another way (member order, whitespace, escapes) still hit.
func TestCache_numberLiteralsAreDistinctKeys(t *testing.T) {
	up := newKeyedUpstream()
	e := newEnv(t, envOptions{config: keyedConfig(`{}`, ""), upstream: up.handler()})
	c := e.connect(t, sessionEra)
	distinct := []string{
		`{"id":9007199254740992}`, `{"id":9007199254740993}`,
		`{"id":12345678901234567890}`, `{"id":12345678901234567891}`,
		`{"id":10}`, `{"id":10.0}`, `{"id":1e1}`, `{"id":-0}`, `{"id":0}`,
		`{"id":"a"}`, `{"id":"A"}`, `{"id":null}`, `{}`, `{"id":[1,2]}`, `{"id":[2,1]}`,
	}
	for i, args := range distinct {
		got, hit := c.callRaw(t, "ids.get", args)
		if got != "args="+args || hit {
			t.Fatalf("ids.get %s answered %q (cache hit %v): the result of other arguments", args, got, hit)
		}
		if n := e.upstream.count("ids.get"); n != i+1 {
			t.Fatalf("after %s the upstream ran ids.get %d times, want %d", args, n, i+1)
		}
	}
	for _, same := range [][2]string{
		{`{"id":9007199254740993}`, `{"id":9007199254740993}`},
		{`{"id":[1,2]}`, `{ "id" : [ 1 , 2 ] }`},
		{`{"id":"A"}`, `{"id":"\u0041"}`},
		{`{"id":10.0}`, `{"id": 10.0}`},
	} {
		if got, hit := c.callRaw(t, "ids.get", same[1]); got != "args="+same[0] || !hit {
			t.Errorf("ids.get %s answered %q (cache hit %v), want the cached answer to %s", same[1], got, hit, same[0])
		}
	}
	if n := e.upstream.count("ids.get"); n != len(distinct) {
		t.Errorf("the upstream ran ids.get %d times, want %d", n, len(distinct))
	}
}

// TestCache_toolNameWithUnpairedSurrogate: a tool name readers decode differently (an
// unpaired surrogate escape: U+FFFD, swallowing what follows, or a lone code unit) is
// invalid params; two such names could otherwise share a cache entry, or be gated as
// one tool and run as another. The upstream is not called.
func TestCache_toolNameWithUnpairedSurrogate(t *testing.T) {
	up := newKeyedUpstream()
	e := newEnv(t, envOptions{config: keyedConfig(`{}`, ""), upstream: up.handler()})
	sid := rawSession(t, e.url)
	resp := rawPost(t, e.url, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ids.\ud800\u0041","arguments":{}}}`, "application/json")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"code":-32602`) || !strings.Contains(string(body), "unpaired UTF-16 surrogate") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if n := e.upstream.count("ids.\ufffdA") + e.upstream.count("ids.\ufffd"); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}
}
