package jsonrpc_test

import (
	"testing"

	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/tasks"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// callDocs: answers to a tools/call in the shapes ReadCall tells apart.
var callDocs = []string{
	`{"id":1,"result":{"content":[]}}`,
	` {"id":1,"result":{"content":[],"isError":false}} `,
	`{"id":1,"result":{"content":[],"isError":true}}`,
	`{"id":1,"result":{"content":[],"isError":"false"}}`,
	`{"id":1,"result":{"content":[],"isError":null}}`,
	`{"id":1,"result":"done"}`,
	`{"id":1,"error":{"code":1,"message":"x"}}`,
	`{"id":1,"result":{"content":[]},"error":null}`,
	`{"id":1,"result":{"content":[],"isError":true,"isError":false}}`,
	`{"id":1,"result":{"content":[{"a":1,"a":2}]}}`,
	`{"id":1,"result":{"resultType":"complete","content":[]}}`,
	`{"id":1,"result":{"resultType":"input_required","inputRequests":{}}}`,
	`{"id":1,"result":{"resultType":"task","taskId":"t1"}}`,
	`{"id":1,"result":{"resultType":"task","taskId":7}}`,
	`{"id":1,"result":{"resultType":"complete","taskId":"t1"}}`,
	`{"id":1,"result":{"task":{"taskId":"t2","status":"working"}}}`,
	`{"id":1,"result":{"task":{"taskId":"t\u0033"}}}`,
	`{"id":1,"result":{"task":"t2","taskId":"t4"}}`,
	`{"id":1,"result":{"content":[],"structuredContent":{"ok":true}}}`,
	`{"id":1,"result":{"content":[],"structuredContent":12.5e3}}`,
	`{"id":1,"result":{"content":[],"structured\u0043ontent":"s","is\u0045rror":true}}`,
	`{"id":1,"result":[1,2]}`,
	`[{"id":1,"result":{}}]`,
	`7`,
}

// TestReadCall_sameAsItsParts: the one walk answers what Succeeded, Incomplete, tasks.ID
// and the structuredContent lookup answer each on its own.
func TestReadCall_sameAsItsParts(t *testing.T) {
	for _, doc := range callDocs {
		checkReadCall(t, doc)
	}
}

func checkReadCall(t *testing.T, doc string) {
	t.Helper()
	root := gjson.Parse(doc)
	c := jsonrpc.ReadCall(doc)
	if got, want := c.Succeeded(), jsonrpc.Succeeded(root); got != want {
		t.Errorf("Succeeded(%q) = %v, want %v", doc, got, want)
	}
	if got, want := c.Incomplete(), jsonrpc.Incomplete(root); got != want {
		t.Errorf("Incomplete(%q) = %v, want %v", doc, got, want)
	}
	if root.IsObject() {
		if got, want := c.TaskID(), tasks.ID(root.Get("result")); got != want {
			t.Errorf("TaskID(%q) = %q, want %q", doc, got, want)
		}
		if got, want := c.Structured(), root.Get("result.structuredContent").Raw; got != want {
			t.Errorf("Structured(%q) = %q, want %q", doc, got, want)
		}
	}
}

// FuzzReadCall holds ReadCall to the readers it stands for on every valid document whose
// result repeats no member (the exchange withholds the others before reading them), and to
// no panic on any input.
func FuzzReadCall(f *testing.F) {
	for _, d := range callDocs {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		c := jsonrpc.ReadCall(doc)
		c.Succeeded()
		c.Incomplete()
		c.TaskID()
		c.Structured()
		if jsonx.Validate([]byte(doc), 4096) != nil || jsonrpc.RepeatsMember(gjson.Parse(doc), 0) {
			return
		}
		checkReadCall(t, doc)
	})
}
