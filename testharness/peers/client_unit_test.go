package peers_test

import (
	"strings"
	"testing"
)

// TestResult: the load generator takes an answer only when it is the request's own result,
// as JSON or as an SSE event among others; an error response, another id or no response
// fails it.
func TestResult(t *testing.T) {
	const id = idBase + 7
	ok := []struct{ ctype, body string }{
		{"application/json", `{"jsonrpc":"2.0","id":100000007,"result":{"content":[]}}`},
		{"text/event-stream", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n" +
			"id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":100000007,\"result\":{\"content\":[]}}\n\n"},
		{"text/event-stream; charset=utf-8", "data:{\"jsonrpc\":\"2.0\",\"id\":100000007,\"result\":{}}"},
	}
	for _, c := range ok {
		if _, err := result(c.ctype, []byte(c.body), id); err != nil {
			t.Errorf("%s %q: %v", c.ctype, c.body, err)
		}
	}
	bad := []struct{ ctype, body, want string }{
		{"application/json", `{"jsonrpc":"2.0","id":100000007,"error":{"code":-32603,"message":"x"}}`, "JSON-RPC error"},
		{"application/json", `{"jsonrpc":"2.0","id":100000008,"result":{}}`, "no response with id"},
		{"text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n", "no response with id"},
		{"application/json", `{"jsonrpc":"2.0","id":100000007}`, "no result"},
	}
	for _, c := range bad {
		if _, err := result(c.ctype, []byte(c.body), id); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.body, err, c.want)
		}
	}
	ref := &reference{callText: "ok", tools: map[string]bool{"a": true, "b": true}}
	if err := ref.checkCall([]byte(`{"content":[{"type":"text","text":"ok"}],"isError":true}`)); err == nil {
		t.Error("an isError result passed")
	}
	if _, err := ref.checkList([]byte(`{"tools":[{"name":"a"}]}`), nil); err == nil {
		t.Error("a list without b passed")
	}
	if _, err := ref.checkList([]byte(`{"tools":[{"name":"a"},{"name":"x"}]}`), map[string]bool{"b": true}); err != nil {
		t.Errorf("b hidden by design: %v", err)
	}
}
