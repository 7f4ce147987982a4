package tasks

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func TestRecord(t *testing.T) {
	r := Record{Tool: `a"b`, Input: `{"x":1}`, Moves: true, Done: true}
	got, ok := ParseRecord(r.Encode())
	if !ok || got != r {
		t.Fatalf("ParseRecord(%s) = %+v, %v; want %+v", r.Encode(), got, ok, r)
	}
	for _, bad := range []string{``, `[]`, `{"tool":1,"input":{}}`, `{"tool":"t","input":"x"}`, `{"tool":"t"`} {
		if _, ok := ParseRecord([]byte(bad)); ok {
			t.Errorf("ParseRecord(%s) read a record", bad)
		}
	}
}

func TestKeys(t *testing.T) {
	k, s := Key("alice", "T"), SessionKey("s1", "alice", "T")
	if !strings.HasPrefix(k, KeyPrefix) || !strings.HasPrefix(s, KeyPrefix) || k == s || k == Key("bob", "T") || strings.Contains(k, "alice") {
		t.Fatalf("keys %q and %q", k, s)
	}
}

func TestID_and_Terminal(t *testing.T) {
	for result, want := range map[string]string{
		`{"task":{"taskId":"a"}}`:            "a",
		`{"resultType":"task","taskId":"b"}`: "b",
		`{"taskId":"c"}`:                     "",
		`{"task":"d"}`:                       "",
	} {
		if got := ID(gjson.Parse(result)); got != want {
			t.Errorf("ID(%s) = %q, want %q", result, got, want)
		}
	}
	for status, want := range map[string][2]bool{"completed": {true, true}, "failed": {true, false}, "working": {false, false}} {
		if ended, completed := Terminal(status); ended != want[0] || completed != want[1] {
			t.Errorf("Terminal(%q) = %v, %v", status, ended, completed)
		}
	}
}

type lease struct{ released atomic.Int32 }

func (l *lease) Release() { l.released.Add(1) }

func TestLeases(t *testing.T) {
	var ls Leases
	held, lapsed := &lease{}, make(chan struct{})
	ls.Hold("k", held, time.Hour, func() { t.Error("a lease taken in time lapsed") })
	if got := ls.Take("k"); got != held || held.released.Load() != 0 {
		t.Fatalf("Take = %v, released %d", got, held.released.Load())
	}
	if ls.Take("k") != nil {
		t.Fatal("a lease taken twice")
	}
	short := &lease{}
	ls.Hold("s", short, time.Millisecond, func() { close(lapsed) })
	select {
	case <-lapsed:
	case <-time.After(5 * time.Second):
		t.Fatal("the lease did not lapse")
	}
	if short.released.Load() != 1 || ls.Take("s") != nil {
		t.Fatalf("a lapsed lease: released %d times, or still held", short.released.Load())
	}
}
