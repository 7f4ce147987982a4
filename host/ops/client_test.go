package ops

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/events"
)

// TestClient_routes: the client reaches the handler of each route it calls (the route table
// is the server's and the client's), with the token, saying it is the CLI, and the request
// bodies the handlers decode.
func TestClient_routes(t *testing.T) {
	e := newAdminEnv(t, "tok", false)
	c := &Client{Base: e.srv.URL, Token: "tok"}
	ctx := context.Background()
	sub := e.bus.Subscribe(Filter{})
	defer sub.Close()

	tools, err := c.Tools(ctx)
	if err != nil || len(tools) != 1 || tools[0].Name != "cart.pay" {
		t.Fatalf("Tools: %v %v", tools, err)
	}
	overview, health, err := c.Overview(ctx)
	if err != nil || !health || len(overview) != 1 || overview[0].Mode != "quarantined" {
		t.Fatalf("Overview: %v %v %v", overview, health, err)
	}
	changes, err := c.Mode(ctx, ModeRequest{Target: Target{Match: "cart.*", DryRun: true}, Mode: "disabled", Reason: "r"})
	if err != nil || len(changes) != 1 || changes[0].To != "disabled" {
		t.Fatalf("Mode: %v %v", changes, err)
	}
	if _, err := c.Approve(ctx, ApproveRequest{Target: Target{Tool: "cart.pay"}, Pending: map[string]string{}}); err != nil {
		t.Fatalf("Approve: %v", err)
	}
	want := []string{"tools", "tools", "mode match=cart.* (dry run) disabled r", "approve tool=cart.pay"}
	if got := e.op.touched(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the operator was asked %q, want %q", got, want)
	}
	select {
	case ev := <-sub.C:
		if ev.Type != events.EventOperatorAction || ev.Data["via"] != "cli" || ev.Data["action"] != "approve" {
			t.Fatalf("event %+v: want the approval, via cli", ev)
		}
	default:
		t.Fatal("no operator_action event")
	}
	// The fake operator has no cache, the environment no reset: the API's answers come back
	// as *APIError with the status and the message.
	var ae *APIError
	if _, err := c.Purge(ctx, Target{Tool: "cart.pay"}); !errors.As(err, &ae) || ae.Status != http.StatusConflict || !strings.Contains(ae.Error(), "(HTTP 409)") {
		t.Fatalf("Purge: %v", err)
	}
	if _, err := c.Reset(ctx, ResetRequest{Workflow: "w", Session: "s"}); !errors.As(err, &ae) || ae.Status != http.StatusNotImplemented {
		t.Fatalf("Reset: %v", err)
	}
	if _, _, err := c.History(ctx, url.Values{"count": {"5"}}); err != nil {
		t.Fatalf("History: %v", err)
	}
	bad := &Client{Base: e.srv.URL, Token: "wrong"}
	if _, err := bad.Tools(ctx); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || ae.Base != e.srv.URL {
		t.Fatalf("a wrong token: %v", err)
	}
}

// TestClient_events: Events hands each event of the stream to emit until emit says stop.
func TestClient_events(t *testing.T) {
	e := newAdminEnv(t, "tok", false)
	c := &Client{Base: e.srv.URL, Token: "tok"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 4)
	done := make(chan error, 1)
	go func() {
		done <- c.Events(ctx, url.Values{"type": {"operator_action"}}, func(b []byte) bool {
			got <- string(b)
			return len(got) == 2
		})
	}()
	for e.bus.Subscribers() == 0 {
		time.Sleep(5 * time.Millisecond) // the stream is open once the handler subscribed
	}
	for i := range 2 {
		e.bus.Publish(events.Event{Type: events.EventOperatorAction, Data: map[string]any{"n": i}})
	}
	if err := <-done; err != nil {
		t.Fatalf("Events: %v", err)
	}
	if a, b := <-got, <-got; !strings.Contains(a, `"n":0`) || !strings.Contains(b, `"n":1`) {
		t.Fatalf("events %s, %s", a, b)
	}
}
