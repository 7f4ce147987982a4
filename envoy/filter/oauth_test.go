package filter

import (
	"strings"
	"testing"

	"github.com/stategate/stategate/exchange/oauth"
)

var publicURL = []byte(`{"publicUrl":"https://mcp.example.com"}`)

const upstreamPRM = `{"resource":"http://10.0.0.7:3001/mcp","authorization_servers":["https://auth.example.com"]}`

// TestFilter_oauth: with publicUrl set, the filter rewrites protected-resource metadata's
// resource and every challenge's resource_metadata to the public URL, in both modes; the
// Authorization header goes on untouched; without publicUrl both pass unchanged.
func TestFilter_oauth(t *testing.T) {
	challenge := `Bearer error="invalid_token", resource_metadata="http://10.0.0.7:3001/.well-known/oauth-protected-resource/mcp"`
	for _, r := range runners {
		t.Run(r.name, func(t *testing.T) {
			t.Run("metadata_names_the_public_url", func(t *testing.T) {
				e := newEnv(t, r.vm(t), sampleConfig, publicURL)
				o := e.do(roundTrip{method: "GET", path: "/.well-known/oauth-protected-resource/mcp?x=1",
					headers:     [][2]string{{"accept-encoding", "gzip"}},
					respHeaders: jsonResp, respBody: []string{upstreamPRM[:20], upstreamPRM[20:]}})
				if _, ok := header(o.reqHeaders, "accept-encoding"); ok {
					t.Error("accept-encoding was kept: the upstream could compress what the filter must read")
				}
				if _, ok := header(o.respHeaders, "content-length"); ok {
					t.Error("content-length was kept on a rewritten body")
				}
				if want := `{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://auth.example.com"]}`; o.respBody != want {
					t.Errorf("metadata %s; want %s", o.respBody, want)
				}
			})
			t.Run("challenges_name_the_public_url", func(t *testing.T) {
				e := newEnv(t, r.vm(t), sampleConfig, publicURL)
				o := e.do(roundTrip{headers: append(session("s1"), [2]string{"authorization", "Bearer tok-envoy"}),
					body:        []string{call(1, "cart.add_item", `{"sku":"tea"}`)},
					respHeaders: [][2]string{{":status", "401"}, {"www-authenticate", challenge}, {"www-authenticate", `Basic realm="x"`}}})
				if a, _ := header(o.reqHeaders, "authorization"); a != "Bearer tok-envoy" {
					t.Errorf("authorization forwarded as %q", a)
				}
				var got []string
				for _, kv := range o.respHeaders {
					if strings.EqualFold(kv[0], "www-authenticate") {
						got = append(got, kv[1])
					}
				}
				want := []string{`Bearer error="invalid_token", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`, `Basic realm="x"`}
				if strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("challenges %q; want %q", got, want)
				}
			})
			t.Run("malformed_metadata_passes_unchanged", func(t *testing.T) {
				e := newEnv(t, r.vm(t), sampleConfig, publicURL)
				o := e.do(roundTrip{method: "GET", path: "/.well-known/oauth-protected-resource/mcp",
					respHeaders: jsonResp, respBody: []string{`{"resource":7}`}})
				if o.respBody != `{"resource":7}` {
					t.Errorf("metadata %s; want it unchanged", o.respBody)
				}
				if n := counter(t, e, "stategate.fault.upstream_body"); n != 1 {
					t.Errorf("fault.upstream_body = %d; want 1", n)
				}
			})
			t.Run("encoded_client_path_as_the_gateway", func(t *testing.T) {
				// The path is decoded as the gateway's r.URL.Path before it is compared
				// with the upstream's and written: the same bytes as the gateway's
				// oauth.Map (upstream without a path: the client's is kept).
				gw := oauth.Map{Public: "https://mcp.example.com"}
				e := newEnv(t, r.vm(t), sampleConfig, publicURL)
				const doc = `{"resource":"http://10.0.0.7:3001/team%20a/mcp"}`
				o := e.do(roundTrip{method: "GET", path: "/.well-known/oauth-protected-resource/team%20a/mcp/",
					respHeaders: jsonResp, respBody: []string{doc}})
				d, _ := oauth.ParseDiscovery("/.well-known/oauth-protected-resource/team a/mcp/")
				want, _ := gw.Metadata(d, []byte(doc))
				if o.respBody != string(want) || string(want) != `{"resource":"https://mcp.example.com/team%20a/mcp/"}` {
					t.Errorf("metadata %s; the gateway's %s", o.respBody, want)
				}
				const up = `Bearer resource_metadata="http://10.0.0.7:3001/.well-known/oauth-protected-resource/team%20a/mcp/"`
				o = e.do(roundTrip{path: "/team%20a/mcp", headers: session("s1"), body: []string{call(1, "cart.add_item", `{"sku":"tea"}`)},
					respHeaders: [][2]string{{":status", "401"}, {"www-authenticate", up}}})
				wantC, _ := gw.Challenge(up, "/team a/mcp")
				if got, _ := header(o.respHeaders, "www-authenticate"); got != wantC || wantC != `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/team%20a/mcp"` {
					t.Errorf("challenge %q; the gateway's %q", got, wantC)
				}
			})
			t.Run("dot_segments_refused", func(t *testing.T) {
				e := newEnv(t, r.vm(t), sampleConfig, publicURL)
				for _, p := range []string{"/.well-known/oauth-protected-resource/%2e%2e/admin", "/.well-known/openid-configuration/a%2Fb", "/.well-known/oauth-authorization-server//x"} {
					o := e.do(roundTrip{method: "GET", path: p, respHeaders: jsonResp, respBody: []string{upstreamPRM}})
					if o.local == nil || o.local.StatusCode != 404 || o.upstreamCalled {
						t.Errorf("GET %s: local %+v, upstream called %v; want a local 404, as the gateway's", p, o.local, o.upstreamCalled)
					}
				}
			})
			t.Run("without_public_url_nothing_changes", func(t *testing.T) {
				e := newEnv(t, r.vm(t), sampleConfig, nil)
				o := e.do(roundTrip{method: "GET", path: "/.well-known/oauth-protected-resource/mcp",
					respHeaders: jsonResp, respBody: []string{upstreamPRM}})
				if o.respBody != upstreamPRM {
					t.Errorf("metadata %s; want it unchanged", o.respBody)
				}
			})
		})
	}
}
