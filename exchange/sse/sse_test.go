package sse_test

import (
	"strings"
	"testing"

	"github.com/stategate/stategate/exchange/sse"
)

func TestNext(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		eos    bool
		events []string
		rest   string
	}{
		{name: "lf", in: "data: a\n\ndata: b\n\n", events: []string{"data: a\n\n", "data: b\n\n"}},
		{name: "crlf", in: "data: a\r\n\r\nid: 1\r\ndata: b\r\n\r\n", events: []string{"data: a\r\n\r\n", "id: 1\r\ndata: b\r\n\r\n"}},
		{name: "cr", in: "data: a\r\rdata: b\r\r", eos: true, events: []string{"data: a\r\r", "data: b\r\r"}},
		{name: "incomplete_event_is_held", in: "data: a\n\ndata: b\n", events: []string{"data: a\n\n"}, rest: "data: b\n"},
		{name: "last_event_without_blank_line_at_eos", in: "data: a\n\ndata: b\n", eos: true, events: []string{"data: a\n\n", "data: b\n"}},
		{name: "trailing_cr_waits_for_its_lf", in: "data: a\r\n\r", events: nil, rest: "data: a\r\n\r"},
		{name: "comment_event", in: ": keepalive\n\n", events: []string{": keepalive\n\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			buf := []byte(tc.in)
			var got []string
			for {
				ev, rest, ok := sse.Next(buf, tc.eos)
				if !ok {
					break
				}
				got = append(got, string(ev))
				buf = rest
			}
			if strings.Join(got, "|") != strings.Join(tc.events, "|") || string(buf) != tc.rest {
				t.Errorf("events %q rest %q; want %q rest %q", got, buf, tc.events, tc.rest)
			}
		})
	}
}

func TestRewrite(t *testing.T) {
	got := string(sse.Rewrite(nil, []byte("event: message\r\nid: 4\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n"), []byte("{\"b\":\n2}")))
	if want := "event: message\nid: 4\ndata: {\"b\":\ndata: 2}\n\n"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

// TestAppend_loneCRIsALineBreak: a lone CR in a message (JSON whitespace, as an upstream may
// send it in a JSON answer the gateway then sends as an event) ends a data line, as it does
// for every SSE reader; left inside a line it would cut the message for the client.
func TestAppend_loneCRIsALineBreak(t *testing.T) {
	got := string(sse.Append(nil, []byte("{\"a\"\r:1,\r\n\"b\":2}")))
	if want := "event: message\ndata: {\"a\"\ndata: :1,\ndata: \"b\":2}\n\n"; got != want {
		t.Fatalf("got %q; want %q", got, want)
	}
	ev, _, _ := sse.Next([]byte(got), true)
	if data, _ := sse.Data(ev); string(data) != "{\"a\"\n:1,\n\"b\":2}" {
		t.Fatalf("read back as %q", data)
	}
}
