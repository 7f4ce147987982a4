package flow_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/exchange/oauth"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/plugin/engine"
)

// faults records the core's faults by name.
type faults []string

func (f *faults) Fault(x abi.Fault, _ abi.Policy, _ error, _ ...any) { *f = append(*f, x.String()) }
func (f *faults) Count(stats.Counter)                                {}

// oauthFlow is the flow as the exchange module builds it with its upstream option, OAuth
// discovery left to it (m nil: the module without it).
func oauthFlow(t testing.TB, m *oauth.Map, maxBody int) (*flow.Flow, *faults) {
	t.Helper()
	cfg := exchangetest.Config("sample.json")
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep := &faults{}
	st := &kvstate.State{KV: kv{}}
	core := exchange.New(exchange.Options{Plugin: engineCalls{e}, State: st, Config: cfg, Reporter: rep, MaxBodyBytes: maxBody,
		NewCache: func(l cache.Limits) cache.Cache { return cache.NewMemory(l, nil) }})
	return flow.New(flow.Options{Core: core, Busy: st.TakeBusy, MaxBodyBytes: maxBody, OAuth: m,
		Origins: admission.OriginPolicy{Loopback: true}}), rep
}

// feed gives the upstream's answer to o in chunks of n bytes and answers the client's.
func feed(t *testing.T, o *flow.Open, status int, h flow.Headers, body string, n int) (got flow.Output) {
	t.Helper()
	var out strings.Builder
	for i := 0; ; i += n {
		end := min(i+n, len(body))
		step := o.Answer(status, h, []byte(body[min(i, len(body)):end]), end < len(body))
		if step.Start {
			got.Start, got.Status, got.Headers = true, step.Status, step.Headers
		}
		out.Write(step.Body)
		if step.End {
			break
		}
		if i > len(body) {
			t.Fatal("the answer never ended")
		}
	}
	got.Body = []byte(out.String())
	return got
}

// TestDiscovery_routes: a GET, HEAD or OPTIONS of a well-known document is forwarded to
// the upstream's document at its origin (the path-suffixed form mapped onto the upstream's
// endpoint), without MCP processing; only protected-resource metadata of a GET is read, and
// it goes uncompressed. Other paths and methods are the MCP endpoint's, as before.
func TestDiscovery_routes(t *testing.T) {
	pr := "/.well-known/oauth-protected-resource"
	for _, tc := range []struct {
		name, method, path, endpoint string
		public                       string
		noOAuth                      bool
		wantPath                     string // "" : not a discovery decision
		wantRead                     bool
	}{
		{name: "suffix mapped to the endpoint", method: "GET", path: pr + "/gw", endpoint: "/mcp", public: "https://gw.example", wantPath: pr + "/mcp", wantRead: true},
		{name: "suffix kept without an endpoint path", method: "GET", path: pr + "/gw", public: "https://gw.example", wantPath: pr + "/gw", wantRead: true},
		{name: "root form with its query", method: "GET", path: pr + "?a=1", endpoint: "/mcp", public: "https://gw.example", wantPath: pr + "?a=1", wantRead: true},
		{name: "root form with a slash", method: "GET", path: pr + "/", endpoint: "/mcp", public: "https://gw.example", wantPath: pr, wantRead: true},
		{name: "lower-case method", method: "get", path: pr + "/mcp", endpoint: "/mcp", public: "https://gw.example", wantPath: pr + "/mcp", wantRead: true},
		{name: "head is not read", method: "HEAD", path: pr + "/mcp", endpoint: "/mcp", public: "https://gw.example", wantPath: pr + "/mcp"},
		{name: "options is not read", method: "OPTIONS", path: pr, public: "https://gw.example", wantPath: pr},
		{name: "authorization server", method: "GET", path: "/.well-known/oauth-authorization-server", endpoint: "/mcp", public: "https://gw.example", wantPath: "/.well-known/oauth-authorization-server"},
		{name: "openid configuration", method: "GET", path: "/.well-known/openid-configuration/x", endpoint: "/mcp", wantPath: "/.well-known/openid-configuration/mcp"},
		{name: "routed, not read, without a public url", method: "GET", path: pr + "/mcp", endpoint: "/mcp", wantPath: pr + "/mcp"},
		{name: "post is the endpoint's", method: "POST", path: pr, endpoint: "/mcp", public: "https://gw.example"},
		{name: "a longer name is not the document", method: "GET", path: pr + "x", endpoint: "/mcp", public: "https://gw.example"},
		{name: "no oauth option: the host routes", method: "GET", path: pr, noOAuth: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &oauth.Map{Public: tc.public, EndpointPath: tc.endpoint}
			if tc.noOAuth {
				m = nil
			}
			f, _ := oauthFlow(t, m, 1<<16)
			h := flow.Headers{{"Host", "127.0.0.1"}, {"Accept-Encoding", "gzip"}, {"Connection", "close"}}
			d := f.Request(context.Background(), flow.Request{Method: tc.method, Path: tc.path, Headers: h})
			if tc.wantPath == "" {
				if d.Origin {
					t.Fatalf("routed to the upstream's origin at %q; want the MCP endpoint's handling", d.Path)
				}
				return
			}
			if d.Do != flow.DoForward || !d.Origin || d.Path != tc.wantPath || d.Method != tc.method {
				t.Fatalf("decision %q %s %q origin %v; want forward %s %q at the origin", d.Do, d.Method, d.Path, d.Origin, tc.method, tc.wantPath)
			}
			if (d.Open != nil) != tc.wantRead {
				t.Fatalf("answer read: %v; want %v", d.Open != nil, tc.wantRead)
			}
			if d.Headers.Has("Connection") || tc.wantRead == d.Headers.Has("Accept-Encoding") {
				t.Fatalf("headers %v: want end-to-end only, Accept-Encoding dropped exactly when the answer is read", d.Headers)
			}
		})
	}
}

// TestDiscovery_metadata: protected-resource metadata comes back with its resource at the
// public URL and the client's path, every other byte kept; a document the flow cannot read,
// one over the body limit, or an answer other than 200 passes unchanged (fail open, as the
// gateway), the first two reported.
func TestDiscovery_metadata(t *testing.T) {
	const doc = `{"resource":"http://up.internal:3001/mcp","authorization_servers":["https://as.example"],"x":[1,2]}`
	for _, tc := range []struct {
		name, body, want, fault string
		status, limit           int
	}{
		{name: "rewritten", status: 200, body: doc,
			want: `{"resource":"https://gw.example/gw","authorization_servers":["https://as.example"],"x":[1,2]}`},
		{name: "malformed passes", status: 200, body: `{"resource":`, want: `{"resource":`, fault: "upstream_body"},
		{name: "resource twice passes", status: 200, body: `{"resource":"http://a/mcp","resource":"http://b/mcp"}`,
			want: `{"resource":"http://a/mcp","resource":"http://b/mcp"}`, fault: "upstream_body"},
		{name: "not an object passes", status: 200, body: `["resource"]`, want: `["resource"]`, fault: "upstream_body"},
		{name: "over the limit passes", status: 200, limit: 64, body: doc + strings.Repeat(" ", 100), want: doc + strings.Repeat(" ", 100), fault: "response_too_large"},
		{name: "an error answer passes", status: 404, body: doc, want: doc},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.limit
			if limit == 0 {
				limit = 1 << 16
			}
			f, rep := oauthFlow(t, &oauth.Map{Public: "https://gw.example", EndpointPath: "/mcp"}, limit)
			d := f.Request(context.Background(), flow.Request{Method: "GET", Path: "/.well-known/oauth-protected-resource/gw",
				Headers: flow.Headers{{"Host", "127.0.0.1"}}})
			if d.Open == nil {
				t.Fatal("the metadata is not read")
			}
			out := feed(t, d.Open, tc.status, flow.Headers{{"Content-Type", "application/json"}, {"Content-Length", itoa(len(tc.body))}, {"X-Up", "1"}}, tc.body, 5)
			if !out.Start || out.Status != tc.status || string(out.Body) != tc.want {
				t.Fatalf("answer %d %s; want %d %s", out.Status, out.Body, tc.status, tc.want)
			}
			if out.Headers.Get("X-Up") != "1" || out.Headers.Get("Content-Type") != "application/json" {
				t.Fatalf("headers %v: the upstream's are kept", out.Headers)
			}
			if cl := out.Headers.Get("Content-Length"); cl != itoa(len(tc.want)) {
				t.Fatalf("Content-Length %s for %d bytes", cl, len(tc.want))
			}
			if got := strings.Join(*rep, ","); got != tc.fault {
				t.Fatalf("faults %q; want %q", got, tc.fault)
			}
		})
	}
}

func itoa(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		if n /= 10; n == 0 {
			return string(b)
		}
	}
}

// TestChallenges: with a public URL, every answer's WWW-Authenticate challenges name the
// metadata at the gateway for the path the client used: on an exchange the core reads
// (tools/list), on a request passed through (a notification, a GET), each field on its own;
// one that cannot be read passes unchanged (reported). Without one, a passed-through
// request is not read at all, as before.
func TestChallenges(t *testing.T) {
	const up = `Bearer error="invalid_token", resource_metadata="http://up.internal:3001/.well-known/oauth-protected-resource/mcp"`
	const want = `Bearer error="invalid_token", resource_metadata="https://gw.example/.well-known/oauth-protected-resource/gw"`
	post := flow.Headers{{"Host", "127.0.0.1"}, {"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}}
	for _, tc := range []struct {
		name, method, body string
		challenges         []string
		want               []string
		fault              string
	}{
		{name: "an exchange the core reads", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			challenges: []string{up}, want: []string{want}},
		{name: "a notification passed through", method: "POST", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			challenges: []string{up, `Basic realm="x"`}, want: []string{want, `Basic realm="x"`}},
		{name: "a get passed through", method: "GET", challenges: []string{up}, want: []string{want}},
		{name: "unreadable passes", method: "GET", challenges: []string{`Bearer resource_metadata="unterminated`}, want: []string{`Bearer resource_metadata="unterminated`}, fault: "upstream_body"},
		{name: "not an absolute url passes", method: "GET", challenges: []string{`Bearer resource_metadata="/relative"`}, want: []string{`Bearer resource_metadata="/relative"`}, fault: "upstream_body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, rep := oauthFlow(t, &oauth.Map{Public: "https://gw.example", EndpointPath: "/mcp"}, 1<<16)
			d := f.Request(context.Background(), flow.Request{Method: tc.method, Path: "/gw?x=1", Headers: post, Body: []byte(tc.body)})
			if d.Do != flow.DoForward || d.Open == nil || d.Origin {
				t.Fatalf("decision %q, read %v, origin %v; want a forward to the endpoint whose answer is read", d.Do, d.Open != nil, d.Origin)
			}
			h := flow.Headers{{"Content-Type", "application/json"}}
			for _, c := range tc.challenges {
				h = append(h, [2]string{"WWW-Authenticate", c})
			}
			const body = `{"error":"invalid_token"}`
			out := feed(t, d.Open, 401, h, body, 4)
			if out.Status != 401 || string(out.Body) != body {
				t.Fatalf("answer %d %s; want the upstream's 401 %s", out.Status, out.Body, body)
			}
			if got := out.Headers.Values("WWW-Authenticate"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("challenges\n%q\nwant\n%q", got, tc.want)
			}
			if got := strings.Join(*rep, ","); got != tc.fault {
				t.Fatalf("faults %q; want %q", got, tc.fault)
			}
		})
	}
	t.Run("no public url: passed through unread", func(t *testing.T) {
		f, _ := oauthFlow(t, &oauth.Map{EndpointPath: "/mcp"}, 1<<16)
		d := f.Request(context.Background(), flow.Request{Method: "GET", Path: "/mcp", Headers: post})
		if d.Do != flow.DoForward || d.Open != nil {
			t.Fatalf("decision %q, read %v; want a forward passed through unread", d.Do, d.Open != nil)
		}
	})
}

// TestDiscovery_refusesPathsThatResolveElsewhere: a document's path that a server or a
// host's URL parser could resolve to another path at the upstream's origin (dot segments
// raw or encoded in any case, empty segments, backslashes, encoded slashes or backslashes)
// is answered 404, as the gateway answers it, and nothing is forwarded: with the endpoint's
// path unknown ("" keeps the client's suffix) it would have gone out as it came.
func TestDiscovery_refusesPathsThatResolveElsewhere(t *testing.T) {
	for _, endpoint := range []string{"", "/mcp"} {
		f, _ := oauthFlow(t, &oauth.Map{Public: "https://gw.example", EndpointPath: endpoint}, 1<<16)
		for _, p := range []string{
			"/.well-known/oauth-protected-resource/../../admin?x=1",
			"/.well-known/oauth-protected-resource/%2e%2e/%2E%2e/admin",
			"/.well-known/oauth-protected-resource/.%2E/admin",
			"/.well-known/oauth-protected-resource/./mcp",
			"/.well-known/oauth-protected-resource/mcp/..",
			"/.well-known/oauth-protected-resource/..;/admin",
			"/.well-known/oauth-authorization-server/..%2f..%2fadmin",
			"/.well-known/oauth-authorization-server/a%2Fb",
			"/.well-known/oauth-authorization-server/a%5cb",
			"/.well-known/openid-configuration/..\\..\\admin",
			"/.well-known/openid-configuration//internal",
			"/.well-known/openid-configuration/a//b",
			"/.well-known/openid-configuration/%zz",
			"/.well-known/oauth-protected-resource%2F..%2Fadmin",
		} {
			d := f.Request(context.Background(), flow.Request{Method: "GET", Path: p, Headers: flow.Headers{{"Host", "127.0.0.1"}}})
			want := "Not Found: " + oauth.ErrDiscoveryPath.Error() + "\n"
			if d.Do != flow.DoAnswer || d.Status != 404 || string(d.Body) != want || d.Headers.Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Errorf("endpoint %q, GET %s: %s %d %q (origin %v, path %q); want the gateway's 404 %q", endpoint, p, d.Do, d.Status, d.Body, d.Origin, d.Path, want)
			}
		}
		for _, p := range []string{"/.well-known/oauth-protected-resource/a.b/..c/.well/mcp/", "/.well-known/oauth-protected-resource/team%20a/mcp"} {
			if d := f.Request(context.Background(), flow.Request{Method: "GET", Path: p, Headers: flow.Headers{{"Host", "127.0.0.1"}}}); d.Do != flow.DoForward || !d.Origin {
				t.Errorf("endpoint %q, GET %s: %s %d; want a forward to the document", endpoint, p, d.Do, d.Status)
			}
		}
	}
}

// TestDiscovery_withoutOAuth: a flow without the OAuth option (the module without its
// upstream option) routes no discovery: a document's request, dot segments and all, is a GET
// like any other (sent where MCP requests go, its path the host's to map), never a path at
// the upstream's origin.
func TestDiscovery_withoutOAuth(t *testing.T) {
	f, _ := oauthFlow(t, nil, 1<<16)
	for _, p := range []string{
		"/.well-known/oauth-protected-resource/%2e%2e/%2e%2e/admin?x=1",
		"/.well-known/oauth-protected-resource/mcp",
		"/.well-known/openid-configuration",
	} {
		d := f.Request(context.Background(), flow.Request{Method: "GET", Path: p, Headers: flow.Headers{{"Host", "127.0.0.1"}}})
		if d.Do != flow.DoForward || d.Origin || d.Path != p {
			t.Errorf("GET %s: %s origin %v path %q; want a forward of the path as it came, not at the origin", p, d.Do, d.Origin, d.Path)
		}
	}
}

// TestDiscovery_decodedPath: a client path with percent-encoding names the same resource
// and the same metadata URL as the gateway, which reads the decoded r.URL.Path: encoded
// once, not twice; the document's path at the upstream goes encoded as the gateway sends it.
func TestDiscovery_decodedPath(t *testing.T) {
	const raw = "/.well-known/oauth-protected-resource/team%20a/m%3Fcp"
	f, _ := oauthFlow(t, &oauth.Map{Public: "https://gw.example"}, 1<<16) // no endpoint path: the suffix goes upstream
	if d := f.Request(context.Background(), flow.Request{Method: "GET", Path: raw + "?q=1", Headers: flow.Headers{{"Host", "127.0.0.1"}}}); d.Path != raw+"?q=1" {
		t.Errorf("upstream path %q; want %q", d.Path, raw+"?q=1")
	}
	m := oauth.Map{Public: "https://gw.example", EndpointPath: "/mcp"}
	f, _ = oauthFlow(t, &m, 1<<16)
	d := f.Request(context.Background(), flow.Request{Method: "GET", Path: raw, Headers: flow.Headers{{"Host", "127.0.0.1"}}})
	const doc = `{"resource":"http://up:1/mcp"}`
	out := feed(t, d.Open, 200, flow.Headers{{"Content-Type", "application/json"}}, doc, 100)
	gd, _ := oauth.ParseDiscovery("/.well-known/oauth-protected-resource/team a/m?cp") // the gateway's r.URL.Path
	gw, _ := m.Metadata(gd, []byte(doc))
	if string(out.Body) != string(gw) || string(gw) != `{"resource":"https://gw.example/team%20a/m%3Fcp"}` {
		t.Errorf("metadata\n%s\nthe gateway's\n%s", out.Body, gw)
	}
	const up = `Bearer resource_metadata="http://up:1/.well-known/oauth-protected-resource/mcp"`
	d = f.Request(context.Background(), flow.Request{Method: "POST", Path: "/team%20a/mcp", Body: []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`),
		Headers: flow.Headers{{"Host", "127.0.0.1"}, {"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}}})
	o := d.Open.Answer(401, flow.Headers{{"WWW-Authenticate", up}}, nil, false)
	gc, _ := m.Challenge(up, "/team a/mcp")
	if got := o.Headers.Get("WWW-Authenticate"); got != gc || gc != `Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource/team%20a/mcp"` {
		t.Errorf("challenge %q; the gateway's %q", got, gc)
	}
}

// TestDiscovery_dropsForwardingHeaders: a document's forward carries none of the client's
// Forwarded and X-Forwarded-For, -Host, -Proto, as the gateway's reverse proxy removes them
// (it sets its own); other X-Forwarded-* fields pass, as there.
func TestDiscovery_dropsForwardingHeaders(t *testing.T) {
	f, _ := oauthFlow(t, &oauth.Map{Public: "https://gw.example", EndpointPath: "/mcp"}, 1<<16)
	for _, p := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server"} {
		h := flow.Headers{{"Host", "127.0.0.1"}, {"Forwarded", "for=1.2.3.4;host=evil"}, {"x-forwarded-host", "evil.example"},
			{"X-Forwarded-For", "1.2.3.4"}, {"X-Forwarded-Proto", "https"}, {"X-Forwarded-Port", "8443"}, {"Authorization", "Bearer t"}}
		d := f.Request(context.Background(), flow.Request{Method: "GET", Path: p, Headers: h})
		if !d.Origin {
			t.Fatalf("GET %s is not a document's forward", p)
		}
		want := flow.Headers{{"Host", "127.0.0.1"}, {"X-Forwarded-Port", "8443"}, {"Authorization", "Bearer t"}}
		if fmt.Sprint(d.Headers) != fmt.Sprint(want) {
			t.Errorf("GET %s forwards %v; want %v", p, d.Headers, want)
		}
	}
}
