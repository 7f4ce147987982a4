package flow

import "testing"

// TestHeaders_With: With and endToEnd give what the chains of EndToEnd, Del and Set they
// replace give, in one copy.
func TestHeaders_With(t *testing.T) {
	hs := []Headers{
		nil,
		{{"Accept", "application/json"}, {"accept", "text/event-stream"}, {"Content-Length", "9"}, {"X-A", "1"}},
		{{"Connection", "x-a, Keep-Alive"}, {"X-A", "1"}, {"Accept-Encoding", "gzip"}, {"Mcp-Session-Id", "s"}, {"content-type", "text/plain"}},
		{{"Content-Type", "a"}, {"Content-Type", "b"}, {"Cache-Control", "x"}, {"X-B", "2"}},
	}
	eq := func(a, b Headers) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	for _, h := range hs {
		for _, accept := range []bool{false, true} {
			want := EndToEnd(h).Del("Accept-Encoding").Del("Mcp-Session-Id")
			got := endToEnd(h, []string{"Accept-Encoding", "Mcp-Session-Id"}, [2]string{"Content-Length", "12"})
			if accept {
				want = want.Set("Accept", "application/json, text/event-stream")
				got = endToEnd(h, []string{"Accept-Encoding", "Mcp-Session-Id"}, [2]string{"Accept", "application/json, text/event-stream"}, [2]string{"Content-Length", "12"})
			}
			if want = want.Set("Content-Length", "12"); !eq(got, want) {
				t.Errorf("endToEnd(%v) = %v, want %v", h, got, want)
			}
		}
		if got, want := h.With(nil, [2]string{"Content-Type", "c"}, [2]string{"Cache-Control", "no-cache"}), h.Set("Content-Type", "c").Set("Cache-Control", "no-cache"); !eq(got, want) {
			t.Errorf("With(%v) = %v, want %v", h, got, want)
		}
		if got, want := EndToEnd(h), EndToEnd(h).Del("Nothing"); !eq(got, want) {
			t.Errorf("EndToEnd(%v) = %v, want %v", h, got, want)
		}
	}
}
