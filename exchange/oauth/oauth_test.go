package oauth

import (
	"net/url"
	"strings"
	"testing"
)

func TestParseDiscovery(t *testing.T) {
	tests := []struct {
		name, path string
		want       Discovery
		ok         bool
	}{
		{"protected resource, root form", "/.well-known/oauth-protected-resource", Discovery{Doc: DocProtectedResource}, true},
		{"protected resource, root form with a slash", "/.well-known/oauth-protected-resource/", Discovery{Doc: DocProtectedResource}, true},
		{"protected resource, path-suffixed", "/.well-known/oauth-protected-resource/mcp", Discovery{DocProtectedResource, "/mcp"}, true},
		{"protected resource, deep suffix", "/.well-known/oauth-protected-resource/a/b/", Discovery{DocProtectedResource, "/a/b/"}, true},
		{"authorization server", "/.well-known/oauth-authorization-server", Discovery{Doc: DocAuthorizationServer}, true},
		{"authorization server, path-suffixed", "/.well-known/oauth-authorization-server/mcp", Discovery{DocAuthorizationServer, "/mcp"}, true},
		{"openid configuration", "/.well-known/openid-configuration", Discovery{Doc: DocOpenIDConfiguration}, true},
		{"a longer name is another document", "/.well-known/oauth-protected-resources", Discovery{}, false},
		{"the MCP endpoint", "/mcp", Discovery{}, false},
		{"the well-known name under a path", "/mcp/.well-known/openid-configuration", Discovery{}, false},
		{"another well-known document", "/.well-known/security.txt", Discovery{}, false},
		{"empty", "", Discovery{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseDiscovery(tt.path)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseDiscovery(%q) = %+v, %v; want %+v, %v", tt.path, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestMap_UpstreamPath(t *testing.T) {
	tests := []struct {
		name, endpoint, path, want string
	}{
		{"root form stays root", "/mcp", "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource"},
		{"the client's MCP path becomes the upstream's endpoint", "/mcp", "/.well-known/oauth-protected-resource/gw", "/.well-known/oauth-protected-resource/mcp"},
		{"the endpoint's trailing slash is dropped", "/v1/mcp/", "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource/v1/mcp"},
		{"no endpoint path: the client's path is kept", "", "/.well-known/oauth-protected-resource/x/mcp", "/.well-known/oauth-protected-resource/x/mcp"},
		{"endpoint / is no endpoint path", "/", "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource/mcp"},
		{"authorization server, path-suffixed", "/mcp", "/.well-known/oauth-authorization-server/gw", "/.well-known/oauth-authorization-server/mcp"},
		{"openid configuration, root", "/mcp", "/.well-known/openid-configuration", "/.well-known/openid-configuration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := ParseDiscovery(tt.path)
			if !ok {
				t.Fatalf("%q is not a discovery path", tt.path)
			}
			if got := (Map{Public: "https://gw.example", EndpointPath: tt.endpoint}).UpstreamPath(d); got != tt.want {
				t.Errorf("UpstreamPath(%q) = %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}

func TestMap_Metadata(t *testing.T) {
	const prm = "/.well-known/oauth-protected-resource"
	tests := []struct {
		name, endpoint, path, doc, want, err string
	}{
		{name: "the endpoint's resource names the gateway and the client's path", endpoint: "/mcp", path: prm + "/mcp",
			doc:  `{"resource":"http://10.0.0.7:3001/mcp","authorization_servers":["https://auth.example"]}`,
			want: `{"resource":"https://gw.example/mcp","authorization_servers":["https://auth.example"]}`},
		{name: "the client's path differs from the upstream's", endpoint: "/v1/mcp", path: prm + "/mcp",
			doc:  `{"resource":"http://up:3001/v1/mcp"}`,
			want: `{"resource":"https://gw.example/mcp"}`},
		{name: "a trailing slash on the resource still names the endpoint", endpoint: "/mcp", path: prm + "/mcp",
			doc:  `{"resource":"http://up/mcp/"}`,
			want: `{"resource":"https://gw.example/mcp"}`},
		{name: "a resource at the upstream's root keeps the root", endpoint: "/mcp", path: prm + "/mcp",
			doc:  `{"resource":"http://up:3001/"}`,
			want: `{"resource":"https://gw.example/"}`},
		{name: "a pathless resource stays pathless", endpoint: "/mcp", path: prm,
			doc:  `{"resource":"http://up:3001"}`,
			want: `{"resource":"https://gw.example"}`},
		{name: "root form keeps the resource's path", endpoint: "/mcp", path: prm,
			doc:  `{"resource":"http://up:3001/mcp"}`,
			want: `{"resource":"https://gw.example/mcp"}`},
		{name: "no endpoint path: the origin changes, the path is the client's", path: prm + "/tenant/mcp",
			doc:  `{"resource":"http://up:3001/tenant/mcp"}`,
			want: `{"resource":"https://gw.example/tenant/mcp"}`},
		{name: "an upstream that already names another public origin", endpoint: "/mcp", path: prm + "/mcp",
			doc:  `{"resource":"https://old.example/mcp"}`,
			want: `{"resource":"https://gw.example/mcp"}`},
		{name: "the query is kept", endpoint: "/mcp", path: prm + "/mcp",
			doc:  `{"resource":"http://up/mcp?tenant=a"}`,
			want: `{"resource":"https://gw.example/mcp?tenant=a"}`},
		{name: "every other byte is kept", endpoint: "/mcp", path: prm + "/mcp",
			doc:  "{\n  \"scopes_supported\" : [\"a\"],\n  \"resource\" :\t\"http://up/mcp\" ,\n  \"x\": {\"resource\": \"http://up/mcp\"}\n}\n",
			want: "{\n  \"scopes_supported\" : [\"a\"],\n  \"resource\" :\t\"https://gw.example/mcp\" ,\n  \"x\": {\"resource\": \"http://up/mcp\"}\n}\n"},
		{name: "an escaped member name and value are read", endpoint: "/mcp", path: prm + "/mcp",
			doc:  `{"reso\u0075rce":"http:\/\/up\/mcp"}`,
			want: `{"reso\u0075rce":"https://gw.example/mcp"}`},
		{name: "authorization server metadata passes unchanged", endpoint: "/mcp", path: "/.well-known/oauth-authorization-server",
			doc:  `{"issuer":"http://up:3001","resource":"http://up:3001/mcp"}`,
			want: `{"issuer":"http://up:3001","resource":"http://up:3001/mcp"}`},
		{name: "not JSON", endpoint: "/mcp", path: prm + "/mcp", doc: `<html>`, err: "oauth metadata: not a JSON object"},
		{name: "an array", endpoint: "/mcp", path: prm + "/mcp", doc: `[{"resource":"http://up/mcp"}]`, err: "oauth metadata: not a JSON object"},
		{name: "trailing garbage", endpoint: "/mcp", path: prm + "/mcp", doc: `{"resource":"http://up/mcp"}x`, err: "oauth metadata: not a JSON object"},
		{name: "no resource", endpoint: "/mcp", path: prm + "/mcp", doc: `{"authorization_servers":[]}`, err: "oauth metadata: no resource member"},
		{name: "resource twice", endpoint: "/mcp", path: prm + "/mcp", doc: `{"resource":"http://up/mcp","resource":"http://evil/"}`, err: "oauth metadata: resource given more than once"},
		{name: "resource not a string", endpoint: "/mcp", path: prm + "/mcp", doc: `{"resource":["http://up/mcp"]}`, err: "oauth metadata: resource is not a string"},
		{name: "resource not absolute", endpoint: "/mcp", path: prm + "/mcp", doc: `{"resource":"/mcp"}`, err: "oauth metadata: resource is not an absolute URL"},
		{name: "resource not a URL", endpoint: "/mcp", path: prm + "/mcp", doc: `{"resource":"http://[::1"}`, err: "oauth metadata: resource is not an absolute URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := ParseDiscovery(tt.path)
			if !ok {
				t.Fatalf("%q is not a discovery path", tt.path)
			}
			m := Map{Public: "https://gw.example", EndpointPath: tt.endpoint}
			got, err := m.Metadata(d, []byte(tt.doc))
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				if string(got) != tt.doc {
					t.Errorf("a malformed document changed: %s", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	t.Run("no public origin changes nothing", func(t *testing.T) {
		doc := `{"resource":"http://up/mcp"}`
		got, err := Map{EndpointPath: "/mcp"}.Metadata(Discovery{DocProtectedResource, "/mcp"}, []byte(doc))
		if err != nil || string(got) != doc {
			t.Errorf("got %s, %v", got, err)
		}
	})
}

func TestMap_Challenge(t *testing.T) {
	const prm = "https://gw.example/.well-known/oauth-protected-resource"
	tests := []struct {
		name, endpoint, path, value, want, err string
	}{
		{name: "the TypeScript SDK's challenge", endpoint: "/mcp", path: "/mcp",
			value: `Bearer error="invalid_token", error_description="Missing Authorization header", resource_metadata="http://127.0.0.1:3001/.well-known/oauth-protected-resource/mcp"`,
			want:  `Bearer error="invalid_token", error_description="Missing Authorization header", resource_metadata="` + prm + `/mcp"`},
		{name: "the client's path, not the upstream's", endpoint: "/v1/mcp", path: "/mcp",
			value: `Bearer resource_metadata="http://up/.well-known/oauth-protected-resource/v1/mcp"`,
			want:  `Bearer resource_metadata="` + prm + `/mcp"`},
		{name: "no endpoint path: the client's path", path: "/a/mcp",
			value: `Bearer resource_metadata="http://up/.well-known/oauth-protected-resource/a/mcp"`,
			want:  `Bearer resource_metadata="` + prm + `/a/mcp"`},
		{name: "root form stays root", endpoint: "/mcp", path: "/mcp",
			value: `Bearer resource_metadata="http://up/.well-known/oauth-protected-resource"`,
			want:  `Bearer resource_metadata="` + prm + `"`},
		{name: "another path keeps its path", endpoint: "/mcp", path: "/mcp",
			value: `Bearer resource_metadata="http://up/meta/prm.json?x=1"`,
			want:  `Bearer resource_metadata="https://gw.example/meta/prm.json?x=1"`},
		{name: "name in any case", endpoint: "/mcp", path: "/mcp",
			value: `bearer Resource_Metadata="http://up/.well-known/oauth-protected-resource/mcp"`,
			want:  `bearer Resource_Metadata="` + prm + `/mcp"`},
		{name: "an unquoted value is quoted", endpoint: "/mcp", path: "/mcp",
			value: `Bearer realm=mcp, resource_metadata=http://up/.well-known/oauth-protected-resource/mcp, scope=read`,
			want:  `Bearer realm=mcp, resource_metadata="` + prm + `/mcp", scope=read`},
		{name: "whitespace around the equals sign", endpoint: "/mcp", path: "/mcp",
			value: `Bearer resource_metadata = "http://up/.well-known/oauth-protected-resource/mcp"`,
			want:  `Bearer resource_metadata = "` + prm + `/mcp"`},
		{name: "several challenges, each rewritten", endpoint: "/mcp", path: "/mcp",
			value: `Basic realm="a, \"b\"", DPoP algs="ES256", resource_metadata="http://up/.well-known/oauth-protected-resource/mcp", Bearer scope="x", resource_metadata="http://up/.well-known/oauth-protected-resource/mcp"`,
			want:  `Basic realm="a, \"b\"", DPoP algs="ES256", resource_metadata="` + prm + `/mcp", Bearer scope="x", resource_metadata="` + prm + `/mcp"`},
		{name: "a quoted value that mentions the parameter is not one", endpoint: "/mcp", path: "/mcp",
			value: `Bearer error_description="resource_metadata=\"http://up/x\"", resource_metadata="http://up/.well-known/oauth-protected-resource/mcp"`,
			want:  `Bearer error_description="resource_metadata=\"http://up/x\"", resource_metadata="` + prm + `/mcp"`},
		{name: "a token68 challenge before", endpoint: "/mcp", path: "/mcp",
			value: `Negotiate a87421000492aa874209af8bc028==, Bearer resource_metadata="http://up/.well-known/oauth-protected-resource/mcp"`,
			want:  `Negotiate a87421000492aa874209af8bc028==, Bearer resource_metadata="` + prm + `/mcp"`},
		{name: "escapes in the quoted value are read", endpoint: "/mcp", path: "/mcp",
			value: `Bearer resource_metadata="http://up/.well-known/oauth-protected-resource/m\cp"`,
			want:  `Bearer resource_metadata="` + prm + `/mcp"`},
		{name: "no resource_metadata: unchanged", endpoint: "/mcp", path: "/mcp",
			value: `Bearer realm="example", error="invalid_token"`, want: `Bearer realm="example", error="invalid_token"`},
		{name: "a scheme alone", endpoint: "/mcp", path: "/mcp", value: `Bearer`, want: `Bearer`},
		{name: "empty", endpoint: "/mcp", path: "/mcp", value: ``, want: ``},
		{name: "an unterminated quote", endpoint: "/mcp", path: "/mcp",
			value: `Bearer resource_metadata="http://up/x`, err: "www-authenticate: unterminated quoted-string"},
		{name: "a relative URL", endpoint: "/mcp", path: "/mcp",
			value: `Bearer resource_metadata="/.well-known/oauth-protected-resource/mcp"`, err: "www-authenticate: resource_metadata is not an absolute URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Map{Public: "https://gw.example", EndpointPath: tt.endpoint}
			got, err := m.Challenge(tt.value, tt.path)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || got != tt.value {
					t.Fatalf("got %q, %v; want the value unchanged and %q", got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestParsePublicURL(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{in: "https://mcp.example.com", want: "https://mcp.example.com"},
		{in: "https://mcp.example.com/", want: "https://mcp.example.com"},
		{in: "HTTP://127.0.0.1:8080", want: "http://127.0.0.1:8080"},
		{in: "http://[::1]:8080", want: "http://[::1]:8080"},
		{in: "mcp.example.com", err: "is not an absolute http(s) URL"},
		{in: "ftp://mcp.example.com", err: "is not an absolute http(s) URL"},
		{in: "https://", err: "is not an absolute http(s) URL"},
		{in: "", err: "is not an absolute http(s) URL"},
		{in: "https://mcp.example.com/mcp", err: "without a path"},
		{in: "https://u:p@mcp.example.com", err: "no user, query or fragment"},
		{in: "https://mcp.example.com?x", err: "no user, query or fragment"},
		{in: "https://mcp.example.com#f", err: "no user, query or fragment"},
	}
	for _, tt := range tests {
		got, err := ParsePublicURL(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParsePublicURL(%q) = %q, %v; want an error with %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParsePublicURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// FuzzOAuthChallenge: any field value is rewritten or returned unchanged with an error,
// never a panic; a rewritten value keeps every byte outside resource_metadata values.
func FuzzOAuthChallenge(f *testing.F) {
	for _, s := range []string{
		`Bearer error="invalid_token", resource_metadata="http://up/.well-known/oauth-protected-resource/mcp"`,
		`Basic realm="a, \"b\"", Bearer resource_metadata=http://up/x, scope=a`,
		`Negotiate abc==, Bearer resource_metadata = "http://up/.well-known/oauth-protected-resource"`,
		`Bearer resource_metadata="`, `, ,=,"`, `a=b=c`,
	} {
		f.Add(s, "/mcp")
	}
	m := Map{Public: "https://gw.example", EndpointPath: "/mcp"}
	f.Fuzz(func(t *testing.T, value, path string) {
		got, err := m.Challenge(value, path)
		if err != nil && got != value {
			t.Fatalf("an error changed the value: %q -> %q", value, got)
		}
		if err == nil && !strings.Contains(strings.ToLower(value), "resource_metadata") && got != value {
			t.Fatalf("a value without resource_metadata changed: %q -> %q", value, got)
		}
	})
}

// FuzzOAuthMetadata: any document is rewritten or returned unchanged with an error.
func FuzzOAuthMetadata(f *testing.F) {
	f.Add([]byte(`{"resource":"http://up/mcp","authorization_servers":["https://a"]}`), "/mcp")
	f.Add([]byte(`{"resource":"http://up/"}`), "")
	f.Add([]byte(`{"resource":1}`), "/x")
	m := Map{Public: "https://gw.example", EndpointPath: "/mcp"}
	f.Fuzz(func(t *testing.T, doc []byte, suffix string) {
		got, err := m.Metadata(Discovery{DocProtectedResource, suffix}, doc)
		if err != nil && string(got) != string(doc) {
			t.Fatalf("an error changed the document")
		}
		if err == nil && !strings.Contains(string(got), `"https://gw.example`) {
			t.Fatalf("rewritten without the public origin: %s", got)
		}
	})
}

// TestRequestDiscovery: a request path as sent is decoded as url.URL.Path before it is
// matched; a document's path that could resolve to another is refused.
func TestRequestDiscovery(t *testing.T) {
	const prm = "/.well-known/oauth-protected-resource"
	tests := []struct {
		name, raw string
		want      Discovery
		ok        bool
		refused   bool
	}{
		{name: "decoded suffix", raw: prm + "/team%20a/mcp", want: Discovery{DocProtectedResource, "/team a/mcp"}, ok: true},
		{name: "encoded well-known name", raw: "/%2Ewell-known/openid-configuration", want: Discovery{Doc: DocOpenIDConfiguration}, ok: true},
		{name: "dots inside names are names", raw: prm + "/a.b/..c/c../.well/", want: Discovery{DocProtectedResource, "/a.b/..c/c../.well/"}, ok: true},
		{name: "not a document", raw: "/mcp/%2e%2e", ok: false},
		{name: "dot dot", raw: prm + "/../admin", ok: true, refused: true},
		{name: "dot", raw: prm + "/./mcp", ok: true, refused: true},
		{name: "trailing dot dot", raw: prm + "/mcp/..", ok: true, refused: true},
		{name: "encoded dots any case", raw: prm + "/%2E%2e/admin", ok: true, refused: true},
		{name: "half encoded", raw: prm + "/.%2e/admin", ok: true, refused: true},
		{name: "dot dot with parameters", raw: prm + "/..;x/admin", ok: true, refused: true},
		{name: "empty segment", raw: prm + "//admin", ok: true, refused: true},
		{name: "backslash", raw: prm + "/..\\admin", ok: true, refused: true},
		{name: "encoded backslash", raw: prm + "/a%5Cb", ok: true, refused: true},
		{name: "encoded slash", raw: prm + "/a%2fb", ok: true, refused: true},
		{name: "encoded slash after the name", raw: prm + "%2Fmcp", ok: true, refused: true},
		{name: "bad escape", raw: prm + "/%zz", ok: true, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := RequestDiscovery(tt.raw)
			if got != tt.want || ok != tt.ok || (err != nil) != tt.refused {
				t.Errorf("RequestDiscovery(%q) = %+v, %v, %v; want %+v, %v, refused %v", tt.raw, got, ok, err, tt.want, tt.ok, tt.refused)
			}
		})
	}
}

// FuzzOAuthRequestDiscovery: any path as sent: never a panic; an accepted document's suffix
// holds no dot or empty segment or backslash, and the path decodes as url.URL.Path does;
// the suffix encoded and decoded again is itself (what a host sends names the same path).
func FuzzOAuthRequestDiscovery(f *testing.F) {
	for _, s := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource/%2e%2E/x",
		"/.well-known/openid-configuration//a", "/.well-known/oauth-authorization-server/a%2fb", "/.well-known/oauth-protected-resource/team%20a/%3F",
		"/.well-known/oauth-protected-resource/..;/x", "/.well-known/oauth-protected-resource/%zz", "/%2Ewell-known/openid-configuration/a\\b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		d, ok, err := RequestDiscovery(raw)
		if !ok || err != nil {
			return
		}
		for _, seg := range strings.Split(d.Suffix, "/")[1:] {
			if seg == "." || seg == ".." || strings.HasPrefix(seg, "..;") || strings.ContainsRune(seg, '\\') {
				t.Fatalf("%q accepted with suffix %q", raw, d.Suffix)
			}
		}
		if strings.Contains(strings.TrimSuffix(d.Suffix, "/"), "//") {
			t.Fatalf("%q accepted with an empty segment: %q", raw, d.Suffix)
		}
		u, perr := url.Parse("http://h" + raw)
		if perr == nil && !strings.ContainsAny(raw, "?#") { // a request-target: no fragment; the query is cut before
			if want, _ := ParseDiscovery(u.Path); want != d {
				t.Fatalf("%q: %+v; url.URL.Path gives %+v", raw, d, want)
			}
		}
		if back := DecodePath(EscapePath(d.Suffix)); back != d.Suffix {
			t.Fatalf("suffix %q encoded as %q decodes to %q", d.Suffix, EscapePath(d.Suffix), back)
		}
	})
}
