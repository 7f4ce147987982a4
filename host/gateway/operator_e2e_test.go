package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
)

// operatorConfig holds catalog.list for an operator (3 s at most).
var operatorConfig = strings.Replace(mrtrConfig, `"cache": {"scope": "shared"},`,
	`"approvals": [{"match": "catalog.list", "by": "operator", "message": "List the catalog?", "timeoutMs": 3000}],`, 1)

// eventRecorder keeps the events a gateway published.
type eventRecorder struct {
	ch chan events.Event
}

func (r *eventRecorder) Publish(e events.Event) {
	select {
	case r.ch <- e:
	default:
	}
}

// next returns the next event of type typ within 5 s.
func (r *eventRecorder) next(t *testing.T, typ string) events.Event {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e := <-r.ch:
			if e.Type == typ {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event", typ)
		}
	}
}

// operatorGateway starts a gateway holding calls for an operator in front of one
// mrtrServer, on the store st (shared by the test's other replica, a Hold on st).
func operatorGateway(t *testing.T, st store.Store) (*mrtrServer, *mrtrClient, *eventRecorder) {
	t.Helper()
	srv := newMRTRServer()
	up := httptest.NewServer(srv)
	t.Cleanup(up.Close)
	ctx := context.Background()
	u, _ := url.Parse(up.URL)
	pool, err := wasmrt.NewPool(ctx, pluginRuntime(t), []byte(operatorConfig), wasmrt.PoolOptions{Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close(ctx) })
	rec := &eventRecorder{ch: make(chan events.Event, 256)}
	gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: []byte(operatorConfig), Store: st,
		Origins: admission.OriginPolicy{Loopback: true}, Publisher: rec})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(gw)
	t.Cleanup(front.Close)
	return srv, &mrtrClient{t: t, url: front.URL + "/mcp"}, rec
}

// TestOperatorApproval_heldUntilDecided: a call an approvals entry gives to an operator
// waits on the gateway; an operator's decision made through the store (as another replica
// makes it) lets it go once, or refuses it with who denied; nobody deciding refuses it at
// the entry's timeout; a second decision is refused with the first; a client that leaves
// closes the record; the events say who asked and who decided.
func TestOperatorApproval_heldUntilDecided(t *testing.T) {
	st := store.NewMemory(store.Options{})
	srv, c, rec := operatorGateway(t, st)
	other := approval.NewHold(store.StateOf(st), rand.Read) // the other replica's admin API
	ctx := context.Background()
	ran := func() int { return srv.count(srv.hits, "catalog.list") }
	call := func() chan map[string]any {
		out := make(chan map[string]any, 1)
		go func() {
			_, r := c.call(map[string]any{"name": "catalog.list", "arguments": map[string]any{"q": "tea\u202e"}}, nil)
			out <- r
		}()
		return out
	}
	pending := func() approval.Pending {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if list, err := other.List(ctx); err == nil && len(list) == 1 {
				return list[0]
			}
		}
		t.Fatal("the held call is not listed")
		return approval.Pending{}
	}

	// Approved on the other replica: the call goes, once.
	done := call()
	p := pending()
	req := rec.next(t, events.EventApprovalRequested)
	if req.Data["id"] != p.ID || p.Tool != "catalog.list" || p.Arguments != `{"q":"tea\u202e"}` || !strings.Contains(p.Message, "List the catalog?") {
		t.Fatalf("the record %+v, the event %+v", p, req)
	}
	if ran() != 0 {
		t.Fatal("the held call reached the server")
	}
	if _, err := other.Decide(ctx, p.ID, approval.Decision{Verdict: approval.VerdictApproved, By: "admin", Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	if r := <-done; resultText(r) != "tea, coffee\n" || ran() != 1 {
		t.Fatalf("approved: %s (server calls %d)", mustJSON(r), ran())
	}
	if q, err := other.Decide(ctx, p.ID, approval.Decision{Verdict: approval.VerdictDenied, By: "admin", Via: "status page"}); !errors.Is(err, approval.ErrDecided) || q.Decision.Verdict != approval.VerdictApproved {
		t.Fatalf("a second decision: %+v, %v", q.Decision, err)
	}

	// Denied: refused with who denied, nothing forwarded.
	done = call()
	p = pending()
	if _, err := other.Decide(ctx, p.ID, approval.Decision{Verdict: approval.VerdictDenied, By: "admin", Via: "status page"}); err != nil {
		t.Fatal(err)
	}
	if r := <-done; deniedCode(r) != abi.DenyApprovalDeclined || !strings.Contains(resultText(r), "admin, status page") || ran() != 1 {
		t.Fatalf("denied: %s (server calls %d)", mustJSON(r), ran())
	}

	// Nobody decides: refused at the entry's timeout (3 s), and the record says expired.
	start := time.Now()
	done = call()
	p = pending()
	r := <-done
	if deniedCode(r) != abi.DenyApprovalRequired || !strings.Contains(resultText(r), "No operator decided") || ran() != 1 {
		t.Fatalf("timed out: %s (server calls %d)", mustJSON(r), ran())
	}
	if d := time.Since(start); d < 2500*time.Millisecond || d > 6*time.Second {
		t.Errorf("the wait took %v; want the entry's 3 s", d)
	}
	if dec := rec.next(t, events.EventApprovalDecided); dec.Data["verdict"] != approval.VerdictExpired || dec.Data["id"] != p.ID {
		t.Errorf("the expiry's event: %+v", dec)
	}
	if q, err := other.Decide(ctx, p.ID, approval.Decision{Verdict: approval.VerdictApproved, By: "admin", Via: "api"}); !errors.Is(err, approval.ErrDecided) || q.Decision.Verdict != approval.VerdictExpired {
		t.Fatalf("a late approve: %+v, %v", q.Decision, err)
	}

	// The client leaves: the record is closed, an approve afterwards finds it decided.
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": map[string]any{"name": "catalog.list", "arguments": map[string]any{}}})
	cctx, cancel := context.WithCancel(ctx)
	hreq, _ := http.NewRequestWithContext(cctx, "POST", c.url, bytes.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "catalog.list"} {
		hreq.Header.Set(k, v)
	}
	go func() {
		if resp, err := http.DefaultClient.Do(hreq); err == nil {
			resp.Body.Close()
		}
	}()
	p = pending()
	cancel()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		q, _ := other.Get(ctx, p.ID)
		if q.Decision != nil {
			if q.Decision.Verdict != approval.VerdictClosed || q.Decision.Via != "disconnect" {
				t.Fatalf("after the client left: %+v", q.Decision)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the record stayed pending after the client left")
		}
	}
	if ran() != 1 {
		t.Fatalf("server calls %d", ran())
	}
}
