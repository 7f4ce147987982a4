package approval

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/state"
)

// mapState is the state contract's floor over a map: reads, compare-and-set writes.
type mapState struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *mapState) Capabilities() state.Capabilities { return state.Capabilities{} }

func (s *mapState) Load(_ context.Context, keys []string, _ bool) ([]state.Slot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]state.Slot, len(keys))
	for i, k := range keys {
		v, ok := s.m[k]
		out[i] = state.Slot{Value: bytes.Clone(v), Exists: ok}
	}
	return out, nil
}

func (s *mapState) Store(_ context.Context, _, key string, value []byte, prev state.Slot, _ state.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.m[key]
	if ok != prev.Exists || !bytes.Equal(cur, prev.Value) {
		return state.ErrConflict
	}
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[key] = bytes.Clone(value)
	return nil
}

func (s *mapState) Lock(context.Context, []string, time.Duration, bool) (state.Lease, []state.Slot, error) {
	return state.LeaseFunc(func() {}), nil, nil
}

func (s *mapState) Forget(context.Context, string, []string) error { return nil }

// twoReplicas are two Holds on one store, with a clock the test moves.
func twoReplicas() (a, b *Hold, clock *time.Time) {
	st := &mapState{}
	now := time.UnixMilli(1_800_000_000_000)
	clock = &now
	mk := func() *Hold {
		h := NewHold(st, rand.Read)
		h.Now = func() time.Time { return *clock }
		h.Poll = time.Millisecond
		return h
	}
	return mk(), mk(), clock
}

// TestHold_decidedOnAnotherReplica: a call held on one replica is listed and approved on
// the other; the waiting replica gets the decision; a second decision is refused with
// the first; the index no longer lists it.
func TestHold_decidedOnAnotherReplica(t *testing.T) {
	a, b, clock := twoReplicas()
	ctx := context.Background()
	p := Preview("files.delete", "alice", "d1", []byte(`{"path":"/etc/passwd"}`), "Delete?", clock.UnixMilli()+60_000)
	if err := a.Open(ctx, &p); err != nil {
		t.Fatal(err)
	}
	if !ValidID(p.ID) {
		t.Fatalf("id %q", p.ID)
	}
	list, err := b.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != p.ID || list[0].Arguments != `{"path":"/etc/passwd"}` || list[0].Tool != "files.delete" {
		t.Fatalf("List on b = %+v, %v", list, err)
	}
	got := make(chan Decision, 1)
	go func() {
		d, err := a.Await(ctx, p.ID)
		if err != nil {
			t.Error(err)
		}
		got <- d
	}()
	if _, err := b.Decide(ctx, p.ID, Decision{Verdict: VerdictApproved, By: "admin", Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-got:
		if d.Verdict != VerdictApproved || d.By != "admin" || d.Via != "cli" {
			t.Fatalf("Await = %+v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Await never returned")
	}
	q, err := a.Decide(ctx, p.ID, Decision{Verdict: VerdictDenied, By: "admin", Via: "status page"})
	if !errors.Is(err, ErrDecided) || q.Decision == nil || q.Decision.Verdict != VerdictApproved {
		t.Fatalf("second decision: %+v, %v", q.Decision, err)
	}
	if list, _ := b.List(ctx); len(list) != 0 {
		t.Fatalf("decided, still listed: %+v", list)
	}
}

// TestHold_expiry: at the deadline Await writes expired, and a late approve gets
// ErrDecided with it; an approve on a record whose holder left after its deadline writes
// expired itself (ErrHoldExpired).
func TestHold_expiry(t *testing.T) {
	a, b, clock := twoReplicas()
	ctx := context.Background()
	p := Preview("t", "", "", nil, "", clock.UnixMilli()+1000)
	if err := a.Open(ctx, &p); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(2 * time.Second)
	d, err := a.Await(ctx, p.ID)
	if err != nil || d.Verdict != VerdictExpired {
		t.Fatalf("Await after the deadline = %+v, %v", d, err)
	}
	if q, err := b.Decide(ctx, p.ID, Decision{Verdict: VerdictApproved, By: "admin", Via: "api"}); !errors.Is(err, ErrDecided) || q.Decision.Verdict != VerdictExpired {
		t.Fatalf("late approve: %+v, %v", q.Decision, err)
	}

	p2 := Preview("t", "", "", nil, "", clock.UnixMilli()+1000)
	if err := a.Open(ctx, &p2); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(2 * time.Second)
	if list, _ := b.List(ctx); len(list) != 0 {
		t.Fatalf("expired, still listed: %+v", list)
	}
	if q, err := b.Decide(ctx, p2.ID, Decision{Verdict: VerdictApproved, By: "admin", Via: "api"}); !errors.Is(err, ErrHoldExpired) || q.Decision.Verdict != VerdictExpired {
		t.Fatalf("approve after the deadline: %+v, %v", q.Decision, err)
	}
	if d, err := a.Await(ctx, p2.ID); err != nil || d.Verdict != VerdictExpired {
		t.Fatalf("Await = %+v, %v", d, err)
	}
}

// TestHold_awaitEndsWithCtx: a caller that leaves ends the wait; it then closes the record.
func TestHold_awaitEndsWithCtx(t *testing.T) {
	a, _, clock := twoReplicas()
	p := Preview("t", "", "", nil, "", clock.UnixMilli()+60_000)
	if err := a.Open(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := a.Await(ctx, p.ID); !errors.Is(err, context.Canceled) {
		t.Fatalf("Await = %v", err)
	}
	if q, err := a.Decide(context.Background(), p.ID, Decision{Verdict: VerdictClosed, By: "client", Via: "disconnect"}); err != nil || q.Decision.Verdict != VerdictClosed {
		t.Fatalf("close: %+v, %v", q.Decision, err)
	}
}

// TestHold_boundsAndIDs: the index holds at most MaxPending; ids other than 24 hex
// digits name nothing (never a key of another kind); unknown ids are ErrUnknown.
func TestHold_boundsAndIDs(t *testing.T) {
	a, _, clock := twoReplicas()
	ctx := context.Background()
	for i := 0; i < MaxPending; i++ {
		p := Preview("t", "", "", nil, "", clock.UnixMilli()+60_000)
		if err := a.Open(ctx, &p); err != nil {
			t.Fatal(i, err)
		}
	}
	p := Preview("t", "", "", nil, "", clock.UnixMilli()+60_000)
	if err := a.Open(ctx, &p); !errors.Is(err, ErrFull) {
		t.Fatalf("Open beyond the bound: %v", err)
	}
	for _, id := range []string{"", "../key", "0123456789ABCDEF01234567", strings.Repeat("0", 25)} {
		if _, err := a.Decide(ctx, id, Decision{Verdict: VerdictApproved}); !errors.Is(err, ErrBadID) {
			t.Errorf("Decide(%q) = %v", id, err)
		}
	}
	if _, err := a.Decide(ctx, strings.Repeat("0", 24), Decision{Verdict: VerdictApproved}); !errors.Is(err, ErrUnknown) {
		t.Errorf("Decide(unknown) = %v", err)
	}
}

// TestPreview_escapes: a hostile tool name, principal and arguments are shown escaped
// and cut, never with a raw control, bidi or invisible character.
func TestPreview_escapes(t *testing.T) {
	p := Preview("rm\x1b[2J\u202e", "eve\u200b", "", []byte(`{"a":"\u0007`+strings.Repeat("x", 5000)+`"}`), "Ok?\x07", 0)
	for _, s := range []string{p.ToolShown, p.Principal, p.Arguments, p.Message} {
		for _, r := range s {
			if r < 0x20 || r == 0x7f || r == 0x202e || r == 0x200b {
				t.Fatalf("raw %U in %q", r, s)
			}
		}
	}
	if p.Tool != "rm\x1b[2J\u202e" || !strings.Contains(p.ToolShown, `\x1b`) || len(p.Arguments) > MaxArgsShown+40 || !strings.Contains(p.Arguments, "more bytes") {
		t.Fatalf("preview %+v", p)
	}
}
