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
