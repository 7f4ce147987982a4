package flow_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/oauth"
)

// TestOpen_pipe: with a public URL, the answer of a request the flow only forwarded for its
// challenges (a passed-through request) says Pipe once its head is read, with the challenge
// already rewritten; fed on anyway, it gives the chunks as they come, so the bytes are the
// same either way. Answers the flow reads whole or event by event never say it: an admitted
// call's, protected-resource metadata, a standing stream; nor does an answer that ends in
// its first chunk.
func TestOpen_pipe(t *testing.T) {
	const challenge = `Bearer resource_metadata="http://up:1/.well-known/oauth-protected-resource/mcp"`
	big := strings.Repeat(`{"uri":"file:///a","text":"0123456789"},`, 5000)
	post := func(body string) flow.Request {
		return flow.Request{Method: "POST", Path: "/mcp", Body: []byte(body), Headers: flow.Headers{{"Host", "127.0.0.1"},
			{"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}, {"Mcp-Session-Id", "s1"}}}
	}
	get := func(path string, h ...[2]string) flow.Request {
		return flow.Request{Method: "GET", Path: path, Headers: append(flow.Headers{{"Host", "127.0.0.1"}}, h...)}
	}
	for _, tc := range []struct {
		name     string
		req      flow.Request
		status   int
		ct, body string
		wantPipe bool
	}{
		{name: "resources/read passed through", req: post(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a"}}`),
			status: 200, ct: "application/json", body: big, wantPipe: true},
		{name: "notification answered 401", req: post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), status: 401, ct: "application/json", body: `{"error":"invalid_token"}`, wantPipe: true},
		{name: "DELETE", req: flow.Request{Method: "DELETE", Path: "/mcp", Headers: flow.Headers{{"Host", "127.0.0.1"}, {"Mcp-Session-Id", "s1"}}}, status: 200, ct: "text/plain", body: "session ended", wantPipe: true},
		{name: "GET stream that is not one", req: get("/mcp", [2]string{"Accept", "text/event-stream"}, [2]string{"Mcp-Session-Id", "s1"}), status: 405, ct: "text/plain", body: "no stream", wantPipe: true},
		{name: "GET standing stream", req: get("/mcp", [2]string{"Accept", "text/event-stream"}, [2]string{"Mcp-Session-Id", "s1"}), status: 200, ct: "text/event-stream",
			body: "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"},
		{name: "admitted tools/list", req: post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), status: 200, ct: "application/json", body: `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`},
		{name: "admitted call answered as text", req: post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tasks.update","arguments":{}}}`), status: 500, ct: "text/plain", body: "oops"},
		{name: "protected-resource metadata", req: get("/.well-known/oauth-protected-resource/mcp"), status: 200, ct: "application/json", body: `{"resource":"http://up:1/mcp"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, ignore := range []bool{false, true} {
				f, _ := oauthFlow(t, &oauth.Map{Public: "https://gw.example", EndpointPath: "/mcp"}, 1<<20)
				d := f.Request(context.Background(), tc.req)
				if d.Do != flow.DoForward || d.Open == nil {
					t.Fatalf("decision %q, open %v; want a forward the flow reads", d.Do, d.Open != nil)
				}
				up := flow.Headers{{"Content-Type", tc.ct}, {"WWW-Authenticate", challenge}}
				var got strings.Builder
				pipes, piped := 0, false
				n := max(len(tc.body)/10, 3)
				for i := 0; ; i += n {
					end := min(i+n, len(tc.body))
					out := d.Open.Answer(tc.status, up, []byte(tc.body[min(i, len(tc.body)):end]), end < len(tc.body))
					if out.Pipe {
						pipes++
						if out.End {
							t.Fatal("an output says both Pipe and End")
						}
						if i == 0 && (!out.Start || !strings.Contains(out.Headers.Get("WWW-Authenticate"), `"https://gw.example/.well-known/oauth-protected-resource/mcp"`)) {
							t.Errorf("the pipe output's head: %v %q; want it started, its challenge rewritten", out.Start, out.Headers)
						}
					}
					got.Write(out.Body)
					if out.End {
						break
					}
					if pipes > 0 && !ignore { // the host pipes the rest itself
						got.WriteString(tc.body[end:])
						piped = true
						break
					}
					if i > len(tc.body) {
						t.Fatal("the answer never ended")
					}
				}
				if tc.wantPipe != (pipes > 0) {
					t.Fatalf("Pipe said %d times; want it: %v", pipes, tc.wantPipe)
				}
				if tc.wantPipe && got.String() != tc.body {
					t.Errorf("ignore pipe %v (piped %v): the client got %d bytes, not the upstream's %d", ignore, piped, got.Len(), len(tc.body))
				}
			}
		})
	}
	t.Run("ends in its first chunk", func(t *testing.T) {
		f, _ := oauthFlow(t, &oauth.Map{Public: "https://gw.example", EndpointPath: "/mcp"}, 1<<20)
		d := f.Request(context.Background(), post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
		if out := d.Open.Answer(202, nil, nil, false); out.Pipe || !out.End || !out.Start || out.Status != 202 {
			t.Errorf("output %+v; want 202 ended, no pipe", out)
		}
	})
}

// TestOpen_passKeepsContentLength: an answer whose body passes unchanged starts with the
// upstream's Content-Length, so a client can tell a body the upstream broke off from a whole
// one (without it the host would send it chunked and end it cleanly): a passed-through
// request's answer, an admitted call's answer the core does not read, one over the body
// limit. A chunked answer (Transfer-Encoding overrides a Content-Length) stays without one,
// and so does a GET of a session's standing stream, whatever it is answered: the host
// writes the session's notifications into it.
func TestOpen_passKeepsContentLength(t *testing.T) {
	post := func(body string) flow.Request {
		return flow.Request{Method: "POST", Path: "/mcp", Body: []byte(body), Headers: flow.Headers{{"Host", "127.0.0.1"},
			{"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}, {"Mcp-Session-Id", "s1"}}}
	}
	read := post(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a"}}`)
	list := post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	big := `{"jsonrpc":"2.0","id":1,"result":{"tools":[],"x":"` + strings.Repeat("y", 300) + `"}}`
	for _, tc := range []struct {
		name   string
		req    flow.Request
		limit  int
		status int
		ct     string
		te     bool // the upstream's answer is chunked
		body   string
		want   bool
	}{
		{name: "passed through", req: read, status: 200, ct: "application/json", body: `{"jsonrpc":"2.0","id":3,"result":{"contents":[]}}`, want: true},
		{name: "standing stream", req: flow.Request{Method: "GET", Path: "/mcp", Headers: flow.Headers{{"Host", "127.0.0.1"},
			{"Accept", "text/event-stream"}, {"Mcp-Session-Id", "s1"}}}, status: 200, ct: "text/event-stream", body: "data: {}\n\n"},
		{name: "standing stream answered otherwise", req: flow.Request{Method: "GET", Path: "/mcp", Headers: flow.Headers{{"Host", "127.0.0.1"},
			{"Accept", "text/event-stream"}, {"Mcp-Session-Id", "s1"}}}, status: 200, ct: "application/json", body: "{}"},
		{name: "passed through, chunked", req: read, status: 200, ct: "application/json", te: true, body: `{"jsonrpc":"2.0","id":3,"result":{}}`},
		{name: "admitted, not read", req: post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tasks.update","arguments":{}}}`),
			status: 500, ct: "text/plain", body: "oops", want: true},
		{name: "admitted, over the body limit", req: list, limit: 256, status: 200, ct: "application/json", body: big, want: true},
		{name: "metadata over the body limit", req: flow.Request{Method: "GET", Path: "/.well-known/oauth-protected-resource/mcp", Headers: flow.Headers{{"Host", "127.0.0.1"}}},
			limit: 64, status: 200, ct: "application/json", body: `{"resource":"http://up:1/mcp","x":"` + strings.Repeat("y", 100) + `"}`, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.limit
			if limit == 0 {
				limit = 1 << 20
			}
			f, _ := oauthFlow(t, &oauth.Map{Public: "https://gw.example", EndpointPath: "/mcp"}, limit)
			d := f.Request(context.Background(), tc.req)
			if d.Open == nil {
				t.Fatal("the answer is not read")
			}
			up := flow.Headers{{"Content-Type", tc.ct}, {"Content-Length", itoa(len(tc.body))}}
			if tc.te {
				up = append(up, [2]string{"Transfer-Encoding", "chunked"})
			}
			out := feed(t, d.Open, tc.status, up, tc.body, 40)
			if string(out.Body) != tc.body {
				t.Fatalf("body %q; want the upstream's %q", out.Body, tc.body)
			}
			cl, want := out.Headers.Values("Content-Length"), []string(nil)
			if tc.want {
				want = []string{itoa(len(tc.body))}
			}
			if strings.Join(cl, ",") != strings.Join(want, ",") {
				t.Errorf("Content-Length %q; want %q", cl, want)
			}
		})
	}
}
