package exchange

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/toollist"
	"github.com/stategate/stategate/plugin/engine"
)

// typoConfig binds "cart.pya" (the upstream lists cart.pay), limits "cart.pya" too, and has
// a policy pattern no tool matches and one that matches.
const typoConfig = `{"version":1,
  "stateSync":{"policies":[{"match":"crt.*","cacheControl":"no-store"},{"match":"cart.*","cacheControl":"no-store"}]},
  "limits":{"tools":{"cart.pya":{"timeoutMs":5000}}},
  "workflows":[{"id":"checkout","initial":"open","states":{"open":{"on":{"PAY":"paid"}},"paid":{"type":"final"}},
    "tools":{"cart.pya":{"states":["open"],"event":"PAY"},"cart.view":{"states":["open","paid"]}}}]}`

// recorder is a Reporter and Publisher that keeps what the core reported.
type recorder struct {
	nopReporter
	mu       sync.Mutex
	reported []toollist.UnknownTool
	events   []events.Event
}

func (r *recorder) UnknownTool(u toollist.UnknownTool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reported = append(r.reported, u)
}

func (r *recorder) Publish(e events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) names() (reported, published []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.reported {
		reported = append(reported, u.Name)
	}
	for _, e := range r.events {
		if e.Type == events.EventConfigUnknownTool {
			published = append(published, e.Tool)
		}
	}
	return reported, published
}

func unknownCore(t *testing.T, cfg string, prev *Core) (*Core, *recorder) {
	t.Helper()
	e, err := engine.New([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	return New(Options{Plugin: enginePlugin{e}, State: newTestState(false), Config: []byte(cfg), Reporter: rec, Publisher: rec, Previous: prev}), rec
}

func listPage(t *testing.T, c *Core, result string) {
	t.Helper()
	ctx := context.Background()
	ex := c.Admit(ctx, headers("s1"), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if ex.Verdict != Forward {
		t.Fatalf("tools/list verdict %v", ex.Verdict)
	}
	ex.Answer().RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":`+result+`}`))
}

// TestUnknownTools: once a listing completes, each name of the configuration that no
// listed tool meets is reported and published once, with every place it appears; a page
// with nextCursor is not the end of a listing; a name listed later is known from then on.
func TestUnknownTools(t *testing.T) {
	c, rec := unknownCore(t, typoConfig, nil)
	listPage(t, c, `{"tools":[{"name":"cart.pay"}],"nextCursor":"p2"}`)
	if u := c.UnknownTools(); u != nil {
		t.Fatalf("after one page of a listing: %+v", u)
	}
	listPage(t, c, `{"tools":[{"name":"cart.add"}]}`)
	want := []toollist.UnknownTool{
		{Name: "crt.*", Glob: true, Where: []toollist.ToolPlace{{Path: `stateSync.policies[0].match`, Kind: toollist.PlacePolicy}}},
		{Name: "cart.pya", Where: []toollist.ToolPlace{{Path: `limits.tools["cart.pya"]`, Kind: toollist.PlaceLimit}, {Path: `workflows[0].tools["cart.pya"]`, Kind: toollist.PlaceBinding}}},
		{Name: "cart.view", Where: []toollist.ToolPlace{{Path: `workflows[0].tools["cart.view"]`, Kind: toollist.PlaceBinding}}},
	}
	if got := c.UnknownTools(); !reflect.DeepEqual(got, want) {
		t.Fatalf("UnknownTools() = %+v\nwant %+v", got, want)
	}
	// Lists repeat: nothing is reported twice.
	for i := 0; i < 3; i++ {
		listPage(t, c, `{"tools":[{"name":"cart.add"}]}`)
		listPage(t, c, `{"tools":[{"name":"cart.pay"},{"name":"cart.add"}]}`)
	}
	reported, events := rec.names()
	if w := []string{"crt.*", "cart.pya", "cart.view"}; !reflect.DeepEqual(reported, w) || !reflect.DeepEqual(events, w) {
		t.Fatalf("reported %q, published %q; want each of %q once", reported, events, w)
	}
	for _, e := range rec.events {
		if e.Tool == "cart.pya" && !reflect.DeepEqual(e.Data["where"], want[1].Where) {
			t.Errorf("event data %+v", e.Data)
		}
	}
	// The upstream now lists cart.view (another principal's list, say): it is known.
	listPage(t, c, `{"tools":[{"name":"cart.view"}]}`)
	if got := c.UnknownTools(); len(got) != 2 || got[1].Name != "cart.pya" {
		t.Fatalf("after cart.view was listed: %+v", got)
	}
}

// TestUnknownTools_reload: a reloaded configuration is checked at once against the names
// already listed, and its unknown names are reported again (once per configuration); a
// fixed configuration has none.
func TestUnknownTools_reload(t *testing.T) {
	c, _ := unknownCore(t, typoConfig, nil)
	listPage(t, c, `{"tools":[{"name":"cart.pay"},{"name":"cart.view"}]}`)
	again, rec := unknownCore(t, typoConfig, c)
	if reported, events := rec.names(); !reflect.DeepEqual(reported, []string{"crt.*", "cart.pya"}) || !reflect.DeepEqual(events, reported) {
		t.Fatalf("reload with the same typos: reported %q, published %q", reported, events)
	}
	fixed, rec := unknownCore(t, `{"version":1,"workflows":[{"id":"checkout","initial":"open","states":{"open":{"on":{"PAY":"paid"}},"paid":{"type":"final"}},
	  "tools":{"cart.pay":{"states":["open"],"event":"PAY"}}}]}`, again)
	if u := fixed.UnknownTools(); len(u) != 0 || len(rec.reported) != 0 {
		t.Fatalf("fixed configuration: %+v, reported %+v", u, rec.reported)
	}
}

// TestToolsListed: a host's own listing (the start-up probe) completes a listing.
func TestToolsListed(t *testing.T) {
	c, rec := unknownCore(t, typoConfig, nil)
	c.ToolsListed(context.Background(), []byte(`[{"name":"cart.pay","inputSchema":{"type":"object"}},{"name":"cart.view"}]`))
	if reported, _ := rec.names(); !reflect.DeepEqual(reported, []string{"crt.*", "cart.pya"}) {
		t.Fatalf("reported %q", reported)
	}
	for _, bad := range []string{``, `{`, `{"tools":[]}`, `[1,"x",{"name":7}]`} {
		c.ToolsListed(context.Background(), []byte(bad)) // no panic, nothing learnt
	}
	if len(c.UnknownTools()) != 2 {
		t.Fatalf("after bad listings: %+v", c.UnknownTools())
	}
}

// countingPlugin counts check_config calls.
type countingPlugin struct {
	Plugin
	mu     sync.Mutex
	checks int
}

func (p *countingPlugin) Call(ctx context.Context, fn abi.Function, in []byte) ([]byte, error) {
	if fn == abi.FuncCheckConfig && len(in) > 0 {
		p.mu.Lock()
		p.checks++
		p.mu.Unlock()
	}
	return p.Plugin.Call(ctx, fn, in)
}

// TestUnknownTools_cost: a configuration that names no tool is never checked against a
// list past its first; one that does is checked only when the names seen change.
func TestUnknownTools_cost(t *testing.T) {
	for _, tt := range []struct {
		name, cfg string
		checks    int
	}{
		{"no tool names", `{"version":1,"limits":{"timeoutMs":1000}}`, 1},
		{"tool names", typoConfig, 1 + 2}, // the first check asks with no tools; two lists differ
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, err := engine.New([]byte(tt.cfg))
			if err != nil {
				t.Fatal(err)
			}
			p := &countingPlugin{Plugin: enginePlugin{e}}
			c := New(Options{Plugin: p, State: newTestState(false), Config: []byte(tt.cfg)})
			p.checks = 0
			for i := 0; i < 5; i++ {
				listPage(t, c, `{"tools":[{"name":"cart.pay"}]}`)
			}
			listPage(t, c, `{"tools":[{"name":"cart.pay"},{"name":"cart.add"}]}`)
			if p.checks != tt.checks {
				t.Errorf("%d check_config calls, want %d", p.checks, tt.checks)
			}
		})
	}
}
