package kvstate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/kvstate"
)

// Map is a kvstate.KV in a map, as a one-process host keeps it.
type Map map[string][]byte

func (m Map) Get(keys []string) ([]kvstate.Value, error) {
	out := make([]kvstate.Value, len(keys))
	for i, k := range keys {
		v, ok := m[k]
		out[i] = kvstate.Value{B: v, Ok: ok}
	}
	return out, nil
}

func (m Map) CAS(_, key string, prev, next kvstate.Value) (bool, error) {
	cur, ok := m[key]
	if ok != prev.Ok || ok && string(cur) != string(prev.B) {
		return false, nil
	}
	if next.Ok {
		m[key] = next.B
	} else {
		delete(m, key)
	}
	return true, nil
}

func TestLock(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	m := Map{}
	s := &kvstate.State{KV: m, Now: func() time.Time { return now }}
	release, err := s.Lock(ctx, []string{"a", "b", "a"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 {
		t.Fatalf("leases %v, want one per distinct key", m)
	}
	if _, err := s.Lock(ctx, []string{"c", "b"}, time.Second); !errors.Is(err, exchange.ErrBusy) || !s.TakeBusy() {
		t.Fatalf("second holder: %v, want ErrBusy", err)
	}
	if _, ok := m[kvstate.LeasePrefix+"c"]; ok {
		t.Fatal("a refused lock kept part of its leases")
	}
	if s.TakeBusy() {
		t.Fatal("TakeBusy did not forget")
	}
	now = now.Add(2 * time.Second) // the first lease lapsed
	release2, err := s.Lock(ctx, []string{"b"}, time.Second)
	if err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	release() // the lapsed holder releases: it must not free the new holder's lease
	if _, ok := m[kvstate.LeasePrefix+"b"]; !ok {
		t.Fatal("a lapsed holder's release freed another holder's lease")
	}
	release2()
	if _, ok := m[kvstate.LeasePrefix+"b"]; ok {
		t.Fatal("release left the lease")
	}
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	s := &kvstate.State{KV: Map{}}
	if err := s.Store(ctx, "", "k", []byte("1"), exchange.Slot{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Store(ctx, "", "k", []byte("2"), exchange.Slot{}); !errors.Is(err, exchange.ErrConflict) {
		t.Fatalf("store over a value read as absent: %v, want ErrConflict", err)
	}
	sl, _ := s.Load(ctx, []string{"k", "x"})
	if string(sl[0].Value) != "1" || !sl[0].Exists || sl[1].Exists {
		t.Fatalf("load: %+v", sl)
	}
	if err := s.Forget(ctx, "s", []string{"k", "x"}); err != nil {
		t.Fatal(err)
	}
	if sl, _ := s.Load(ctx, []string{"k"}); sl[0].Exists {
		t.Fatal("forget left the key")
	}
}
