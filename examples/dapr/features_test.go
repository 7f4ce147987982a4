package dapr_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host/demo"
)

// stateless is a configuration that needs no state shared between requests: what runs in
// Dapr, which mounts no directory.
const stateless = `{"version":1,"names":{"separator":"."},
 "stateSync":{"defaults":{"cacheControl":"no-store"},"policies":[
  {"match":"countries.*","cacheControl":"immutable"},
  {"match":"tasks.update","invalidates":["tasks.*","sprints.*"]}]},
 "limits":{"maxArraySize":100,"tools":{"bulk.import":{"maxArraySize":3}}}}`

// TestStatelessFeatures: the official Go SDK client through Dapr's wasm middleware running
// the built module, in front of the demo upstream (official Go SDK): the list decorated
// with cache hints, a mutation's result with its invalidation block, an argument array
// over its limit denied, a call under it passed.
func TestStatelessFeatures(t *testing.T) {
	up := httptest.NewServer(demo.Handler(demo.Options{}))
	t.Cleanup(up.Close)
	origin, err := startDapr(t, []byte(stateless), up.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "dapr-test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: origin + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect through Dapr's middleware: %v", err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	hints := map[string]string{}
	for _, tool := range list.Tools {
		hints[tool.Name] = tool.Description
	}
	if !strings.HasSuffix(hints["countries.list"], "[Cache-Control: immutable]") || !strings.HasSuffix(hints["tasks.list"], "[Cache-Control: no-store]") {
		t.Fatalf("tools/list not decorated: countries.list %q, tasks.list %q", hints["countries.list"], hints["tasks.list"])
	}
	call := func(name string, args any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	text := func(res *mcp.CallToolResult) string {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	updated := call("tasks.update", map[string]any{"id": "T1", "status": "done"})
	if updated.IsError || !strings.Contains(text(updated), "[System: Cache invalidated for tasks.*, sprints.* — caused by tasks.update]") {
		t.Fatalf("tasks.update: no invalidation block: %s", text(updated))
	}
	over := call("bulk.import", map[string]any{"rows": []int{1, 2, 3, 4}})
	m, _ := over.Meta[abi.MetaError].(map[string]any)
	if code, _ := m["code"].(string); !over.IsError || code != abi.DenyArrayTooLarge {
		t.Fatalf("bulk.import with 4 rows (limit 3): want %s, got isError=%v %v: %s", abi.DenyArrayTooLarge, over.IsError, m, text(over))
	}
	if under := call("bulk.import", map[string]any{"rows": []int{1, 2, 3}}); under.IsError {
		t.Fatalf("bulk.import with 3 rows: %s", text(under))
	}
}
