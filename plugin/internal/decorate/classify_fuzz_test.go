package decorate_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/plugin/internal/decorate"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// classifySeeds are tools/call answers of every shape both eras give.
var classifySeeds = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false,"resultType":"complete"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{}}},"requestState":"s"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s","isError":false}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t1","status":"working"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[],"isError":true}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"resultType":null,"content":[]}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"resultType":"\u0063omplete","content":[]}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":[1,"a",{"b":null}]}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":"text"}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Resource not found"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"content":[]},"error":{"code":1}}`,
	`{"jsonrpc":"2.0","id":1,"result":[]}`,
	`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","resultType":"complete"}}`,
}

// FuzzClassify holds the two readers of a tools/call answer (the engine's, which decides
// the invalidation block, and the exchange core's, which decides transitions, health and
// the cache) to one classification, and both to a reference read with encoding/json: a
// result is a success when it is an object with no error beside it, isError absent, null or
// false... exactly as the engine documents it, and not the call's completion when its
// resultType is anything but "complete" (input_required, task, unknown kinds). Success and
// incompleteness never hold together.
func FuzzClassify(f *testing.F) {
	for _, s := range classifySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		if jsonx.Validate([]byte(msg), 256) != nil {
			return
		}
		doc := gjson.Parse(msg)
		engine := decorate.ReadMessage(msg)
		ok, incomplete := jsonrpc.Succeeded(doc), jsonrpc.Incomplete(doc)
		if ok && incomplete {
			t.Fatalf("both a success and incomplete: %s", msg)
		}
		if jsonrpc.RepeatsMember(doc, 0) || engine.Ambiguous || bytes.Contains([]byte(msg), []byte(`\`)) {
			// Repeated members are refused by both; escaped names and values are read as
			// not complete by both (conservative), which a decoded reference cannot judge.
			if ok {
				if jsonrpc.RepeatsMember(doc, 0) {
					t.Fatalf("a message repeating a member is a success: %s", msg)
				}
			}
			return
		}
		if got := engine.Succeeded(); got != ok {
			t.Fatalf("engine success %v, exchange success %v: %s", got, ok, msg)
		}
		wantOK, wantIncomplete := referenceClassify(msg)
		if ok != wantOK || incomplete != wantIncomplete {
			t.Fatalf("success %v incomplete %v, reference %v %v: %s", ok, incomplete, wantOK, wantIncomplete, msg)
		}
		if engine.Complete() == incomplete && engine.ResAt >= 0 && !engine.HasError {
			t.Fatalf("engine complete %v, exchange incomplete %v: %s", engine.Complete(), incomplete, msg)
		}
	})
}

// referenceClassify reads msg with encoding/json.
func referenceClassify(msg string) (ok, incomplete bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal([]byte(msg), &top) != nil {
		return false, false
	}
	raw, has := top["result"]
	if _, isErr := top["error"]; isErr || !has {
		return false, false
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(raw, &res) != nil || res == nil {
		return false, false
	}
	if rt, has := res["resultType"]; has && string(rt) != `"complete"` {
		return false, true
	}
	e, has := res["isError"]
	return !has || string(e) == "false", false
}
