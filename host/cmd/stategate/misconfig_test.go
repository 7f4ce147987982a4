package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/host/demo"
)

// typoConfig is the demo configuration with "cart.pay" misspelt "cart.pya" in the
// workflow and a limit on "slow.wiat": the demo upstream lists cart.pay and slow.wait.
func typoConfig() []byte {
	cfg := strings.Replace(string(demo.Config()), `"cart.pay": {"states"`, `"cart.pya": {"states"`, 1)
	return []byte(strings.Replace(cfg, `"slow.wait": {"timeoutMs"`, `"slow.wiat": {"timeoutMs"`, 1))
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// TestServe_unknownToolNames: `stategate serve` lists the upstream's tools at start-up
// and names each misspelt tool of its configuration in one log line, in the metrics and in
// /admin/info (the status page's source); a reload with the same typos raises the event
// again, once per name; a reload that fixes them brings the gauge to 0.
func TestServe_unknownToolNames(t *testing.T) {
	s := startServeConfig(t, demo.Options{}, typoConfig())

	// No client has listed yet: the start-up probe found them.
	waitFor(t, "the log names cart.pya", func() bool { return strings.Contains(s.stderr.String(), "tool=cart.pya") })
	for _, name := range []string{"cart.pya", "slow.wiat"} {
		if n := strings.Count(s.stderr.String(), "tool="+name+" "); n != 1 {
			t.Errorf("%s logged %d times:\n%s", name, n, s.stderr.String())
		}
	}
	if !strings.Contains(s.stderr.String(), `where="workflows[0].tools[\"cart.pya\"]" kind=binding`) {
		t.Errorf("the log line does not say where cart.pya is:\n%s", s.stderr.String())
	}
	fams := s.metrics(t)
	for _, want := range []struct {
		labels []string
		value  float64
	}{
		{[]string{"tool=cart.pya", "kind=binding"}, 1},
		{[]string{"tool=slow.wiat", "kind=limit"}, 1},
	} {
		if v, ok := value(fams, "stategate_config_unknown_tool", want.labels...); !ok || v != want.value {
			t.Errorf("stategate_config_unknown_tool%v = %v, %v", want.labels, v, ok)
		}
	}
	for kind, want := range map[string]float64{"binding": 1, "limit": 1, "policy": 0} {
		if v, ok := value(fams, "stategate_config_unknown_tools", "kind="+kind); !ok || v != want {
			t.Errorf("stategate_config_unknown_tools{kind=%s} = %v, %v; want %v", kind, v, ok, want)
		}
	}
	status, body := s.admin(t, "GET", "/admin/info", "")
	var info struct {
		UnknownTools []struct {
			Name  string
			Where []struct{ Path, Kind string }
		}
	}
	if err := json.Unmarshal(body, &info); status != 200 || err != nil || len(info.UnknownTools) != 2 {
		t.Fatalf("/admin/info: %d %s", status, body)
	}
	where := map[string]string{}
	for _, u := range info.UnknownTools {
		where[u.Name] = u.Where[0].Path + " " + u.Where[0].Kind
	}
	if where["cart.pya"] != `workflows[0].tools["cart.pya"] binding` || where["slow.wiat"] != `limits.tools["slow.wiat"] limit` {
		t.Fatalf("/admin/info: %s", body)
	}

	// A client's lists report nothing new.
	cs := mcpClient(t, s.mcpURL)
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	// A reload with the same configuration raises the event again, once per name.
	events := s.subscribeSSE(t, "?type=config_unknown_tool")
	if status, body := s.admin(t, "POST", "/admin/reload", "{}"); status != 200 {
		t.Fatalf("reload: %d %s", status, body)
	}
	var got []string
	for range 2 {
		e := next(t, events.events)
		got = append(got, e["tool"].(string))
	}
	if slices.Sort(got); strings.Join(got, ",") != "cart.pya,slow.wiat" {
		t.Fatalf("events after reload: %q", got)
	}
	if n := strings.Count(s.stderr.String(), "tool=cart.pya "); n != 2 {
		t.Errorf("cart.pya logged %d times after one reload, want 2", n)
	}

	// Fixed: the gauges go to 0 and the page's list empties.
	if err := os.WriteFile(s.cfgPath, demo.Config(), 0o644); err != nil {
		t.Fatal(err)
	}
	if status, body := s.admin(t, "POST", "/admin/reload", "{}"); status != 200 {
		t.Fatalf("reload: %d %s", status, body)
	}
	fams = s.metrics(t)
	if v, _ := value(fams, "stategate_config_unknown_tools", "kind=binding"); v != 0 {
		t.Errorf("after the fix, stategate_config_unknown_tools{kind=binding} = %v", v)
	}
	if _, ok := value(fams, "stategate_config_unknown_tool", "tool=cart.pya"); ok {
		t.Error("after the fix, cart.pya is still exported")
	}
	if _, body := s.admin(t, "GET", "/admin/info", ""); !strings.Contains(string(body), `"unknownTools":[]`) {
		t.Errorf("after the fix, /admin/info: %s", body)
	}
}
