package exchange

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/session"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/tidwall/gjson"
)

// Unit tests of gateway sessions (session.go) with the native engine and an in-memory State;
// host/gateway and testharness/field test them through real stores, servers and clients.

const initializeBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`

// initialize admits an initialize and answers it as a server that issues upstreamSession
// ("" for a stateless server) with status; it returns the session the core sets on the answer.
func initialize(t *testing.T, c *Core, body string, status int, upstreamSession string) string {
	t.Helper()
	h := headers("")
	h.Del("MCP-Protocol-Version")
	ex := c.Admit(context.Background(), h, []byte(body))
	if ex.Verdict != Forward {
		t.Fatalf("initialize verdict %v: %s", ex.Verdict, ex.Body)
	}
	defer ex.Close()
	return ex.AnswerSession(context.Background(), status, upstreamSession)
}

// call admits a tools/call of tool in session and, when it is forwarded, answers it with a
// success; it returns the exchange.
func call(t *testing.T, c *Core, session, tool string) *Exchange {
	t.Helper()
	ctx := context.Background()
	ex := c.Admit(ctx, headers(session), []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`","arguments":{}}}`))
	if ex.Verdict == Forward {
		ex.Answer().RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}]}}`))
	}
	ex.Close()
	return ex
}

func TestAnswerSession_issuesOnlyForAStatelessSessionEraInitialize(t *testing.T) {
	c := testCore(t)
	st := c.state.(*testState)
	a := initialize(t, c, initializeBody, 200, "")
	b := initialize(t, c, initializeBody, 200, "")
	for _, id := range []string{a, b} {
		if !session.IsGateway(id) || len(id) != len(session.Prefix)+43 {
			t.Fatalf("issued %q: want %q and 43 characters", id, session.Prefix)
		}
		for _, r := range id {
			if r < 0x21 || r > 0x7e {
				t.Fatalf("issued %q: not visible ASCII", id)
			}
		}
		if _, ok := st.vals[session.RecordKey(id)]; !ok {
			t.Errorf("no record stored for %s", id)
		}
	}
	if a == b {
		t.Fatalf("two initializes got the same session %s", a)
	}
	if got := c.Stats.Get(stats.CountSessionsIssued); got != 2 {
		t.Errorf("sessions_issued = %d, want 2", got)
	}
	for _, tt := range []struct {
		name, body, upstream string
		status               int
	}{
		{"the upstream issues its own", initializeBody, "upstream-1", 200},
		{"the upstream refused", initializeBody, "", 400},
		{"the 2026-07-28 era has no sessions", strings.Replace(initializeBody, "2025-06-18", "2026-07-28", 1), "", 200},
	} {
		if got := initialize(t, c, tt.body, tt.status, tt.upstream); got != "" {
			t.Errorf("%s: issued %q", tt.name, got)
		}
	}
	ex := c.Admit(context.Background(), headers(""), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if got := ex.AnswerSession(context.Background(), 200, ""); got != "" {
		t.Errorf("tools/list answer: issued %q", got)
	}
}

// TestGatewaySession_keysTheWorkflow: a session-keyed workflow advances under a gateway
// session, and only under it: another session, or none, starts from the initial state.
func TestGatewaySession_keysTheWorkflow(t *testing.T) {
	c := testCore(t)
	a := initialize(t, c, initializeBody, 200, "")
	b := initialize(t, c, initializeBody, 200, "")
	ex := call(t, c, a, "cart.add_item")
	if ex.Verdict != Forward || !ex.OwnSession() {
		t.Fatalf("cart.add_item in %s: verdict %v, own session %v", a, ex.Verdict, ex.OwnSession())
	}
	if ex := call(t, c, a, "cart.checkout"); ex.Verdict != Forward {
		t.Errorf("cart.checkout after cart.add_item in the same gateway session was refused: %s", ex.Body)
	}
	for _, s := range []string{b, ""} {
		if ex := call(t, c, s, "cart.checkout"); ex.Verdict != Reply || !strings.Contains(string(ex.Body), "TOOL_NOT_AVAILABLE") {
			t.Errorf("cart.checkout in session %q (another one) was not refused: %v %s", s, ex.Verdict, ex.Body)
		}
	}
}

func TestGatewaySession_unknownIdsAre404(t *testing.T) {
	c := testCore(t)
	live := initialize(t, c, initializeBody, 200, "")
	for _, id := range []string{
		session.Prefix + strings.Repeat("A", 43), // well formed, never issued
		live + "x",                               // longer than any issued id
		strings.Replace(live, ".", ".x", 1)[:53], // one character changed
		session.Prefix,
	} {
		ex := c.Admit(context.Background(), headers(id), []byte(`{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":{"name":"countries.list"}}`))
		if ex.Verdict != Reply || ex.Status != 404 {
			t.Fatalf("POST with %q: verdict %v status %d", id, ex.Verdict, ex.Status)
		}
		if want := `{"jsonrpc":"2.0","id":"r1","error":{"code":-32001,"message":"` + session.NotFoundText + `"}}`; string(ex.Body) != want {
			t.Errorf("POST with %q answered %s", id, ex.Body)
		}
		for _, m := range []string{"GET", "DELETE", "PUT"} {
			chk := c.CheckSession(context.Background(), m, headers(id))
			if chk.Action != session.Reply || chk.Status != 404 || gjson.GetBytes(chk.Body, "error.code").Int() != session.CodeNotFound {
				t.Errorf("%s with %q: %+v", m, id, chk)
			}
		}
	}
	// A notification (which the core otherwise passes) is refused too.
	ex := c.Admit(context.Background(), headers(session.Prefix+"nope"), []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if ex.Verdict != Reply || ex.Status != 404 {
		t.Errorf("notification with an unknown gateway session: verdict %v status %d", ex.Verdict, ex.Status)
	}
}

func TestCheckSession(t *testing.T) {
	c := testCore(t)
	st := c.state.(*testState)
	id := initialize(t, c, initializeBody, 200, "")
	ctx := context.Background()
	if chk := c.CheckSession(ctx, "GET", headers("upstream-1")); chk.Action != session.AsIs {
		t.Errorf("the upstream's session: %+v", chk)
	}
	if chk := c.CheckSession(ctx, "GET", headers("")); chk.Action != session.AsIs {
		t.Errorf("no session: %+v", chk)
	}
	for m, want := range map[string]session.Action{"POST": session.Own, "PUT": session.Own, "GET": session.Stream} {
		if chk := c.CheckSession(ctx, m, headers(id)); chk.Action != want || chk.ID != id {
			t.Errorf("%s of a live gateway session: %+v, want action %v", m, chk, want)
		}
	}
	call(t, c, id, "cart.add_item")
	chk := c.CheckSession(ctx, "DELETE", headers(id))
	if chk.Action != session.Reply || chk.Status != 200 || chk.Body != nil {
		t.Fatalf("DELETE: %+v", chk)
	}
	if len(st.forgot) != 1 || !slices.Contains(st.forgot[0], session.RecordKey(id)) ||
		!slices.ContainsFunc(st.forgot[0], func(k string) bool { return strings.HasSuffix(k, "/session//"+id) && strings.Contains(k, "/checkout/") }) {
		t.Errorf("DELETE forgot %q; want the record and the workflow's session key", st.forgot)
	}
	if got := c.Stats.Get(stats.CountSessionsEnded); got != 1 {
		t.Errorf("sessions_ended = %d", got)
	}
}

// TestGatewaySession_upstream404KeepsIt: a gateway session never reached the upstream, so
// an upstream's 404 does not end it (an upstream's own session still ends).
func TestGatewaySession_upstream404KeepsIt(t *testing.T) {
	c := testCore(t)
	st := c.state.(*testState)
	id := initialize(t, c, initializeBody, 200, "")
	for _, s := range []string{id, "upstream-1"} {
		ex := c.Admit(context.Background(), headers(s), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		ex.Answer().Classify(context.Background(), 404, "application/json", "")
	}
	if len(st.forgot) != 1 || slices.Contains(st.forgot[0], session.RecordKey(id)) {
		t.Errorf("forgot %q; want only the upstream's session", st.forgot)
	}
}

// failingState fails every Load and Store.
type failingState struct{ testState }

func (*failingState) Load(context.Context, []string, bool) ([]Slot, error) {
	return nil, errors.New("store down")
}
func (*failingState) Store(context.Context, string, string, []byte, Slot, Lease) error {
	return errors.New("store down")
}

// TestGatewaySession_storeDown: the session_store fault fails open: no session is issued
// (the answer goes as the upstream gave it), and a presented one goes on as that session.
func TestGatewaySession_storeDown(t *testing.T) {
	c := testCore(t)
	c.state = &failingState{}
	if got := initialize(t, c, initializeBody, 200, ""); got != "" {
		t.Errorf("issued %q with the store down", got)
	}
	id := session.Prefix + strings.Repeat("B", 43)
	ex := c.Admit(context.Background(), headers(id), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if ex.Verdict != Forward || !ex.OwnSession() {
		t.Errorf("a request with the store down: verdict %v own %v", ex.Verdict, ex.OwnSession())
	}
	if got := c.Stats.Faults(abi.FaultSessionStore); got != 2 {
		t.Errorf("session_store faults = %d, want 2", got)
	}
}
