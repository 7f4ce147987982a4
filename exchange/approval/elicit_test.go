package approval

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// kv is a store for the tests: Get and Create (compare-and-set against absent).
type kv struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *kv) get(_ context.Context, k string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	return v, ok, nil
}

func (s *kv) create(_ context.Context, k string, v []byte) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[k]; ok {
		return false, nil
	}
	s.m[k] = v
	return true, nil
}

func newKV() *kv { return &kv{m: map[string][]byte{}} }

func (s *kv) gate() *Gate {
	return &Gate{Get: s.get, Create: s.create, Random: func(b []byte) error { _, err := rand.Read(b); return err }}
}

func TestFormCapable(t *testing.T) {
	for in, want := range map[string]bool{
		`{}`: true, `{"form":{}}`: true, `{"form":{"applyDefaults":true},"url":{}}`: true, `{"x":1}`: true,
		`{"url":{}}`: false, `{"form":true}`: false, `null`: false, `[]`: false, `"form"`: false, ``: false,
	} {
		if got := FormCapable(gjson.Parse(in)); got != want {
			t.Errorf("FormCapable(%s) = %v, want %v", in, got, want)
		}
	}
}

func TestReadResult(t *testing.T) {
	for in, want := range map[string]Answer{
		`{"action":"accept","content":{"approve":true}}`:                    Accept,
		`{"action":"accept","content":{"approve":false}}`:                   Decline,
		`{"action":"accept","content":{"approve":"true"}}`:                  Decline,
		`{"action":"accept"}`:                                               Decline,
		`{"action":"decline"}`:                                              Decline,
		`{"action":"cancel"}`:                                               Cancel,
		`{"action":"accept","content":{"approve":true,"approve":false}}`:    Invalid,
		`{"action":"accept","action":"decline","content":{"approve":true}}`: Invalid,
		`{"action":"maybe"}`:                                                Invalid, `[]`: Invalid, `{`: Invalid,
	} {
		if got := ReadResult([]byte(in)); got != want {
			t.Errorf("ReadResult(%s) = %v, want %v", in, got, want)
		}
	}
}

// TestHoldAndAnswered: a 2025-11-25 call whose client declared elicitation is held with a
// request of the gateway's own id; the answer verifies only from the same principal and
// scope, before the state expires, and not once its id is tampered with; without the
// capability, or with a task, the call is refused.
func TestHoldAndAnswered(t *testing.T) {
	s := newKV()
	g := s.gate()
	ctx := context.Background()
	now := time.Now()
	asker := &Elicit{Get: s.get, Create: s.create, gate: g}
	call := func() *Call {
		return &Call{Tool: "notes.delete", Args: []byte(`{"id":"n1"}`), Principal: "alice", Scope: "s1", Asker: asker,
			Session: "sess", CallTimeout: 30 * time.Second, Now: now}
	}
	need := Need{By: "user", Message: "Delete?", TimeoutMs: 5000}
	if out := g.Decide(ctx, need, call()); out.Verdict != Refuse || !strings.Contains(string(out.Result), "did not declare the elicitation capability") {
		t.Fatalf("no capability: %v %s", out.Verdict, out.Result)
	}
	s.create(ctx, CapabilityKey("sess"), []byte("form"))
	out := g.Decide(ctx, need, call())
	if out.Verdict != AskStream || !strings.HasPrefix(out.ID, IDPrefix) || out.Wait != 5*time.Second {
		t.Fatalf("held: %v %q %v", out.Verdict, out.ID, out.Wait)
	}
	m := gjson.ParseBytes(out.Result)
	if m.Get("method").Str != "elicitation/create" || m.Get("id").Str != out.ID || !strings.Contains(m.Get("params.message").Str, "Tool: notes.delete") {
		t.Fatalf("the request: %s", out.Result)
	}
	c := call()
	c.CallTimeout = 2 * time.Second
	if o := g.Decide(ctx, need, c); o.Wait != 2*time.Second {
		t.Errorf("the wait is bounded by the call's timeout: %v", o.Wait)
	}
	if err := g.Answered(ctx, out.ID, "alice", "s1", now); err != nil {
		t.Errorf("the caller's answer: %v", err)
	}
	for name, err := range map[string]error{
		"another principal": g.Answered(ctx, out.ID, "bob", "s1", now),
		"another scope":     g.Answered(ctx, out.ID, "alice", "s2", now),
		"expired":           g.Answered(ctx, out.ID, "alice", "s1", now.Add(time.Hour)),
		"tampered":          g.Answered(ctx, out.ID[:len(out.ID)-3]+"AAA", "alice", "s1", now),
		"no prefix":         g.Answered(ctx, strings.TrimPrefix(out.ID, IDPrefix), "alice", "s1", now),
		"another gateway":   newKV().gate().Answered(ctx, out.ID, "alice", "s1", now),
	} {
		if err == nil {
			t.Errorf("%s: verified", name)
		}
	}

	// The second admission with the answer.
	held := func(a Answer, timedOut bool) *Call {
		c := call()
		c.Held = &Held{ID: out.ID, Answer: a, TimedOut: timedOut, Wait: 5 * time.Second}
		return c
	}
	for _, tc := range []struct {
		c    *Call
		code string
	}{
		{held(Decline, false), "APPROVAL_DECLINED"},
		{held(Cancel, false), "APPROVAL_CANCELLED"},
		{held(Invalid, true), "APPROVAL_CANCELLED"},
		{held(Invalid, false), "APPROVAL_INVALID"},
	} {
		if o := g.Decide(ctx, need, tc.c); o.Verdict != Refuse || o.Code != tc.code {
			t.Errorf("%+v: %v %s", tc.c.Held, o.Verdict, o.Code)
		}
	}
	moved := held(Accept, false)
	moved.Workflow = "moved"
	if o := g.Decide(ctx, need, moved); o.Code != "APPROVAL_INVALID" || !strings.Contains(string(o.Result), "workflow") {
		t.Errorf("a yes for another workflow state: %s", o.Result)
	}
	if o := g.Decide(ctx, need, held(Accept, false)); o.Verdict != Pass {
		t.Fatalf("accepted: %v %s", o.Verdict, o.Result)
	}
	if o := g.Decide(ctx, need, held(Accept, false)); o.Code != "APPROVAL_INVALID" || !strings.Contains(string(o.Result), "used already") {
		t.Errorf("the yes used twice: %s", o.Result)
	}
	if o := g.Decide(ctx, need, &Call{Tool: "notes.delete", Now: now}); o.Code != "APPROVAL_REQUIRED" || !strings.Contains(string(o.Result), "input_required") {
		t.Errorf("a host that cannot hold: %s", o.Result)
	}
	jsonOnly := call()
	jsonOnly.JSONOnly = true
	if o := g.Decide(ctx, need, jsonOnly); o.Code != "APPROVAL_REQUIRED" || !strings.Contains(string(o.Result), "only application/json") {
		t.Errorf("a JSON-only request: %s", o.Result)
	}
	task := call()
	task.Task = true
	if o := g.Decide(ctx, need, task); o.Code != "APPROVAL_REQUIRED" {
		t.Errorf("a task: %v %s", o.Verdict, o.Result)
	}
}

// TestElicit_deliverAwait: an answer reaches the waiting call on the same Elicit at once
// and through the store from another; it is delivered once; the wait ends at its
// deadline, or when its context ends.
func TestElicit_deliverAwait(t *testing.T) {
	s := newKV()
	a := &Elicit{Get: s.get, Create: s.create, Poll: 10 * time.Millisecond}
	b := &Elicit{Get: s.get, Create: s.create, Poll: 10 * time.Millisecond}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		from *Elicit
		id   string
		give Answer
		want Answer
	}{
		{"same replica", a, IDPrefix + "1", Accept, Accept},
		{"other replica", b, IDPrefix + "2", Decline, Decline},
		{"unreadable is a cancel", b, IDPrefix + "3", Invalid, Cancel},
	} {
		done := make(chan Answer, 1)
		go func() {
			got, err := a.Await(ctx, tc.id, time.Now().Add(5*time.Second))
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			done <- got
		}()
		time.Sleep(20 * time.Millisecond)
		if err := tc.from.Deliver(ctx, tc.id, tc.give); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := <-done; got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		if err := a.Deliver(ctx, tc.id, Accept); !errors.Is(err, ErrAnswered) {
			t.Errorf("%s: a second answer: %v", tc.name, err)
		}
	}
	start := time.Now()
	if _, err := a.Await(ctx, IDPrefix+"none", time.Now().Add(50*time.Millisecond)); !errors.Is(err, ErrNoAnswer) || time.Since(start) < 50*time.Millisecond {
		t.Errorf("past the deadline: %v after %v", err, time.Since(start))
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := a.Await(cctx, IDPrefix+"gone", time.Now().Add(time.Second)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the client left: %v", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.waiting) != 0 {
		t.Errorf("%d waits left registered", len(a.waiting))
	}
}
