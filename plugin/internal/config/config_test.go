package config

import (
	"encoding/json"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

const samplePath = "../../../abi/testdata/config/sample.json"

func readSample(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// render lists problems as "path: message", warnings prefixed with "warning: ".
func render(problems []Problem) []string {
	out := []string{}
	for _, p := range problems {
		s := p.String()
		if p.Warning {
			s = "warning: " + s
		}
		out = append(out, s)
	}
	return out
}

func mustParse(t *testing.T, doc string) *Config {
	t.Helper()
	c, problems := Parse([]byte(doc))
	if c == nil || HasErrors(problems) {
		t.Fatalf("Parse failed: %q", render(problems))
	}
	return c
}

func TestParse(t *testing.T) {
	c, problems := Parse(readSample(t))
	if c == nil {
		t.Fatalf("Parse(sample) = nil, %q", render(problems))
	}
	if len(problems) != 0 {
		t.Errorf("problems = %q, want none", render(problems))
	}
	if c.Separator != "." {
		t.Errorf("Separator = %q", c.Separator)
	}
	if c.Default != CacheNoStore {
		t.Errorf("Default = %v, want no-store", c.Default)
	}
	if c.PrincipalHeader != "" {
		t.Errorf("PrincipalHeader = %q", c.PrincipalHeader)
	}

	type policy struct {
		match, cache string
		invalidates  []string
	}
	var gotPolicies []policy
	for _, p := range c.Policies {
		var inv []string
		for _, g := range p.Invalidates {
			inv = append(inv, g.String())
		}
		gotPolicies = append(gotPolicies, policy{p.Match.String(), p.CacheControl.String(), inv})
	}
	wantPolicies := []policy{
		{"countries.*", "immutable", nil},
		{"tasks.update", "no-store", []string{"tasks.*", "sprints.*"}}, // inherits the default
		{"sprints.create", "no-store", []string{"sprints.*"}},
		{"cart.*", "no-store", []string{"cart.view"}},
	}
	if !reflect.DeepEqual(gotPolicies, wantPolicies) {
		t.Errorf("policies = %+v\nwant %+v", gotPolicies, wantPolicies)
	}
	if !c.Policies[0].Match.Match("countries.list") || c.Policies[0].Match.Match("countries") {
		t.Error("policies[0].match does not match as countries.*")
	}

	if len(c.Workflows) != 1 {
		t.Fatalf("%d workflows, want 1", len(c.Workflows))
	}
	w := c.Workflows[0]
	if w.ID != "checkout" || w.Initial != "empty" || w.Key != KeySession || w.KeyArg != "" {
		t.Errorf("workflow = id %q initial %q key %v/%q", w.ID, w.Initial, w.Key, w.KeyArg)
	}
	if len(w.Fingerprint) != 32 {
		t.Errorf("Fingerprint = %q, want 32 hex digits", w.Fingerprint)
	}
	wantStates := []State{
		{Parent: -1, End: 5, Initial: 1, Kind: KindCompound, Children: []int{1, 2, 3, 4}},
		{Name: "empty", Path: "empty", Parent: 0, End: 2, Initial: -1, On: []Edge{{"ADD_ITEM", "has_items", 2, 1, nil}}},
		{Name: "has_items", Path: "has_items", Parent: 0, End: 3, Initial: -1, On: []Edge{{"ADD_ITEM", "has_items", 2, 2, nil}, {"CHECKOUT", "payment", 3, 2, nil}, {"CLEAR", "empty", 1, 2, nil}}},
		{Name: "payment", Path: "payment", Parent: 0, End: 4, Initial: -1, On: []Edge{{"PAY", "confirmed", 4, 3, nil}, {"CANCEL", "has_items", 2, 3, nil}}},
		{Name: "confirmed", Path: "confirmed", Parent: 0, End: 5, Initial: -1, Kind: KindFinal, Final: true},
	}
	if !reflect.DeepEqual(w.States, wantStates) {
		t.Errorf("states = %+v\nwant %+v", w.States, wantStates)
	}
	if s, ok := w.State("payment"); !ok || s.Name != "payment" {
		t.Errorf("State(payment) = %v, %v", s, ok)
	}
	if _, ok := w.State("nowhere"); ok {
		t.Error("State(nowhere) exists")
	}
	if s, _ := w.State("has_items"); s != nil {
		if next, ok := nextOf(s, "CHECKOUT"); !ok || next != "payment" {
			t.Errorf("Next(CHECKOUT) = %q, %v", next, ok)
		}
		if _, ok := nextOf(s, "PAY"); ok {
			t.Error("has_items handles PAY")
		}
	}
	if got, want := w.ToolsIn(confOf(w, "has_items")), []string{"cart.add_item", "cart.checkout"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ToolsIn(has_items) = %q, want %q", got, want)
	}
	if got := w.ToolsIn(confOf(w, "confirmed")); len(got) != 0 {
		t.Errorf("ToolsIn(confirmed) = %q, want none", got)
	}

	wantBindings := map[string]Binding{
		"cart.add_item": {Tool: "cart.add_item", States: []string{"empty", "has_items"}, Nodes: []int{1, 2}, Event: "ADD_ITEM"},
		"cart.checkout": {Tool: "cart.checkout", States: []string{"has_items"}, Nodes: []int{2}, Event: "CHECKOUT"},
		"cart.pay":      {Tool: "cart.pay", States: []string{"payment"}, Nodes: []int{3}, Event: "PAY"},
	}
	for tool, want := range wantBindings {
		refs := c.Bindings(tool)
		if len(refs) != 1 {
			t.Errorf("Bindings(%q) has %d refs, want 1", tool, len(refs))
			continue
		}
		if refs[0].Workflow != w || !reflect.DeepEqual(*refs[0].Binding, want) {
			t.Errorf("Bindings(%q) = %+v in %q, want %+v", tool, *refs[0].Binding, refs[0].Workflow.ID, want)
		}
	}
	if refs := c.Bindings("cart.view"); refs != nil {
		t.Errorf("Bindings(cart.view) = %v, want none", refs)
	}

	if c.Limits.MaxArraySize != 100 || c.Limits.MaxResponseBytes != 65536 || c.Limits.TimeoutMs != 30000 {
		t.Errorf("limits = %+v", c.Limits)
	}
	for _, tc := range []struct {
		tool                      string
		maxArray, maxResp, timout int
	}{
		{"bulk.import", 5000, 65536, 120000}, // maxResponseBytes inherited
		{"bulk.export", 100, 65536, 30000},
		{"cart.add_item", 100, 65536, 30000},
	} {
		a, r, to := c.Limits.For(tc.tool)
		if a != tc.maxArray || r != tc.maxResp || to != tc.timout {
			t.Errorf("Limits.For(%q) = %d, %d, %d; want %d, %d, %d", tc.tool, a, r, to, tc.maxArray, tc.maxResp, tc.timout)
		}
	}
}

func TestParse_defaults(t *testing.T) {
	c := mustParse(t, `{"version":1}`)
	if c.Separator != "." || c.Default != CacheNone || len(c.Policies) != 0 || len(c.Workflows) != 0 {
		t.Errorf("config = %+v", c)
	}
	if a, r, to := c.Limits.For("x"); a != 0 || r != 0 || to != DefaultTimeoutMs {
		t.Errorf("Limits.For = %d, %d, %d; want unlimited and the default timeout", a, r, to)
	}
	if c.Bindings("x") != nil {
		t.Error("Bindings on an empty config")
	}
}

func TestParse_features(t *testing.T) {
	t.Run("double_underscore_separator", func(t *testing.T) {
		c := mustParse(t, `{"version":1,"names":{"separator":"__"},
			"stateSync":{"policies":[{"match":"tasks__*","cacheControl":"immutable"}]},
			"limits":{"tools":{"bulk__*":{"timeoutMs":5}}}}`)
		if c.Separator != "__" {
			t.Fatalf("Separator = %q", c.Separator)
		}
		if !c.Policies[0].Match.Match("tasks__list") || c.Policies[0].Match.Match("tasks.list") {
			t.Error("the policy does not split names on __")
		}
		if _, _, to := c.Limits.For("bulk__import"); to != 5 {
			t.Errorf("timeout for bulk__import = %d, want 5", to)
		}
	})
	t.Run("argument_key", func(t *testing.T) {
		c := mustParse(t, `{"version":1,"workflows":[{"id":"w","initial":"a","key":"argument:order_id","states":{"a":{}}}]}`)
		if w := c.Workflows[0]; w.Key != KeyArgument || w.KeyArg != "order_id" {
			t.Errorf("key = %v/%q", w.Key, w.KeyArg)
		}
	})
	t.Run("principal_header_lowercased", func(t *testing.T) {
		c := mustParse(t, `{"version":1,"principal":{"header":"X-User_Id"}}`)
		if c.PrincipalHeader != "x-user_id" {
			t.Errorf("PrincipalHeader = %q", c.PrincipalHeader)
		}
	})
	t.Run("cache_control_none_overrides_default", func(t *testing.T) {
		c := mustParse(t, `{"version":1,"stateSync":{"policies":[{"match":"a","cacheControl":"none","invalidates":["b"]}],"defaults":{"cacheControl":"immutable"}}}`)
		if c.Policies[0].CacheControl != CacheNone {
			t.Errorf("CacheControl = %v, want none", c.Policies[0].CacheControl)
		}
	})
	t.Run("first_tool_limit_wins", func(t *testing.T) {
		c := mustParse(t, `{"version":1,"limits":{"maxArraySize":10,"tools":{"a.*":{"maxArraySize":20},"a.b":{"maxArraySize":30,"maxResponseBytes":2048}}}}`)
		if a, r, _ := c.Limits.For("a.b"); a != 20 || r != 0 {
			t.Errorf("Limits.For(a.b) = %d, %d; want 20, 0", a, r)
		}
	})
	t.Run("tool_in_two_workflows", func(t *testing.T) {
		c := mustParse(t, `{"version":1,"workflows":[
			{"id":"w1","initial":"a","states":{"a":{}},"tools":{"t":{"states":["a"]}}},
			{"id":"w2","initial":"b","states":{"b":{}},"tools":{"t":{"states":["b"]}}}]}`)
		refs := c.Bindings("t")
		if len(refs) != 2 || refs[0].Workflow.ID != "w1" || refs[1].Workflow.ID != "w2" {
			t.Fatalf("Bindings(t) = %+v", refs)
		}
		if !refs[1].Binding.Allows(confOf(refs[1].Workflow, "b")) || refs[1].Binding.Allows(confOf(refs[1].Workflow, "a")) {
			t.Error("Allows does not follow the binding's states")
		}
	})
	t.Run("cache_vary_headers", func(t *testing.T) {
		c := mustParse(t, `{"version":1,"cache":{"varyHeaders":["X-Tenant","x-api-key"]}}`)
		if c.Cache == nil || !reflect.DeepEqual(c.Cache.VaryHeaders, []string{"x-tenant", "x-api-key"}) {
			t.Errorf("Cache = %+v, want varyHeaders [x-tenant x-api-key]", c.Cache)
		}
		if c := mustParse(t, `{"version":1,"cache":{}}`); c.Cache.VaryHeaders != nil {
			t.Errorf("VaryHeaders = %q without the member", c.Cache.VaryHeaders)
		}
	})
	t.Run("escaped_keys", func(t *testing.T) {
		c := mustParse(t, `{"vers\u0069on":1,"names":{"separ\u0061tor":"__"}}`)
		if c.Separator != "__" {
			t.Errorf("Separator = %q", c.Separator)
		}
	})
}

func TestParse_errors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{
			name: "bad_version",
			doc:  `{"version":2}`,
			want: []string{"version: must be 1, got 2"},
		},
		{
			name: "version_as_string",
			doc:  `{"version":"1"}`,
			want: []string{`version: must be 1, got "1"`},
		},
		{
			name: "version_as_float",
			doc:  `{"version":1.0}`,
			want: []string{`version: must be 1, got 1.0`},
		},
		{
			name: "missing_version",
			doc:  `{}`,
			want: []string{"version: required (must be 1)"},
		},
		{
			name: "unknown_top_level_field",
			doc:  `{"version":1,"colour":"red"}`,
			want: []string{"colour: unknown field"},
		},
		{
			name: "unknown_field_needing_quotes",
			doc:  `{"version":1,"a b":1}`,
			want: []string{`["a b"]: unknown field`},
		},
		{
			name: "unknown_nested_field",
			doc:  `{"version":1,"stateSync":{"policies":[{"match":"a","cacheControl":"none","colour":"red"}]}}`,
			want: []string{"stateSync.policies[0].colour: unknown field"},
		},
		{
			name: "unknown_fields_at_every_level",
			doc: `{"version":1,"names":{"sep":"."},"stateSync":{"default":{}},"principal":{"header":"x","h":1},
				"workflows":[{"id":"w","initial":"a","states":{"a":{"on":{},"final":true}},"tools":{"t":{"states":["a"],"when":1}},"x":1}],
				"limits":{"max":1,"tools":{"t":{"max":1}}}}`,
			want: []string{
				"names.sep: unknown field",
				"principal.h: unknown field",
				"stateSync.default: unknown field",
				"workflows[0].x: unknown field",
				"workflows[0].states.a.final: unknown field",
				"workflows[0].tools.t.when: unknown field",
				"limits.max: unknown field",
				`limits.tools["t"].max: unknown field`,
			},
		},
		{
			name: "invalid_segment",
			doc: `{"version":1,"stateSync":{"policies":[
				{"match":"a","cacheControl":"none"},{"match":"b","cacheControl":"none"},{"match":"get*","cacheControl":"none"}]}}`,
			want: []string{`stateSync.policies[2].match: invalid segment "get*"`},
		},
		{
			name: "empty_segment",
			doc:  `{"version":1,"stateSync":{"policies":[{"match":"a..b","cacheControl":"none"}]}}`,
			want: []string{`stateSync.policies[0].match: empty segment at position 1`},
		},
		{
			name: "bad_invalidates_pattern",
			doc:  `{"version":1,"stateSync":{"policies":[{"match":"a","invalidates":["b","c*",3]}]}}`,
			want: []string{
				`stateSync.policies[0].invalidates[1]: invalid segment "c*"`,
				`stateSync.policies[0].invalidates[2]: must be a string`,
			},
		},
		{
			name: "missing_match",
			doc:  `{"version":1,"stateSync":{"policies":[{"cacheControl":"none"}]}}`,
			want: []string{"stateSync.policies[0].match: required"},
		},
		{
			name: "match_not_a_string",
			doc:  `{"version":1,"stateSync":{"policies":[{"match":1,"cacheControl":"none"}]}}`,
			want: []string{"stateSync.policies[0].match: must be a string"},
		},
		{
			name: "bad_cache_control",
			doc:  `{"version":1,"stateSync":{"policies":[{"match":"a","cacheControl":"private"}]}}`,
			want: []string{`stateSync.policies[0].cacheControl: must be "no-store", "immutable" or "none", got "private"`},
		},
		{
			name: "bad_default_cache_control",
			doc:  `{"version":1,"stateSync":{"defaults":{"cacheControl":"sometimes"}}}`,
			want: []string{`stateSync.defaults.cacheControl: must be "no-store", "immutable" or "none", got "sometimes"`},
		},
		{
			name: "cache_control_not_a_string",
			doc:  `{"version":1,"stateSync":{"policies":[{"match":"a","cacheControl":true}]}}`,
			want: []string{`stateSync.policies[0].cacheControl: must be a string`},
		},
		{
			name: "policy_with_neither",
			doc:  `{"version":1,"stateSync":{"policies":[{"match":"a"}]}}`,
			want: []string{"stateSync.policies[0]: needs cacheControl, invalidates or cache"},
		},
		{
			name: "empty_invalidates",
			doc:  `{"version":1,"stateSync":{"policies":[{"match":"a","invalidates":[]}]}}`,
			want: []string{"stateSync.policies[0].invalidates: must be a non-empty array of patterns"},
		},
		{
			name: "invalidates_not_an_array",
			doc:  `{"version":1,"stateSync":{"policies":[{"match":"a","invalidates":"b"}]}}`,
			want: []string{"stateSync.policies[0].invalidates: must be a non-empty array of patterns"},
		},
		{
			name: "policies_not_an_array",
			doc:  `{"version":1,"stateSync":{"policies":{}}}`,
			want: []string{"stateSync.policies: must be an array"},
		},
		{
			name: "policy_not_an_object",
			doc:  `{"version":1,"stateSync":{"policies":["a"]}}`,
			want: []string{"stateSync.policies[0]: must be an object"},
		},
		{
			name: "sections_of_the_wrong_type",
			doc:  `{"version":1,"names":[],"stateSync":1,"workflows":{},"limits":"x","principal":null}`,
			want: []string{
				"names: must be an object",
				"principal: must be an object",
				"stateSync: must be an object",
				"workflows: must be an array",
				"limits: must be an object",
			},
		},
		{
			name: "initial_state_missing",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"nowhere","states":{"a":{}}}]}`,
			want: []string{`workflows[0].initial: unknown state "nowhere"`},
		},
		{
			name: "initial_absent",
			doc:  `{"version":1,"workflows":[{"id":"w","states":{"a":{}}}]}`,
			want: []string{`workflows[0].initial: required`},
		},
		{
			name: "id_absent",
			doc:  `{"version":1,"workflows":[{"initial":"a","states":{"a":{}}}]}`,
			want: []string{`workflows[0].id: required`},
		},
		{
			name: "bad_id",
			doc:  `{"version":1,"workflows":[{"id":"a b","initial":"a","states":{"a":{}}}]}`,
			want: []string{`workflows[0].id: must be 1-64 characters of [A-Za-z0-9_.-], got "a b"`},
		},
		{
			name: "transition_to_unknown_state",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"on":{"GO":"b"}}}}]}`,
			want: []string{`workflows[0].states.a.on.GO: unknown target state "b"`},
		},
		{
			name: "transition_target_not_a_string",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"on":{"GO":1}}}}]}`,
			want: []string{`workflows[0].states.a.on.GO: must be a string (the target state), an object {"target", "guard"} or an array of them`},
		},
		{
			name: "binding_to_unknown_state",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{}},"tools":{"t":{"states":["a","zzz"]}}}]}`,
			want: []string{`workflows[0].tools.t.states[1]: unknown state "zzz"`},
		},
		{
			name: "binding_to_unknown_event",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"on":{"GO":"a"}}},"tools":{"t":{"states":["a"],"event":"STOP"}}}]}`,
			want: []string{`workflows[0].tools.t.event: unknown event "STOP": no state handles it`},
		},
		{
			name: "binding_without_states",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{}},"tools":{"t":{"states":[]},"u":{}}}]}`,
			want: []string{
				`workflows[0].tools.t.states: must be a non-empty array of state paths`,
				`workflows[0].tools.u.states: must be a non-empty array of state paths`,
			},
		},
		{
			name: "binding_tool_name_needing_quotes",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{}},"tools":{"":{"states":["a"]},"a b":{"states":["b"]}}}]}`,
			want: []string{
				`workflows[0].tools[""]: empty tool name`,
				`workflows[0].tools["a b"].states[0]: unknown state "b"`,
			},
		},
		{
			name: "final_state_with_transitions",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"on":{"GO":"b"}},"b":{"type":"final","on":{"BACK":"a"}}}}]}`,
			want: []string{`workflows[0].states.b.on: a final state has no transitions`},
		},
		{
			name: "bad_state_type",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"type":"start"}}}]}`,
			want: []string{`workflows[0].states.a.type: must be "atomic", "compound", "parallel" or "final", got "start"`},
		},
		{
			name: "bad_state_and_event_names",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a b","states":{"a b":{"on":{"c d":"a b"}}}}]}`,
			want: []string{
				`workflows[0].states["a b"]: state name must be 1-64 characters of [A-Za-z0-9_.-]`,
				`workflows[0].states["a b"].on["c d"]: event name must be 1-64 characters of [A-Za-z0-9_.-]`,
			},
		},
		{
			name: "duplicate_state",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{},"a":{}}}]}`,
			want: []string{`workflows[0].states.a: duplicate state`},
		},
		{
			name: "duplicate_fields",
			doc: `{"version":1,"version":2,"stateSync":{"policies":[{"match":"a","cacheControl":"none","cacheControl":"immutable"}]},
				"limits":{"timeoutMs":1,"timeoutMs":2}}`,
			want: []string{
				"version: duplicate field",
				"stateSync.policies[0].cacheControl: duplicate field",
				"limits.timeoutMs: duplicate field",
			},
		},
		{
			name: "duplicate_event",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"on":{"GO":"a","GO":"b"}},"b":{}}}]}`,
			want: []string{`workflows[0].states.a.on.GO: duplicate event`},
		},
		{
			name: "duplicate_tool_binding",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{}},"tools":{"t":{"states":["a"]},"t":{"states":["a"]}}}]}`,
			want: []string{`workflows[0].tools.t: duplicate tool`},
		},
		{
			name: "duplicate_tool_limits",
			doc:  `{"version":1,"limits":{"tools":{"t":{"timeoutMs":1},"t":{"timeoutMs":2}}}}`,
			want: []string{`limits.tools["t"]: duplicate pattern`},
		},
		{
			name: "no_states",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{}}]}`,
			want: []string{
				`workflows[0].states: needs at least one state`,
				`workflows[0].initial: unknown state "a"`,
			},
		},
		{
			name: "states_not_an_object",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":[]}]}`,
			want: []string{`workflows[0].states: must be an object of states`},
		},
		{
			name: "bad_key",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","key":"user","states":{"a":{}}}]}`,
			want: []string{`workflows[0].key: must be "session" or "argument:<name>", got "user"`},
		},
		{
			name: "key_without_argument_name",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","key":"argument:","states":{"a":{}}}]}`,
			want: []string{`workflows[0].key: must be "session" or "argument:<name>", got "argument:"`},
		},
		{
			name: "duplicate_workflow_ids",
			doc: `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{}}},
				{"id":"v","initial":"a","states":{"a":{}}},{"id":"w","initial":"b","states":{"b":{}}}]}`,
			want: []string{`workflows[2].id: duplicate workflow id "w"`},
		},
		{
			name: "duplicate_id_of_an_invalid_workflow",
			doc: `{"version":1,"workflows":[{"id":"w","initial":"nowhere","states":{"a":{}}},
				{"id":"w","initial":"a","states":{"a":{}}},{"id":"w","initial":"b","states":[]}]}`,
			want: []string{
				`workflows[0].initial: unknown state "nowhere"`,
				`workflows[1].id: duplicate workflow id "w"`,
				`workflows[2].states: must be an object of states`,
				`workflows[2].id: duplicate workflow id "w"`,
			},
		},
		{
			name: "states_not_an_object_still_checks_the_rest",
			doc: `{"version":1,"workflows":[{"id":"a b","initial":1,"key":"user","states":[],
				"tools":{"t":{"states":"a","x":1},"u":{"states":["s"],"event":2}}}]}`,
			want: []string{
				`workflows[0].id: must be 1-64 characters of [A-Za-z0-9_.-], got "a b"`,
				`workflows[0].key: must be "session" or "argument:<name>", got "user"`,
				`workflows[0].states: must be an object of states`,
				`workflows[0].initial: must be a string`,
				`workflows[0].tools.t.x: unknown field`,
				`workflows[0].tools.t.states: must be a non-empty array of state paths`,
				`workflows[0].tools.u.event: must be a string`,
			},
		},
		{
			name: "duplicate_state_body_is_checked",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{},"a":{"type":"start","on":{"GO":1}}}}]}`,
			want: []string{
				`workflows[0].states.a: duplicate state`,
				`workflows[0].states.a.type: must be "atomic", "compound", "parallel" or "final", got "start"`,
				`workflows[0].states.a.on.GO: must be a string (the target state), an object {"target", "guard"} or an array of them`,
			},
		},
		{
			name: "duplicate_event_target_is_checked",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"on":{"GO":"a","GO":1}}}}]}`,
			want: []string{
				`workflows[0].states.a.on.GO: duplicate event`,
				`workflows[0].states.a.on.GO: must be a string (the target state), an object {"target", "guard"} or an array of them`,
			},
		},
		{
			name: "duplicate_tool_binding_body_is_checked",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{}},"tools":{"t":{"states":["a"]},"t":{"states":["zzz"],"when":1}}}]}`,
			want: []string{
				`workflows[0].tools.t: duplicate tool`,
				`workflows[0].tools.t.when: unknown field`,
				`workflows[0].tools.t.states[0]: unknown state "zzz"`,
			},
		},
		{
			name: "duplicate_tool_limits_body_is_checked",
			doc:  `{"version":1,"limits":{"tools":{"t":{"timeoutMs":1},"t":{"timeoutMs":0,"max":1}}}}`,
			want: []string{
				`limits.tools["t"]: duplicate pattern`,
				`limits.tools["t"].max: unknown field`,
				`limits.tools["t"].timeoutMs: must be between 1 and 86400000, got 0`,
			},
		},
		{
			name: "limits_below_minimum",
			doc:  `{"version":1,"limits":{"maxArraySize":0,"maxResponseBytes":1023,"timeoutMs":-1}}`,
			want: []string{
				"limits.maxArraySize: must be between 1 and 1073741824, got 0",
				"limits.maxResponseBytes: must be between 1024 and 1073741824, got 1023",
				"limits.timeoutMs: must be between 1 and 86400000, got -1",
			},
		},
		{
			name: "limits_above_maximum",
			doc:  `{"version":1,"limits":{"maxArraySize":1073741825,"timeoutMs":86400001}}`,
			want: []string{
				"limits.maxArraySize: must be between 1 and 1073741824, got 1073741825",
				"limits.timeoutMs: must be between 1 and 86400000, got 86400001",
			},
		},
		{
			name: "limits_not_integers",
			doc:  `{"version":1,"limits":{"maxArraySize":1.5,"maxResponseBytes":"2048","timeoutMs":1e3}}`,
			want: []string{
				"limits.maxArraySize: must be a whole number, got 1.5",
				"limits.maxResponseBytes: must be a whole number",
				"limits.timeoutMs: must be a whole number, got 1e3",
			},
		},
		{
			name: "tool_limits",
			doc:  `{"version":1,"limits":{"tools":{"a*":{"timeoutMs":0},"b":[],"c":{"maxArraySize":99999999999999999999}}}}`,
			want: []string{
				`limits.tools["a*"]: invalid segment "a*"`,
				`limits.tools["a*"].timeoutMs: must be between 1 and 86400000, got 0`,
				`limits.tools["b"]: must be an object`,
				`limits.tools["c"].maxArraySize: must be a whole number, got 99999999999999999999`,
			},
		},
		{
			name: "tool_limits_not_an_object",
			doc:  `{"version":1,"limits":{"tools":[]}}`,
			want: []string{`limits.tools: must be an object`},
		},
		{
			name: "empty_separator",
			doc:  `{"version":1,"names":{"separator":""}}`,
			want: []string{"names.separator: must not be empty"},
		},
		{
			name: "separator_with_star",
			doc:  `{"version":1,"names":{"separator":"*"}}`,
			want: []string{"names.separator: must not contain '*'"},
		},
		{
			name: "long_separator",
			doc:  `{"version":1,"names":{"separator":"123456789"}}`,
			want: []string{"names.separator: at most 8 bytes"},
		},
		{
			name: "separator_not_a_string",
			doc:  `{"version":1,"names":{"separator":1}}`,
			want: []string{"names.separator: must be a string"},
		},
		{
			name: "bad_principal_header",
			doc:  `{"version":1,"principal":{"header":"x user"}}`,
			want: []string{`principal.header: not a valid header name: "x user"`},
		},
		{
			name: "principal_header_absent",
			doc:  `{"version":1,"principal":{}}`,
			want: []string{`principal.header: required`},
		},
		{
			name: "not_an_object",
			doc:  `[]`,
			want: []string{"must be an object"},
		},
		{
			name: "string_document",
			doc:  `"version"`,
			want: []string{"must be an object"},
		},
		{
			name: "null_document",
			doc:  `null`,
			want: []string{"must be an object"},
		},
		{
			name: "invalid_json",
			doc:  `{"version":1,}`,
			want: []string{"invalid JSON: invalid character '}' at offset 13"},
		},
		{
			name: "empty_input",
			doc:  ``,
			want: []string{"invalid JSON: unexpected end of input at offset 0"},
		},
		{
			name: "vary_headers_not_an_array",
			doc:  `{"version":1,"cache":{"varyHeaders":"X-Tenant"}}`,
			want: []string{"cache.varyHeaders: must be an array of header names"},
		},
		{
			name: "vary_headers_bad_names",
			doc:  `{"version":1,"cache":{"varyHeaders":["X-Tenant",1,"a b","x-TENANT",""]}}`,
			want: []string{
				"cache.varyHeaders[1]: must be a string",
				`cache.varyHeaders[2]: not a valid header name: "a b"`,
				`cache.varyHeaders[3]: header "x-TENANT" is listed twice (names are case-insensitive)`,
				`cache.varyHeaders[4]: not a valid header name: ""`,
			},
		},
		{
			name: "vary_headers_too_many",
			doc:  `{"version":1,"cache":{"varyHeaders":["h0","h1","h2","h3","h4","h5","h6","h7","h8","h9","h10","h11","h12","h13","h14","h15","h16","h17"]}}`,
			want: []string{"cache.varyHeaders[16]: at most 16 headers"},
		},
		{
			name: "too_deep",
			doc:  strings.Repeat("[", 10000),
			want: []string{"invalid JSON: nesting deeper than 256 at offset 256"},
		},
		{
			name: "deep_inside_a_valid_section",
			doc:  `{"version":1,"x":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`,
			want: []string{"invalid JSON: nesting deeper than 256 at offset 272"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, problems := Parse([]byte(tc.doc))
			if c != nil {
				t.Errorf("Parse returned a config despite errors")
			}
			if !HasErrors(problems) {
				t.Errorf("HasErrors = false")
			}
			if got := render(problems); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestParse_allErrorsAtOnce checks that validation does not stop at the first error.
func TestParse_allErrorsAtOnce(t *testing.T) {
	doc := `{
		"version": 2,
		"colour": "red",
		"names": {"separator": "*"},
		"stateSync": {
			"defaults": {"cacheControl": "sometimes"},
			"policies": [
				{"match": "get*", "cacheControl": "none"},
				{"match": "tasks.*"},
				{"match": "a", "invalidates": []},
				{"match": "b", "cacheControl": "private", "extra": 1}
			]
		},
		"workflows": [
			{"id": "w", "initial": "nowhere", "key": "user",
			 "states": {"a": {"on": {"GO": "b"}}, "f": {"type": "final", "on": {"X": "a"}}},
			 "tools": {"t": {"states": ["zzz"], "event": "STOP"}}},
			{"id": "v", "initial": "a", "states": {"a": {}}},
			{"id": "v", "initial": "a", "states": {"a": {}}},
			{"id": "w", "initial": "a", "states": {"a": {}, "a": {"type": "start"}}}
		],
		"limits": {"maxArraySize": 0, "timeoutMs": 1.5, "tools": {"x": {"maxResponseBytes": 1}}}
	}`
	want := []string{
		"colour: unknown field",
		"version: must be 1, got 2",
		"names.separator: must not contain '*'",
		`stateSync.defaults.cacheControl: must be "no-store", "immutable" or "none", got "sometimes"`,
		`stateSync.policies[0].match: invalid segment "get*"`,
		"stateSync.policies[1]: needs cacheControl, invalidates or cache",
		"stateSync.policies[2].invalidates: must be a non-empty array of patterns",
		"stateSync.policies[3].extra: unknown field",
		`stateSync.policies[3].cacheControl: must be "no-store", "immutable" or "none", got "private"`,
		`workflows[0].key: must be "session" or "argument:<name>", got "user"`,
		"workflows[0].states.f.on: a final state has no transitions",
		`workflows[0].initial: unknown state "nowhere"`,
		`workflows[0].states.a.on.GO: unknown target state "b"`,
		`workflows[0].tools.t.states[0]: unknown state "zzz"`,
		`workflows[0].tools.t.event: unknown event "STOP": no state handles it`,
		`workflows[2].id: duplicate workflow id "v"`,
		`workflows[3].states.a: duplicate state`,
		`workflows[3].states.a.type: must be "atomic", "compound", "parallel" or "final", got "start"`,
		`workflows[3].id: duplicate workflow id "w"`,
		"limits.maxArraySize: must be between 1 and 1073741824, got 0",
		"limits.timeoutMs: must be a whole number, got 1.5",
		`limits.tools["x"].maxResponseBytes: must be between 1024 and 1073741824, got 1`,
	}
	c, problems := Parse([]byte(doc))
	if c != nil {
		t.Error("Parse returned a config despite errors")
	}
	if got := render(problems); !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestParse_warnings(t *testing.T) {
	policies := func(ps string) string {
		return `{"version":1,"stateSync":{"policies":[` + ps + `]}}`
	}
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{
			name: "shadowed_policy",
			doc:  policies(`{"match":"tasks.*","cacheControl":"none"},{"match":"tasks.update","invalidates":["tasks.*"]}`),
			want: []string{`warning: stateSync.policies[1].match: shadowed: never matches, stateSync.policies[0] ("tasks.*") matches every name it covers first`},
		},
		{
			name: "identical_policy_is_shadowed",
			doc:  policies(`{"match":"a.*","cacheControl":"none"},{"match":"a.*","cacheControl":"immutable"}`),
			want: []string{`warning: stateSync.policies[1].match: shadowed: never matches, stateSync.policies[0] ("a.*") matches every name it covers first`},
		},
		{
			name: "shadowed_by_double_star",
			doc:  policies(`{"match":"x","cacheControl":"none"},{"match":"a.**","cacheControl":"none"},{"match":"a.b.*","cacheControl":"none"}`),
			want: []string{`warning: stateSync.policies[2].match: shadowed: never matches, stateSync.policies[1] ("a.**") matches every name it covers first`},
		},
		{
			name: "partial_overlap",
			doc:  policies(`{"match":"a.*","cacheControl":"none"},{"match":"*.b","cacheControl":"immutable"}`),
			want: []string{`warning: stateSync.policies[1].match: overlaps stateSync.policies[0] ("a.*") on names such as "a.b", where the earlier policy wins`},
		},
		{
			name: "specific_before_general",
			doc:  policies(`{"match":"tasks.update","invalidates":["tasks.*"]},{"match":"tasks.*","cacheControl":"none"},{"match":"**","cacheControl":"no-store"}`),
			want: []string{},
		},
		{
			name: "disjoint_policies",
			doc:  policies(`{"match":"a.*","cacheControl":"none"},{"match":"b.*","cacheControl":"none"},{"match":"a","cacheControl":"none"}`),
			want: []string{},
		},
		{
			name: "unreachable_state",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"on":{"GO":"b"}},"b":{},"island":{"on":{"GO":"a"}}}}]}`,
			want: []string{`warning: workflows[0].states.island: unreachable from the initial state "a"`},
		},
		{
			name: "glob_in_a_binding",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{}},"tools":{"cart.*":{"states":["a"]},"cart.pay":{"states":["a"]}}}]}`,
			want: []string{`warning: workflows[0].tools["cart.*"]: tool names in bindings are exact, not globs: this binds only a tool named "cart.*"`},
		},
		{
			name: "event_not_handled_in_bound_states",
			doc:  `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"on":{"GO":"b"}},"b":{}},"tools":{"t":{"states":["b"],"event":"GO"}}}]}`,
			want: []string{`warning: workflows[0].tools.t.event: none of the tool's states handles "GO": its calls never advance the workflow`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, problems := Parse([]byte(tc.doc))
			if c == nil {
				t.Fatalf("Parse = nil, %q", render(problems))
			}
			if HasErrors(problems) {
				t.Errorf("HasErrors = true")
			}
			if got := render(problems); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	base := `{"version":1,"workflows":[{
		"id": "checkout", "initial": "empty", "key": "session",
		"states": {
			"empty": {"on": {"ADD_ITEM": "has_items"}},
			"has_items": {"on": {"ADD_ITEM": "has_items", "CHECKOUT": "payment", "CLEAR": "empty"}},
			"payment": {"on": {"PAY": "confirmed", "CANCEL": "has_items"}},
			"confirmed": {"type": "final"}
		},
		"tools": {
			"cart.add_item": {"states": ["empty", "has_items"], "event": "ADD_ITEM"},
			"cart.checkout": {"states": ["has_items"], "event": "CHECKOUT"},
			"cart.pay": {"states": ["payment"], "event": "PAY"}
		}}]}`
	reordered := `{"workflows":[{"tools":{"cart.pay":{"event":"PAY","states":["payment"]},
		"cart.checkout":{"event":"CHECKOUT","states":["has_items"]},"cart.add_item":{"states":["has_items","empty"],"event":"ADD_ITEM"}},
		"states":{"confirmed":{"type":"final"},"payment":{"on":{"CANCEL":"has_items","PAY":"confirmed"}},
		"has_items":{"on":{"CLEAR":"empty","CHECKOUT":"payment","ADD_ITEM":"has_items"}},"empty":{"on":{"ADD_ITEM":"has_items"}}},
		"key":"session","initial":"empty","id":"checkout"}],"version":1}`
	fp := func(doc string) string {
		t.Helper()
		return mustParse(t, doc).Workflows[0].Fingerprint
	}
	want := fp(base)
	if got := fp(string(readSample(t))); got != want {
		t.Errorf("sample fingerprint %s differs from the same workflow's %s", got, want)
	}
	if got := fp(reordered); got != want {
		t.Errorf("reordered fingerprint %s, want %s", got, want)
	}
	if got := fp(strings.Replace(base, `"key": "session", `, "", 1)); got != want {
		t.Errorf("the default key changed the fingerprint: %s, want %s", got, want)
	}
	changes := map[string][2]string{
		"transition_target": {`"CLEAR": "empty"`, `"CLEAR": "has_items"`},
		"event_name":        {`"CLEAR": "empty"`, `"RESET": "empty"`},
		"initial":           {`"initial": "empty"`, `"initial": "has_items"`},
		"id":                {`"id": "checkout"`, `"id": "checkout2"`},
		"key":               {`"key": "session"`, `"key": "argument:cart"`},
		"final":             {`"confirmed": {"type": "final"}`, `"confirmed": {}`},
		"binding_states":    {`"states": ["has_items"], "event": "CHECKOUT"`, `"states": ["has_items", "empty"], "event": "CHECKOUT"`},
		"binding_event":     {`"states": ["has_items"], "event": "CHECKOUT"`, `"states": ["has_items"], "event": "CLEAR"`},
		"binding_tool":      {`"cart.pay":`, `"cart.pay2":`},
		"binding_removed":   {`"cart.checkout": {"states": ["has_items"], "event": "CHECKOUT"},`, ``},
	}
	for name, ch := range changes {
		t.Run(name, func(t *testing.T) {
			doc := strings.Replace(base, ch[0], ch[1], 1)
			if doc == base {
				t.Fatalf("replacement %q not found", ch[0])
			}
			if got := fp(doc); got == want {
				t.Errorf("fingerprint unchanged: %s", got)
			}
		})
	}
}

func TestParse_hostileInput(t *testing.T) {
	// None of these may panic; each is an error.
	docs := []string{
		strings.Repeat("[", 10000),
		strings.Repeat(`{"a":`, 10000),
		strings.Repeat("[", 255) + strings.Repeat("]", 255),
		`{"version":1,"workflows":[` + strings.Repeat(`{"id":"w","initial":"a","states":{"a":{}}},`, 200) + `1]}`,
		"\x00", "\xff", `{"version":1}` + "\x00", `{"version":1`, `"`, `1`, `true`, `-`,
	}
	for _, doc := range docs {
		c, problems := Parse([]byte(doc))
		if c != nil || !HasErrors(problems) {
			t.Errorf("Parse(%.40q) = %v, %q; want an error", doc, c, render(problems))
		}
	}
}

func TestProblem_String(t *testing.T) {
	if got := (Problem{Message: "m"}).String(); got != "m" {
		t.Errorf("String() = %q", got)
	}
	if got := (Problem{Path: "a.b", Message: "m", Warning: true}).String(); got != "a.b: m" {
		t.Errorf("String() = %q", got)
	}
}

func TestSprintf(t *testing.T) {
	tests := []struct {
		format string
		args   []string
		want   string
	}{
		{"plain", nil, "plain"},
		{"%s and %s", []string{"a", "b"}, "a and b"},
		{"%s", []string{"%s"}, "%s"},
		{"%s %s", []string{"x"}, "x %s"},
		{"x", []string{"unused"}, "x"},
	}
	for _, tc := range tests {
		if got := sprintf(tc.format, tc.args...); got != tc.want {
			t.Errorf("sprintf(%q, %q) = %q, want %q", tc.format, tc.args, got, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(readSample(f))
	if sc, err := os.ReadFile("../../../abi/testdata/config/statechart.json"); err == nil {
		f.Add(sc)
	}
	for _, doc := range []string{
		`{"version":1}`,
		`{"version":2,"colour":1}`,
		`{"version":1,"names":{"separator":"__"},"stateSync":{"policies":[{"match":"a__*","cacheControl":"none"},{"match":"*__b","invalidates":["c"]}]}}`,
		`{"version":1,"stateSync":{"policies":[{"match":"get*"},{"match":"a","invalidates":[]}]}}`,
		`{"version":1,"workflows":[{"id":"w","initial":"a","key":"argument:id","states":{"a":{"on":{"GO":"b"}},"b":{"type":"final"},"c":{}},"tools":{"t":{"states":["a"],"event":"GO"}}}]}`,
		`{"version":1,"workflows":[{"id":"w","initial":"x","states":{"a":{"on":{"GO":"z"}}},"tools":{"t":{"states":["q"],"event":"E"}}}]}`,
		`{"version":1,"limits":{"maxArraySize":0,"timeoutMs":1.5,"tools":{"a.*":{"maxArraySize":5}}}}`,
		`{"version":1,"principal":{"header":"X-User"}}`,
		`{"version":1,"workflows":[{"id":"w","initial":"p","states":{"p":{"type":"parallel","id":"p1","onDone":"f","states":{"r":{"initial":"a","states":{"a":{"on":{"E":[{"target":"b","guard":{"type":"and","guards":[{"type":"argument","params":{"path":"n","op":"gt","value":1}},{"type":"not","guard":{"type":"result","params":{"path":"x.0","op":"exists"}}}]}},"#p1.s.c"]}},"b":{"type":"final"}}},"s":{"initial":"c","states":{"c":{},"d":{}}}}},"f":{"type":"final"}},"tools":{"t":{"states":["p.r","f"],"event":"E"}}}]}`,
		`{"version":1,"workflows":[{"id":"w","initial":"a.b","states":{"a.b":{"on":{"GO":"c"}},"c":{"states":{"x":{}},"initial":"x"}}}]}`,
		strings.Repeat("[", 300),
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, problems := Parse(data)
		if c != nil && HasErrors(problems) {
			t.Fatalf("Parse returned a config with errors: %q", render(problems))
		}
		if c == nil && !HasErrors(problems) {
			t.Fatalf("Parse returned no config and no error: %q", render(problems))
		}
		if c == nil {
			return
		}
		for _, w := range c.Workflows {
			if _, ok := w.State(w.Initial); !ok {
				t.Fatalf("workflow %q: initial state %q missing", w.ID, w.Initial)
			}
			for _, s := range w.States {
				for _, list := range [][]Edge{s.On, s.OnDone} {
					for _, e := range list {
						if (e.Target == "") != (e.To < 0) || e.To >= len(w.States) {
							t.Fatalf("workflow %q: edge to missing state %q", w.ID, e.Target)
						}
					}
				}
				for _, ch := range s.Children {
					if ch <= 0 || ch >= len(w.States) {
						t.Fatalf("workflow %q: child %d out of range", w.ID, ch)
					}
				}
			}
			start := w.InitialConf()
			if v := w.AppendValue(nil, &start); !json.Valid(v) {
				t.Fatalf("workflow %q: initial value %s", w.ID, v)
			} else if back, ok := w.ParseValue(gjson.ParseBytes(v)); !ok || back != start {
				t.Fatalf("workflow %q: initial value %s does not read back", w.ID, v)
			}
			for i := range w.Tools {
				for _, s := range w.Tools[i].States {
					if _, ok := w.State(s); !ok {
						t.Fatalf("workflow %q: binding to missing state %q", w.ID, s)
					}
				}
			}
		}
	})
}

// confOf returns the configuration of a flat workflow in its state name.
func confOf(w *Workflow, name string) *Conf {
	c, _ := w.ParseValue(gjson.Parse(strconv.Quote(name)))
	return &c
}

// nextOf returns the target of s's first candidate for event.
func nextOf(s *State, event string) (string, bool) {
	for _, e := range s.On {
		if e.Event == event {
			return e.Target, true
		}
	}
	return "", false
}

// TestParse_dottedStateNames: a flat workflow keeps names with '.' (read whole, as
// before statecharts); a statechart refuses them, saying what to rename.
func TestParse_dottedStateNames(t *testing.T) {
	flat := `{"version":1,"workflows":[{"id":"w","initial":"a.b","states":{"a.b":{"on":{"GO":"c.d"}},"c.d":{"type":"final"}},"tools":{"t":{"states":["a.b"],"event":"GO"}}}]}`
	c, problems := Parse([]byte(flat))
	if c == nil {
		t.Fatalf("flat workflow with dotted names refused: %q", render(problems))
	}
	w := c.Workflows[0]
	if s, ok := w.State("a.b"); !ok || s.Name != "a.b" || !w.Flat {
		t.Fatalf("State(a.b) = %+v, %v (flat %v)", s, ok, w.Flat)
	}
	start := w.InitialConf()
	if v := string(w.AppendValue(nil, &start)); v != `"a.b"` {
		t.Fatalf("value = %s", v)
	}
	nested := `{"version":1,"workflows":[{"id":"w","initial":"a.b","states":{"a.b":{},"c":{"initial":"x","states":{"x":{}}}}}]}`
	_, problems = Parse([]byte(nested))
	want := `workflows[0].states["a.b"]: a state name with '.' reads as a path in a workflow with compound or parallel states: rename it (for example with '_' for '.')`
	found := false
	for _, p := range problems {
		found = found || p.String() == want
	}
	if !found {
		t.Fatalf("problems %q lack %q", render(problems), want)
	}
}
