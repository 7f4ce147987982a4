package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/tidwall/gjson"
)

// TestDecoratesResults proves the host fact decoratesResults: for every configuration of
// the golden vectors (and a few written here) that answers false, decorate_result answers
// every message of the vectors and of the cases below unchanged, byte for byte, with no
// invalidation and no truncation, or refuses it (a host then passes the message as it is):
// the answer a host that skips the call sends. The configurations that answer true are
// those that can change a message (most of them do on the cases below, so the test can
// fail both ways).
func TestDecoratesResults(t *testing.T) {
	root := filepath.Join("..", "..", "abi", "testdata")
	configs := map[string][]byte{
		"policies without invalidates": []byte(`{"version":1,"stateSync":{"policies":[{"match":"**","cacheControl":"no-store"}]}}`),
		"a tool's response limit":      []byte(`{"version":1,"limits":{"tools":{"big.*":{"maxResponseBytes":600}}}}`),
		"a tool's array limit only":    []byte(`{"version":1,"limits":{"maxArraySize":3,"tools":{"big.*":{"timeoutMs":5}}}}`),
		"fromAnnotations":              []byte(`{"version":1,"stateSync":{"fromAnnotations":true}}`),
	}
	files, _ := filepath.Glob(filepath.Join(root, "config", "*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		configs[filepath.Base(f)] = raw
	}
	tools := map[string]bool{"tasks.update": true, "tasks.get": true, "big.one": true, "update": true, "a__b": true, "x": true}
	var messages []string
	vectors, _ := filepath.Glob(filepath.Join(root, "*", "*.json"))
	for _, f := range vectors {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Config json.RawMessage `json:"config"`
			Input  json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		if len(v.Config) > 0 && v.Config[0] == '{' {
			configs[filepath.Base(f)] = v.Config
		}
		in := gjson.ParseBytes(v.Input)
		if m := in.Get("message"); m.IsObject() {
			messages = append(messages, m.Raw)
		}
		if tool := in.Get("tool"); tool.Type == gjson.String {
			tools[tool.Str] = true
		}
	}
	big := strings.Repeat("x", 20<<10)
	messages = append(messages,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`,
		`{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"text","text":"`+big+`"}],"structuredContent":{"s":"`+big+`"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"a":[1,2,3,4,5]}}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"`+big+`"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a"}],"content":[]}}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":`+strings.Repeat(`{"a":`, 300)+`1`+strings.Repeat(`}`, 300)+`}`,
		" \r\n\t{ \"jsonrpc\" : \"2.0\" , \"id\" : 1 , \"result\" : { \"content\" : [ ] } }\n\t\r ",
	)
	seen := map[bool]int{}
	for name, cfg := range configs {
		e, err := New(cfg)
		if err != nil {
			continue
		}
		decorates := e.HostFacts().DecoratesResults
		if !decorates {
			seen[false]++
		}
		names := []string{}
		for tool := range tools {
			names = append(names, tool)
		}
		names = append(names, e.boundTools()...)
		changed := false
		for _, tool := range names {
			for _, msg := range messages {
				for _, extra := range []string{``, `,"knownTools":["tasks.get","tasks.update","big.one","x"],"principal":"p","session":"s"`} {
					in := `{"tool":` + quote(tool) + `,"message":` + msg + extra + `}`
					out := gjson.ParseBytes(e.Call(abi.FuncDecorateResult, []byte(in)))
					if out.Get("error").Exists() {
						continue // refused: a host passes the message as it is
					}
					same := out.Get("message").Raw == string(Undecorated([]byte(msg))) && out.Get("invalidated").Raw == `{"patterns":[],"tools":[]}` && out.Get("truncated").Raw == "null"
					if !same {
						changed = true
					}
					if !decorates && !same {
						t.Fatalf("%s: decoratesResults is false, but decorate_result changed the answer of %s:\ninput  %.300s\noutput %.300s", name, tool, in, out.Raw)
					}
				}
			}
		}
		if decorates && changed {
			seen[true]++ // a configuration the fact must say true for
		}
	}
	// The fact is sound, not exact: a policy that invalidates but is shadowed by an earlier
	// one (shadow.json) still counts, though no call reaches it.
	if seen[false] < 4 || seen[true] < 4 {
		t.Errorf("configurations checked: %d that changed an answer, %d that decorate nothing", seen[true], seen[false])
	}
}
