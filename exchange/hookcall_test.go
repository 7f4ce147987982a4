package exchange

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// The hook entry points (AdmitCall, FinishCall), on the native engine and an in-memory
// State (exchange/pending has the pairing rule's tests).

const hookConfig = `{"version":1,
 "stateSync":{"defaults":{"cacheControl":"no-store"},"policies":[
   {"match":"tasks.update","invalidates":["tasks.*"]}]},
 "workflows":[{"id":"checkout","initial":"empty","key":"session",
   "states":{"empty":{"on":{"ADD_ITEM":"has_items"}},"has_items":{"on":{"ADD_ITEM":"has_items","CHECKOUT":"payment"}},
     "payment":{"on":{"PAY":"confirmed"}},"confirmed":{"type":"final"}},
   "tools":{"cart.add_item":{"states":["empty","has_items"],"event":"ADD_ITEM"},
     "cart.checkout":{"states":["has_items"],"event":"CHECKOUT"},"cart.pay":{"states":["payment"],"event":"PAY"}}}],
 "limits":{"maxArraySize":3}}`

func newHookCore(t testing.TB, wait time.Duration) (*Core, *testState) {
	t.Helper()
	e, err := engine.New([]byte(hookConfig))
	if err != nil {
		t.Fatal(err)
	}
	st := newTestState(true)
	return New(Options{Plugin: enginePlugin{e}, State: st, Config: []byte(hookConfig), LeaseWait: wait}), st
}

const okResult = `{"content":[{"type":"text","text":"done"}]}`

func TestAdmitCall_refusals(t *testing.T) {
	c, _ := newHookCore(t, time.Second)
	tests := []struct{ name, params, want string }{
		{"not JSON", `{"name":`, "parse error"},
		{"not an object", `["cart.pay"]`, "parse error"},
		{"no name", `{"arguments":{}}`, "params.name"},
		{"a repeated member", `{"name":"tasks.list","name":"cart.pay"}`, "repeat a member"},
		{"out of order", `{"name":"cart.pay","arguments":{}}`, "not available now"},
		{"an array over its limit", `{"name":"tasks.list","arguments":{"ids":[1,2,3,4]}}`, "limit is 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := c.AdmitCall(context.Background(), "s1", []byte(tt.params))
			defer ex.Close()
			if ex.Verdict != Reply {
				t.Fatalf("verdict %v, want Reply", ex.Verdict)
			}
			r := gjson.ParseBytes(ex.Result())
			if !r.Get("isError").Bool() || !strings.Contains(r.Get("content.0.text").Str, tt.want) {
				t.Errorf("result %s, want isError with %q", ex.Result(), tt.want)
			}
		})
	}
}

func TestFinishCall(t *testing.T) {
	c, _ := newHookCore(t, time.Second)
	ctx := context.Background()
	ex := c.AdmitCall(ctx, "s1", []byte(`{"name":"tasks.update","arguments":{"id":"T1"}}`))
	if ex.Verdict != Forward {
		t.Fatalf("tasks.update not admitted: %s", ex.Body)
	}
	out := ex.FinishCall(ctx, []byte(okResult))
	ex.Close()
	if got := gjson.GetBytes(out, "content.0.text").Str; !strings.Contains(got, "Cache invalidated for tasks.*") {
		t.Errorf("no invalidation block: %s", out)
	}
	if gjson.GetBytes(out, "content.1.text").Str != "done" {
		t.Errorf("the result's own content is gone: %s", out)
	}
	// A result that is not an object passes (nil) and fires nothing.
	ex = c.AdmitCall(ctx, "s1", []byte(`{"name":"tasks.update","arguments":{"id":"T1"}}`))
	if out := ex.FinishCall(ctx, []byte(`[1]`)); out != nil {
		t.Errorf("a non-object result was rewritten: %s", out)
	}
	ex.Close()
}
