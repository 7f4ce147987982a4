package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/tidwall/gjson"
)

// TestTransition_largeFlatWorkflow: a flat workflow keeps any number of states (the
// statechart bound of 255 is for compound and parallel ones): states past the bit set of a
// configuration load, match, move and finish.
func TestTransition_largeFlatWorkflow(t *testing.T) {
	const n = 600
	var states, allowed []string
	for i := 0; i < n; i++ {
		states = append(states, fmt.Sprintf(`"s%d":{"on":{"NEXT":"s%d"}}`, i, i+1))
		allowed = append(allowed, fmt.Sprintf(`"s%d"`, i))
	}
	states = append(states, fmt.Sprintf(`"s%d":{"type":"final"}`, n))
	cfg := fmt.Sprintf(`{"version":1,"workflows":[{"id":"counter","initial":"s0","key":"session","states":{%s},
		"tools":{"tasks.update":{"states":[%s],"event":"NEXT"},"users.get":{"states":["s%d"]}}}]}`,
		strings.Join(states, ","), strings.Join(allowed, ","), n)
	e, err := New([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	fp := e.Config().Workflows[0].Fingerprint
	snap := func(state string) string {
		return `{"stategate/v1/counter/session//s1":{"workflow":"counter","fingerprint":"` + fp + `","state":"` + state + `","seq":1}}`
	}
	for _, tt := range []struct{ from, to string }{{"s0", "s1"}, {"s255", "s256"}, {"s256", "s257"}, {"s300", "s301"}, {"s599", "s600"}} {
		out := e.Call(abi.FuncTransition, []byte(`{"tool":"tasks.update","session":"s1","states":`+snap(tt.from)+`}`))
		ev := gjson.GetBytes(out, "events.0")
		if ev.Get("from").Str != tt.from || ev.Get("to").Str != tt.to || ev.Get("outcome").Str != "transitioned" {
			t.Errorf("%s: %s", tt.from, out)
		}
		got := ""
		gjson.GetBytes(out, "states").ForEach(func(_, v gjson.Result) bool { got = v.Get("state").Str; return false })
		if got != tt.to {
			t.Errorf("%s: stored %q, want %q", tt.from, got, tt.to)
		}
	}
	for _, tt := range []struct {
		tool, state string
		allow       bool
	}{{"tasks.update", "s400", true}, {"users.get", "s400", false}, {"users.get", "s600", true}, {"tasks.update", "s600", false}} {
		out := e.Call(abi.FuncCheckLimits, []byte(`{"tool":"`+tt.tool+`","session":"s1","states":`+snap(tt.state)+`}`))
		if gjson.GetBytes(out, "allow").Bool() != tt.allow {
			t.Errorf("%s in %s: %s", tt.tool, tt.state, out)
		}
	}
	out := e.Call(abi.FuncTransition, []byte(`{"tool":"tasks.update","session":"s1","states":`+snap("s600")+`}`))
	if gjson.GetBytes(out, "events.0.outcome").Str != "final" {
		t.Errorf("from the final state: %s", out)
	}
}

// TestResetSnapshot: an operator's reset puts a statechart instance in its initial
// configuration, or in a named state with its ancestors, default children and the other
// regions of a parallel ancestor at their defaults (as a transition from the root into it
// would); a flat workflow's reset names the state; an unknown state is an error.
func TestResetSnapshot(t *testing.T) {
	e, err := New([]byte(`{"version":1,"workflows":[{"id":"order","initial":"open","key":"session",
		"states":{
			"open":{"on":{"PAY":"fulfil"}},
			"fulfil":{"type":"parallel","states":{
				"ship":{"initial":"packing","states":{"packing":{"on":{"SHIP":"sent"}},"sent":{"type":"final"}}},
				"bill":{"initial":"draft","states":{"draft":{"on":{"SEND":"sent"}},"sent":{"type":"final"}}}}}},
		"tools":{"order.pay":{"states":["open"],"event":"PAY"}}},
		{"id":"flat","initial":"a","key":"session","states":{"a":{"on":{"GO":"b"}},"b":{}},
		"tools":{"x.go":{"states":["a"],"event":"GO"}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	old := []byte(`{"workflow":"order","state":{"fulfil":{"ship":"sent","bill":"draft"}},"seq":7}`)
	for _, tt := range []struct{ workflow, to, want, from string }{
		{"order", "", `"open"`, `{"fulfil":{"ship":"sent","bill":"draft"}}`},
		{"order", "fulfil.ship.sent", `{"fulfil":{"ship":"sent","bill":"draft"}}`, ""},
		{"order", "fulfil", `{"fulfil":{"ship":"packing","bill":"draft"}}`, ""},
		{"flat", "b", `"b"`, ""},
	} {
		snap, from, err := e.ResetSnapshot(tt.workflow, tt.to, old)
		if err != nil {
			t.Fatalf("%s to %q: %v", tt.workflow, tt.to, err)
		}
		if got := gjson.GetBytes(snap, "state").Raw; got != tt.want || gjson.GetBytes(snap, "seq").Int() != 8 {
			t.Errorf("%s to %q: %s, want state %s and seq 8", tt.workflow, tt.to, snap, tt.want)
		}
		if tt.from != "" && from != tt.from {
			t.Errorf("from %s, want %s", from, tt.from)
		}
	}
	if _, _, err := e.ResetSnapshot("order", "fulfil.nope", old); err == nil {
		t.Error("a reset to an unknown state is accepted")
	}
}
