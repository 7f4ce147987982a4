package engine

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

// TestCheckLimits_approval: an admitted call carries the approval it waits for; every
// denial (array limit, health, the gate) wins and asks nobody; the default message names
// the tool as valid JSON whatever the name holds.
func TestCheckLimits_approval(t *testing.T) {
	e, err := New([]byte(`{"version":1,"limits":{"maxArraySize":2},
		"health":{"modes":{"off.*":"disabled"}},
		"approvals":[{"match":"**","by":"user"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	call := func(in string) gjson.Result {
		t.Helper()
		out, err := e.CheckLimits([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if !json.Valid(out) {
			t.Fatalf("%s: not JSON: %s", in, out)
		}
		return gjson.ParseBytes(out)
	}
	states := `"now":1,"states":{"stategate/v1/health/off.x":null,"stategate/v1/health/a%22%E2%80%AEb%00":null,"stategate/v1/health/t":null}`
	ok := call(`{"tool":"t","arguments":{"a":[1]},` + states + `}`)
	if !ok.Get("allow").Bool() || ok.Get("approval.by").Str != "user" || ok.Get("approval.timeoutMs").Int() != 300000 ||
		ok.Get("approval.message").Str != "Allow the tool t to run with the arguments shown?" {
		t.Fatalf("allowed call: %s", ok.Raw)
	}
	if arr := call(`{"tool":"t","arguments":{"a":[1,2,3]},` + states + `}`); arr.Get("allow").Bool() || arr.Get("approval").Exists() {
		t.Errorf("array over the limit: %s", arr.Raw)
	}
	if off := call(`{"tool":"off.x",` + states + `}`); off.Get("allow").Bool() || off.Get("approval").Exists() {
		t.Errorf("disabled tool: %s", off.Raw)
	}
	if odd := call(`{"tool":"a\"\u202eb\u0000",` + states + `}`); odd.Get("approval.message").Str != "Allow the tool a\"\u202eb\x00 to run with the arguments shown?" {
		t.Errorf("odd name: %s", odd.Raw)
	}
}
