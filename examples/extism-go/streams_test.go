package main

import (
	"encoding/json"
	"testing"
)

// A session's standing streams are forgotten with the last of them: a host that serves
// many short-lived sessions does not keep an entry for each.
func TestSubscribe_forgetsASessionWhoseStreamsLeft(t *testing.T) {
	h := &Host{}
	a, leaveA := h.subscribe("s1")
	b, leaveB := h.subscribe("s1")
	c, leaveC := h.subscribe("s2")
	to := func(s string) map[string][]byte {
		return map[string][]byte{"notify": []byte(`[{"To":"` + s + `","Event":"e-` + s + `"}]`)}
	}
	h.notify(raw(to("s1")))
	if got := string(<-a) + "," + string(<-b); got != "e-s1,e-s1" {
		t.Fatalf("s1's streams got %q", got)
	}
	select {
	case ev := <-c:
		t.Fatalf("s2's stream got s1's event %q", ev)
	default:
	}
	leaveA()
	if n := len(h.streams); n != 2 {
		t.Fatalf("%d sessions after one of s1's two streams left, want 2", n)
	}
	leaveB()
	leaveC()
	if n := len(h.streams); n != 0 {
		t.Fatalf("%d sessions kept after every stream left, want 0", n)
	}
	h.notify(raw(to("s1"))) // no stream: nothing to write, nothing kept
	if n := len(h.streams); n != 0 {
		t.Fatalf("a notification for a session without streams left %d entries", n)
	}
}

func raw(m map[string][]byte) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
