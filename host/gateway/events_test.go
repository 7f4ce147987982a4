package gateway_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/host/gateway"
)

// recorder is an events.Publisher that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []events.Event
}

func (r *recorder) Publish(e events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.Timestamp.IsZero() {
			out = append(out, "unstamped "+e.Type)
		}
		switch e.Type {
		case events.EventToolCalled:
			out = append(out, e.Type+" "+e.Tool+" "+e.Data["outcome"].(string))
		case events.EventWorkflowTransitioned:
			out = append(out, e.Type+" "+e.Tool+" "+e.OldState+"->"+e.NewState+" "+e.Data["workflow"].(string)+" "+e.Data["event"].(string))
		case events.EventCallRefused:
			out = append(out, e.Type+" "+e.Tool+" "+e.Data["code"].(string)+" "+e.Data["workflow"].(string)+" "+e.Data["state"].(string))
		default:
			out = append(out, e.Type)
		}
	}
	return out
}

// TestEvents_followTheWorkflow drives the demo checkout with the official SDK client and
// checks the core's events: one tool_called per call with its outcome, and a
// workflow_transitioned for each stored move, published after the move (never for a
// denied call or a failed one).
func TestEvents_followTheWorkflow(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, envOptions{gateway: gateway.Options{Publisher: rec}})
	c := e.connect(t, sessionEra)
	c.call(t, "cart.pay", nil) // denied in empty
	c.call(t, "cart.add_item", map[string]any{"sku": "tea"})
	c.call(t, "cart.add_item", map[string]any{"sku": "milk"}) // unknown: isError, no move
	c.call(t, "cart.add_item", map[string]any{"sku": "mug"})
	c.call(t, "cart.checkout", nil)
	c.call(t, "cart.pay", nil)
	want := []string{
		"tool_called cart.pay denied",
		"call_refused cart.pay TOOL_NOT_AVAILABLE checkout empty",
		"workflow_transitioned cart.add_item empty->has_items checkout ADD_ITEM",
		"tool_called cart.add_item success",
		"tool_called cart.add_item error",
		"workflow_transitioned cart.add_item has_items->has_items checkout ADD_ITEM",
		"tool_called cart.add_item success",
		"workflow_transitioned cart.checkout has_items->payment checkout CHECKOUT",
		"tool_called cart.checkout success",
		"workflow_transitioned cart.pay payment->confirmed checkout PAY",
		"tool_called cart.pay success",
	}
	got := rec.lines()
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestEvents_refusalCarriesItsCode: a refused call is a call_refused event with its code,
// the workflow and state, and the session as a digest: never the session id the client
// presents (it acts as a credential).
func TestEvents_refusalCarriesItsCode(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, envOptions{gateway: gateway.Options{Publisher: rec}})
	c := e.connect(t, sessionEra)
	c.call(t, "cart.pay", nil)
	// Arguments the engine refuses as a request error (-32602): INVALID_PARAMS.
	if res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "cart.add_item", Arguments: []any{1}}); err == nil {
		t.Fatalf("arguments that are not an object were not refused: %+v", res)
	}
	sid := c.cs.ID()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	invalid := false
	for _, ev := range rec.events {
		invalid = invalid || ev.Type == events.EventCallRefused && ev.Tool == "cart.add_item" && ev.Data["code"] == events.RefusedInvalidParams
	}
	if !invalid {
		t.Error("no call_refused INVALID_PARAMS for the deep arguments")
	}
	for _, ev := range rec.events {
		if ev.Type != events.EventCallRefused {
			continue
		}
		b, _ := json.Marshal(ev)
		if sid == "" || strings.Contains(string(b), sid) || ev.Data["session"] != events.SessionDigest(sid) || ev.Data["code"] != "TOOL_NOT_AVAILABLE" {
			t.Fatalf("call_refused %s (session %q)", b, sid)
		}
		return
	}
	t.Fatal("no call_refused event")
}
