// Package benchinput builds the engine inputs the benchmarks and the profiling command
// share (testharness, host, plugin/internal/prof), so every figure is taken on the same
// bytes.
package benchinput

import (
	"fmt"
	"strings"
)

// ToolsList returns a decorate_tools input: a tools/list response with n realistic tools
// (about 245 bytes each), session s1 and the checkout workflow's state not yet stored.
func ToolsList(n int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"tools":[`)
	groups := []string{"tasks", "sprints", "countries", "cart", "users", "reports"}
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		g := groups[i%len(groups)]
		fmt.Fprintf(&sb, `{"name":"%s.op%d","title":"Operation %d","description":"Does operation %d on %s. Returns the affected records.",`+
			`"inputSchema":{"type":"object","properties":{"id":{"type":"string","description":"Record id"},"limit":{"type":"integer"}},"required":["id"]},`+
			`"annotations":{"readOnlyHint":%t}}`, g, i, i, i, g, i%2 == 0)
	}
	sb.WriteString(`],"nextCursor":"next-page"}}`)
	return []byte(`{"message":` + sb.String() + `,"session":"s1","states":{"stategate/v1/checkout/session//s1":null}}`)
}

// CallResult returns a decorate_result input for tasks.update whose result text is size
// bytes.
func CallResult(size int) []byte {
	text := strings.Repeat("All work and no play makes Jack a dull boy. ", size/44+1)[:size]
	return []byte(`{"tool":"tasks.update","message":{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"` + text + `"}]}}}`)
}

// CheckInput returns a check_limits input of about 1 KB (an array of 60 items).
func CheckInput() []byte {
	items := make([]string, 60)
	for i := range items {
		items[i] = fmt.Sprintf(`"sku-%04d"`, i)
	}
	return []byte(`{"tool":"orders.submit","arguments":{"customer":"c-42","items":[` + strings.Join(items, ",") + `],"note":"leave at the door"},"session":"s1"}`)
}
