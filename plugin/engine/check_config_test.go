package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stategate/stategate/abi"
)

// TestHostFacts checks that the Go accessor and check_config's "host" member say the same
// for every configuration of the golden vectors.
func TestHostFacts(t *testing.T) {
	var configs [][]byte
	files, _ := filepath.Glob(filepath.Join("..", "..", "abi", "testdata", "config", "*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		configs = append(configs, raw)
	}
	vectors, _ := filepath.Glob(filepath.Join("..", "..", "abi", "testdata", "*", "*.json"))
	for _, f := range vectors {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Config json.RawMessage `json:"config"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		if len(v.Config) > 0 && v.Config[0] == '{' {
			configs = append(configs, v.Config)
		}
	}
	// The cache section with every member, varyHeaders included.
	configs = append(configs, []byte(`{"version":1,"principal":{"header":"X-User"},"cache":{"scope":"shared","varyHeaders":["X-Tenant"]}}`))
	valid := 0
	for _, cfg := range configs {
		e, err := New(cfg)
		if err != nil {
			continue
		}
		valid++
		var out struct {
			Host *HostFacts `json:"host"`
		}
		if err := json.Unmarshal(e.Call(abi.FuncCheckConfig, nil), &out); err != nil || out.Host == nil {
			t.Fatalf("check_config: %v, host %v", err, out.Host)
		}
		if got := e.HostFacts(); !reflect.DeepEqual(got, *out.Host) {
			t.Errorf("HostFacts() = %+v\ncheck_config says %+v\nconfig %s", got, *out.Host, cfg)
		}
	}
	if valid < 6 {
		t.Errorf("only %d valid configurations checked", valid)
	}
}

func TestHostFacts_sample(t *testing.T) {
	got := sampleEngine(t).HostFacts()
	want := HostFacts{
		PrincipalHeader:  "",
		MaxTimeoutMs:     120000,
		ListChanged:      true,
		Separator:        ".",
		DecoratesResults: true,
		Tools: map[string]ToolFacts{
			"cart.add_item": {Gated: true, Moves: true, Workflows: []string{"checkout"}},
			"cart.checkout": {Gated: true, Moves: true, Workflows: []string{"checkout"}},
			"cart.pay":      {Gated: true, Moves: true, Workflows: []string{"checkout"}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("HostFacts() = %+v, want %+v", got, want)
	}
	if _, ok := got.Tools["cart.view"]; ok {
		t.Error("an unbound tool is listed")
	}
}

// TestHostFacts_varyHeaders: the cache facts carry varyHeaders lower-cased, and an empty
// list (never null) without the member.
func TestHostFacts_varyHeaders(t *testing.T) {
	for cfg, want := range map[string][]string{
		`{"version":1,"cache":{"varyHeaders":["X-Tenant","x-api-key"]}}`: {"x-tenant", "x-api-key"},
		`{"version":1,"cache":{}}`:                                       {},
	} {
		e, err := New([]byte(cfg))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Host struct {
				Cache *CacheFacts `json:"cache"`
			} `json:"host"`
		}
		if err := json.Unmarshal(e.Call(abi.FuncCheckConfig, nil), &out); err != nil || out.Host.Cache == nil {
			t.Fatalf("%s: check_config: %v, cache %v", cfg, err, out.Host.Cache)
		}
		if got := out.Host.Cache.VaryHeaders; got == nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: varyHeaders %q, want %q", cfg, got, want)
		}
	}
}

// TestCheckConfig_unmet checks check_config's "unmet" list: every policy, limits.tools entry
// and binding (each workflow's, by path) that no listed tool meets, with its kind and
// whether it is a pattern; entries a listed tool meets are left out.
func TestCheckConfig_unmet(t *testing.T) {
	cfg := `{"version":1,
	  "stateSync":{"policies":[{"match":"cart.*","cacheControl":"no-store"},{"match":"crt.*","cacheControl":"no-store"},{"match":"cart.veiw","cacheControl":"immutable"}]},
	  "limits":{"tools":{"cart.pya":{"timeoutMs":5},"cart.pay":{"timeoutMs":6},"**":{"timeoutMs":7},"bulk.*":{"timeoutMs":8}}},
	  "workflows":[
	    {"id":"a","initial":"s","states":{"s":{"on":{"GO":"s"}}},"tools":{"cart.pay":{"states":["s"],"event":"GO"},"cart.pya":{"states":["s"]}}},
	    {"id":"b","initial":"s","states":{"s":{}},"tools":{"cart.pya":{"states":["s"]}}}]}`
	e, err := New([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	out := e.Call(abi.FuncCheckConfig, []byte(`{"tools":[{"name":"cart.pay"},{"name":"cart.view"}]}`))
	var ans struct {
		Warnings []string `json:"warnings"`
		Unmet    []struct {
			Kind, Path, Name string
			Glob             bool
		} `json:"unmet"`
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	type entry = struct {
		Kind, Path, Name string
		Glob             bool
	}
	want := []entry{
		{"policy", "stateSync.policies[1].match", "crt.*", true},
		{"policy", "stateSync.policies[2].match", "cart.veiw", false},
		{"limit", `limits.tools["cart.pya"]`, "cart.pya", false},
		{"limit", `limits.tools["bulk.*"]`, "bulk.*", true},
		{"binding", `workflows[0].tools["cart.pya"]`, "cart.pya", false},
		{"binding", `workflows[1].tools["cart.pya"]`, "cart.pya", false},
	}
	got := make([]entry, len(ans.Unmet))
	for i, u := range ans.Unmet {
		got[i] = entry(u)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("unmet = %+v\nwant    %+v", got, want)
	}
	for _, w := range []string{`workflows[1].tools["cart.pya"]: no listed tool is named "cart.pya"`, `limits.tools["bulk.*"]: no listed tool matches it`} {
		found := false
		for _, g := range ans.Warnings {
			found = found || g == w
		}
		if !found {
			t.Errorf("warnings lack %q: %q", w, ans.Warnings)
		}
	}
	// Without a tool list there is nothing to meet: no "unmet" member.
	if out := e.Call(abi.FuncCheckConfig, nil); json.Unmarshal(out, &map[string]any{}) != nil || bytesContains(out, `"unmet"`) {
		t.Errorf("check_config without tools: %s", out)
	}
}

func bytesContains(b []byte, s string) bool { return strings.Contains(string(b), s) }
