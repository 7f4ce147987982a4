package exchange

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// TestDecorateIncremental is the property that incremental decoration (toollist.Tools) is
// invisible: a core that decorates a list from its memo of decorated tools answers every
// list byte for byte as a core that decorates every list whole. Sequences of random lists
// change by one or a few tools at a time (descriptions edited, tools added, removed,
// repeated, reordered, elements that are not tools, tools that repeat a member, a result
// that names a member twice), while the workflow state that hides tools moves and the
// protocol version changes; under stateSync.fromAnnotations the record the lists teach
// changes too.
func TestDecorateIncremental(t *testing.T) {
	for _, cfgName := range []string{"sample", "annotations"} {
		t.Run(cfgName, func(t *testing.T) {
			cfg, err := os.ReadFile("../abi/testdata/config/" + cfgName + ".json")
			if err != nil {
				t.Fatal(err)
			}
			seeds := 60
			if testing.Short() {
				seeds = 10
			}
			var inc, full int
			for seed := int64(1); seed <= int64(seeds); seed++ {
				a, b := incrementalAgrees(t, cfg, seed)
				inc, full = inc+a, full+b
			}
			// The memo was used: the incremental core sent the engine fewer bytes (under
			// fromAnnotations a list that teaches the record is decorated whole, after an
			// incremental try).
			if inc >= full || cfgName == "sample" && inc*3 > full*2 {
				t.Errorf("the incremental core sent %d bytes to decorate_tools, the full one %d", inc, full)
			}
			t.Logf("bytes sent to decorate_tools: incremental %d, full %d", inc, full)
		})
	}
}

// toolsCore returns a core over the native engine with its own state; full turns off both
// memos (every list decorated whole).
func toolsCore(t *testing.T, cfg []byte, full bool) (*Core, *testState) {
	t.Helper()
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := newTestState(false)
	opts := Options{Plugin: &sizedPlugin{enginePlugin: enginePlugin{e}}, State: st, Config: cfg}
	if full {
		opts.ListMemoBytes = -1
	}
	return New(opts), st
}

func incrementalAgrees(t *testing.T, cfg []byte, seed int64) (incBytes, fullBytes int) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	inc, incSt := toolsCore(t, cfg, false)
	full, fullSt := toolsCore(t, cfg, true)
	g := &listGen{rng: rng}
	tools := g.tools(rng.Intn(80))
	versions := []string{"2025-06-18", "2025-11-25", "2026-07-28"}
	version := versions[rng.Intn(len(versions))]
	states := []string{"", "empty", "has_items", "payment", "confirmed"}
	ctx := context.Background()
	for step := 0; step < 40; step++ {
		if step > 0 {
			tools = g.mutate(tools)
		}
		if rng.Intn(8) == 0 {
			version = versions[rng.Intn(len(versions))]
		}
		if rng.Intn(5) == 0 {
			s := states[rng.Intn(len(states))]
			for _, st := range []*testState{incSt, fullSt} {
				st.mu.Lock()
				if s == "" {
					delete(st.vals, checkoutKey)
				} else {
					st.vals[checkoutKey] = []byte(`{"workflow":"checkout","fingerprint":"712bfba3e84cae296669be36f3bc554b","state":"` + s + `","seq":1}`)
				}
				st.mu.Unlock()
			}
		}
		answer := g.answer(tools)
		var outs [2][]byte
		for i, c := range []*Core{inc, full} {
			h := headers("s1")
			h.Set("MCP-Protocol-Version", version)
			ex := c.Admit(ctx, h, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			if ex.Verdict != Forward {
				t.Fatalf("seed %d step %d: tools/list verdict %v", seed, step, ex.Verdict)
			}
			outs[i], _ = ex.Answer().RewriteJSON(ctx, []byte(answer))
		}
		if string(outs[0]) != string(outs[1]) {
			t.Fatalf("seed %d step %d (version %s): incremental and full decoration differ\nanswer:      %s\nincremental: %s\nfull:        %s",
				seed, step, version, answer, outs[0], outs[1])
		}
		if a, b := string(inc.lists.Known.Get("s1")), string(full.lists.Known.Get("s1")); a != b {
			t.Fatalf("seed %d step %d: tool names %s, full decoration %s", seed, step, a, b)
		}
		incSt.mu.Lock()
		fullSt.mu.Lock()
		for k, v := range fullSt.vals {
			if string(incSt.vals[k]) != string(v) {
				t.Errorf("seed %d step %d: state %s = %s, full decoration stored %s", seed, step, k, incSt.vals[k], v)
			}
		}
		fullSt.mu.Unlock()
		incSt.mu.Unlock()
		for _, k := range []stats.Counter{stats.CountListsDecorated, stats.CountToolsWithheld} {
			if a, b := inc.Stats.Get(k), full.Stats.Get(k); a != b {
				t.Fatalf("seed %d step %d: count %v %d, full decoration %d", seed, step, k, a, b)
			}
		}
	}
	return inc.plugin.(*sizedPlugin).bytes, full.plugin.(*sizedPlugin).bytes
}

// sizedPlugin counts the bytes of decorate_tools inputs.
type sizedPlugin struct {
	enginePlugin
	bytes int
}

func (p *sizedPlugin) Call(ctx context.Context, fn abi.Function, in []byte) ([]byte, error) {
	if fn == abi.FuncDecorateTools {
		p.bytes += len(in)
	}
	return p.enginePlugin.Call(ctx, fn, in)
}

const checkoutKey = "stategate/v1/checkout/session//s1"

// listGen makes random tools/list answers.
type listGen struct {
	rng *rand.Rand
	n   int
}

var toolNames = []string{"cart.add_item", "cart.checkout", "cart.pay", "cart.view", "countries.list", "tasks.update",
	"tasks.list", "sprints.create", "bulk.import", "notes.add", "ünïcode.tool", `quo"te`, "tasks.update"}

func (g *listGen) ws() string {
	return []string{"", "", "", " ", "\n  ", "\t"}[g.rng.Intn(6)]
}

// tool returns one element of a tools array: mostly tools, sometimes something else.
func (g *listGen) tool() string {
	g.n++
	r := g.rng
	switch r.Intn(30) {
	case 0:
		return fmt.Sprint(g.n) // not an object
	case 1:
		return `{"title":"no name ` + fmt.Sprint(g.n) + `"}`
	case 2:
		return `{"name":42,"description":"a number for a name"}`
	case 3:
		return `{"name":"dup.member","name":"dup.member","description":"repeats"}`
	case 4:
		return `{"name":"dup.annotations","annotations":{"readOnlyHint":true,"readOnlyHint":false}}`
	}
	name := toolNames[r.Intn(len(toolNames))]
	if r.Intn(3) == 0 {
		name = fmt.Sprintf("gen.op%d", r.Intn(20))
	}
	var b strings.Builder
	b.WriteString("{" + g.ws() + `"name":` + g.ws() + jsonString(name))
	switch r.Intn(6) {
	case 0: // no description
	case 1:
		b.WriteString(`,"description":null`)
	case 2:
		b.WriteString(`,"description":"Old text [cache: immutable] ` + fmt.Sprint(g.n) + `"`)
	case 3:
		b.WriteString(`,"description":"esc\u00e9\n` + fmt.Sprint(g.n) + `"`)
	default:
		b.WriteString(`,"description":"Does op ` + fmt.Sprint(g.n) + `. "`)
	}
	if r.Intn(2) == 0 {
		b.WriteString(fmt.Sprintf(`,"annotations":{"readOnlyHint":%t,"destructiveHint":%t}`, r.Intn(2) == 0, r.Intn(2) == 0))
	}
	b.WriteString(`,"inputSchema":{"type":"object","properties":{"id":{"type":"string"}}}` + g.ws() + "}")
	return b.String()
}

func jsonString(s string) string { return string(gjson.AppendJSONString(nil, s)) }

func (g *listGen) tools(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = g.tool()
	}
	return out
}

// mutate changes a list a little: one or a few tools edited, added, removed, repeated,
// moved, or the whole list shuffled.
func (g *listGen) mutate(tools []string) []string {
	r := g.rng
	out := append([]string(nil), tools...)
	for n := 1 + r.Intn(3); n > 0; n-- {
		switch k := r.Intn(10); {
		case k < 4 && len(out) > 0: // edit one tool's text
			i := r.Intn(len(out))
			if j := strings.Index(out[i], "Does op "); j >= 0 {
				out[i] = out[i][:j] + "Edited " + out[i][j:]
			} else {
				out[i] = g.tool()
			}
		case k < 5: // add
			i := r.Intn(len(out) + 1)
			out = append(out[:i], append([]string{g.tool()}, out[i:]...)...)
		case k < 6 && len(out) > 0: // remove
			i := r.Intn(len(out))
			out = append(out[:i], out[i+1:]...)
		case k < 7 && len(out) > 0: // repeat an element
			out = append(out, out[r.Intn(len(out))])
		case k < 8 && len(out) > 1: // move one
			i, j := r.Intn(len(out)), r.Intn(len(out))
			out[i], out[j] = out[j], out[i]
		case k < 9:
			r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		case len(out) > 0 && r.Intn(3) == 0: // an element that is not valid JSON
			i := r.Intn(len(out))
			out[i] = []string{`{"name":"bad` + "\x01" + `"}`, `{"name":"x",}`, `{"name":"x"`, `"unterminated`, `{"name":"x","d":tru}`}[r.Intn(5)]
		}
	}
	return out
}

// answer wraps the elements in a tools/list answer, with random whitespace between them
// and, now and then, a result that names a member twice.
func (g *listGen) answer(tools []string) string {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{` + g.ws() + `"tools":[` + g.ws())
	for i, t := range tools {
		if i > 0 {
			b.WriteString(g.ws() + "," + g.ws())
		}
		b.WriteString(t)
	}
	b.WriteString(g.ws() + "]")
	switch g.rng.Intn(12) {
	case 0:
		b.WriteString(`,"nextCursor":"p2"`)
	case 1:
		b.WriteString(`,"tools":[]`)
	case 2:
		b.WriteString(`,"ttlMs":5`)
	}
	b.WriteString("}}")
	return b.String()
}

// FuzzDecorateIncremental: a list answered after another (a memo and the last list to
// compare with in place) comes out as a full decoration gives it, whatever the bytes:
// invalid elements, elements that end where an element of the list before ends, deep
// nesting.
func FuzzDecorateIncremental(f *testing.F) {
	g := &listGen{rng: rand.New(rand.NewSource(1))}
	for i := 0; i < 8; i++ {
		a := g.tools(1 + i)
		b := g.mutate(a)
		f.Add(strings.Join(a, ","), strings.Join(b, ","))
	}
	f.Add(`{"name":"a"},"s"`, `{"name":"a"},"s"x`)
	f.Add(`{"name":"a","description":"x"}`, `{"name":"a","description":"x"},{"name":"a","description":"x"`)
	f.Add(`[[[]]]`, `[[[]]],[[[`)
	cfg, err := os.ReadFile("../abi/testdata/config/sample.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		inc, _ := toolsCore(t, cfg, false)
		full, _ := toolsCore(t, cfg, true)
		ctx := context.Background()
		for _, tools := range []string{a, b, a} {
			body := []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[` + tools + `]}}`)
			var outs [2]string
			for i, c := range []*Core{inc, full} {
				ex := c.Admit(ctx, headers("s1"), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
				out, _ := ex.Answer().RewriteJSON(ctx, append([]byte(nil), body...))
				outs[i] = string(out)
			}
			if outs[0] != outs[1] {
				t.Fatalf("answer %s:\nincremental %s\nfull        %s", body, outs[0], outs[1])
			}
		}
	})
}
