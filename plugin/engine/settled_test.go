package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/tidwall/gjson"
)

// TestSettled proves check_limits' "settled": on every configuration of the golden
// vectors, for every bound tool (with the vectors' arguments for it, and none), from every
// state a run of the tools reaches (breadth first, from no snapshot) and every state a
// vector gives, an admitted call with "settle": true answers exactly, byte for byte, what
// transition answers for its success on the same states (with and without a result: no
// guard it depends on reads one), and no "settled" where a guard of an event the tool
// fires reads the result (those need transition, which is then called to show the result
// matters to some of them).
func TestSettled(t *testing.T) {
	root := filepath.Join("..", "..", "abi", "testdata")
	configs := map[string][]byte{}
	files, _ := filepath.Glob(filepath.Join(root, "config", "*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		configs[filepath.Base(f)] = raw
	}
	args := map[string][]string{}      // tool -> the vectors' arguments for it
	var given []map[string]string      // the vectors' states
	results := []string{`{"ok":true}`} // the vectors' results
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
		if tool, a := in.Get("tool"), in.Get("arguments"); tool.Type == gjson.String && a.IsObject() {
			args[tool.Str] = append(args[tool.Str], a.Raw)
		}
		if r := in.Get("result"); r.Exists() {
			results = append(results, r.Raw)
		}
		if s := in.Get("states"); s.IsObject() {
			m := map[string]string{}
			s.ForEach(func(k, v gjson.Result) bool { m[k.Str] = v.Raw; return true })
			given = append(given, m)
		}
	}
	const scope = `"session":"s1","protocolVersion":"2025-06-18"`
	var compared, moved, unsettled, resultMatters int
	for name, cfg := range configs {
		e, err := New(cfg)
		if err != nil {
			continue
		}
		tools := e.boundTools()
		sort.Strings(tools)
		var calls []string // the inputs' members before the states
		for _, tool := range tools {
			calls = append(calls, `{`+scope+`,"tool":`+quote(tool)+`,"arguments":{}`)
			for _, a := range args[tool] {
				calls = append(calls, `{`+scope+`,"tool":`+quote(tool)+`,"arguments":`+a)
			}
		}
		// Breadth first over the states the calls reach, from the vectors' and from none.
		queue := append(append([]map[string]string(nil), given...), map[string]string{})
		seen := map[string]bool{}
		for len(queue) > 0 && len(seen) < 3000 {
			states := queue[0]
			queue = queue[1:]
			for _, call := range calls {
				st := complete(t, e, call, states)
				if st == "" {
					continue
				}
				if seen[call+st] {
					continue
				}
				seen[call+st] = true
				lim := gjson.ParseBytes(e.Call(abi.FuncCheckLimits, []byte(call+`,"states":`+st+`,"settle":true}`)))
				plain := e.Call(abi.FuncCheckLimits, []byte(call+`,"states":`+st+`}`))
				if lim.Get("allow").Type != gjson.True {
					if lim.Raw != string(plain) {
						t.Fatalf("%s: settle changed a denial:\n%s\n%s", name, lim.Raw, plain)
					}
					continue
				}
				// Without "settled", the answer is check_limits' own.
				if without, _ := removeSettled(lim.Raw); without != string(plain) {
					t.Fatalf("%s: settle changed check_limits' answer:\nwith    %s\nwithout %s", name, lim.Raw, plain)
				}
				tr := string(e.Call(abi.FuncTransition, []byte(call+`,"states":`+st+`,"isError":false}`)))
				settled := lim.Get("settled")
				if !settled.Exists() {
					unsettled++
					for _, r := range results {
						if other := string(e.Call(abi.FuncTransition, []byte(call+`,"states":`+st+`,"isError":false,"result":`+r+`}`))); other != tr {
							resultMatters++
							break
						}
					}
					continue
				}
				if settled.Raw != tr {
					t.Fatalf("%s: settled is not transition's answer:\ninput      %s,\"states\":%s}\nsettled    %s\ntransition %s", name, call, st, settled.Raw, tr)
				}
				for _, r := range results {
					if other := string(e.Call(abi.FuncTransition, []byte(call+`,"states":`+st+`,"isError":false,"result":`+r+`}`))); other != tr {
						t.Fatalf("%s: settled, but the result %s changes the transition:\n%s\n%s", name, r, tr, other)
					}
				}
				compared++
				if w := gjson.Get(tr, "states"); len(w.Map()) > 0 {
					moved++
					next := map[string]string{}
					gjson.Parse(st).ForEach(func(k, v gjson.Result) bool { next[k.Str] = v.Raw; return true })
					w.ForEach(func(k, v gjson.Result) bool { next[k.Str] = v.Raw; return true })
					queue = append(queue, next)
				}
			}
		}
	}
	t.Logf("%d admitted calls compared (%d that write), %d without settled (%d of them shown to depend on the result)", compared, moved, unsettled, resultMatters)
	if compared < 200 || moved < 50 || resultMatters < 2 {
		t.Errorf("too little checked: %d compared, %d that write, %d that depend on the result", compared, moved, resultMatters)
	}
}

// complete returns the states object for call: states, with null for every key
// check_limits asks for that states lacks ("" when it never stops asking).
func complete(t *testing.T, e *Engine, call string, states map[string]string) string {
	m := map[string]string{}
	for k, v := range states {
		m[k] = v
	}
	for range 4 {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(quote(k) + ":" + m[k])
		}
		b.WriteString("}")
		out := gjson.ParseBytes(e.Call(abi.FuncCheckLimits, []byte(call+`,"states":`+b.String()+`}`)))
		need := out.Get("needState")
		if !need.Exists() {
			if out.Get("error").Exists() {
				return ""
			}
			return b.String()
		}
		need.ForEach(func(_, k gjson.Result) bool { m[k.Str] = "null"; return true })
	}
	t.Fatalf("check_limits keeps asking for state: %s", call)
	return ""
}

// removeSettled returns an answer without its last member "settled", and whether it had one.
func removeSettled(ans string) (string, bool) {
	i := strings.LastIndex(ans, `,"settled":`)
	if i < 0 {
		return ans, false
	}
	return ans[:i] + "}", true
}
