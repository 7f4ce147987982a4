package admission

import (
	"net/http"
	"testing"

	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/tidwall/gjson"
)

// TestBody: what admission refuses of a body, with the status and code it answers.
func TestBody(t *testing.T) {
	for _, tc := range []struct {
		name, body   string
		status, code int
		id           string
	}{
		{"one message", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 0, 0, ""},
		{"over the limit keeps the id", `{"id":7,"method":"tools/call","params":{"x":"` + string(make([]byte, 64)) + `"}}`, 413, jsonrpc.CodeInvalidRequest, "7"},
		{"not json", `{"id":1,`, 400, jsonrpc.CodeParseError, ""},
		{"a scalar", `1`, 400, jsonrpc.CodeParseError, ""},
		{"repeated member", `{"id":1,"method":"a","method":"b"}`, 400, jsonrpc.CodeInvalidRequest, ""},
	} {
		_, id, r := Body([]byte(tc.body), 64)
		switch {
		case r == nil && tc.status != 0, r != nil && (r.Status != tc.status || r.Code != tc.code):
			t.Errorf("%s: refusal %+v, want status %d code %d", tc.name, r, tc.status, tc.code)
		case string(id) != tc.id:
			t.Errorf("%s: id %q, want %q", tc.name, id, tc.id)
		}
	}
}

// TestAgree_and_Batch: headers that disagree with the body, and batches, are refused.
func TestAgree_and_Batch(t *testing.T) {
	doc := gjson.Parse(`{"id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	h := http.Header{"Mcp-Name": {"b"}}
	e := jsonrpc.ReadEnvelope(doc)
	if v, r := Agree(h, &e, "", "tools/call"); r == nil || r.Code != CodeHeaderMismatch || v != "2026-07-28" {
		t.Errorf("Agree = %q, %+v; want the body's version and a mismatch", v, r)
	}
	gated := func(m string) bool { return m == "tools/call" }
	for batch, refused := range map[string]bool{
		`[{"id":1,"method":"ping"}]`:       false,
		`[]`:                               true,
		`[1]`:                              true,
		`[{"id":1,"method":"tools/call"}]`: true,
	} {
		if r := Batch(gjson.Parse(batch), "2025-03-26", gated); (r != nil) != refused {
			t.Errorf("Batch(%s) = %+v, want refused=%v", batch, r, refused)
		}
	}
	if r := Batch(gjson.Parse(`[{"id":1,"method":"ping"}]`), "2025-06-18", gated); r == nil {
		t.Error("a batch under 2025-06-18 passed")
	}
}
