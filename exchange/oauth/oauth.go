// Package oauth is OAuth discovery through a gateway (MCP authorization, 2025-06-18 on).
// Before it has a token, a client reads the server's RFC 9728 protected-resource metadata,
// found at a well-known path or named by a 401's WWW-Authenticate challenge, and then its
// authorization server's metadata. A gateway stands where the server would: these
// documents reach the upstream without MCP processing, and the addresses in them that the
// client must use name the gateway. Standard Go, no I/O: every host (the gateway, the
// Envoy filter, exchange/flow for the modules) routes and rewrites with it.
package oauth

import (
	"errors"
	"net/url"
	"strings"

	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/plugin/jsonx"
)

// Doc names a well-known metadata document.
type Doc uint8

// The discovery documents a gateway routes to its upstream.
const (
	DocProtectedResource   Doc = iota + 1 // RFC 9728 /.well-known/oauth-protected-resource
	DocAuthorizationServer                // RFC 8414 /.well-known/oauth-authorization-server
	DocOpenIDConfiguration                // OpenID Connect Discovery /.well-known/openid-configuration
)

var wellKnown = [...]string{
	DocProtectedResource:   "/.well-known/oauth-protected-resource",
	DocAuthorizationServer: "/.well-known/oauth-authorization-server",
	DocOpenIDConfiguration: "/.well-known/openid-configuration",
}

// Discovery is a request for a discovery document: which one, and the path after its
// well-known name: "" for the root form, "/mcp" for /.well-known/oauth-protected-resource/mcp
// (RFC 9728 3.1: the client inserts the well-known name before the path of the URL it uses).
type Discovery struct {
	Doc    Doc
	Suffix string
}

// ParseDiscovery reports whether path (a request's path, without the query) is a discovery
// document's, in its root or path-suffixed form. A suffix of "/" is the root form.
func ParseDiscovery(path string) (Discovery, bool) {
	for doc := DocProtectedResource; doc <= DocOpenIDConfiguration; doc++ {
		prefix := wellKnown[doc]
		if !strings.HasPrefix(path, prefix) {
			continue
		}
		switch rest := path[len(prefix):]; {
		case rest == "" || rest == "/":
			return Discovery{Doc: doc}, true
		case rest[0] == '/':
			return Discovery{Doc: doc, Suffix: rest}, true
		}
	}
	return Discovery{}, false
}

// ErrDiscoveryPath refuses a discovery request (RequestDiscovery) whose path could name
// another path once a server resolves it: the host answers 404 "Not Found: " and the error,
// forwarding nothing.
var ErrDiscoveryPath = errors.New("a discovery document's path may not hold dot segments, empty segments, backslashes or encoded slashes")

// RequestDiscovery reads a request's path as sent (percent-encoded, without the query) for
// a discovery document: ParseDiscovery of the path decoded as url.URL.Path decodes it (the
// Go gateway's r.URL.Path), so every host routes the same bytes the same way. A document's
// path that a server or a host's URL parser could resolve to another path is refused with
// ErrDiscoveryPath (ok true): a "." or ".." segment (raw or percent-encoded, any case), an
// empty segment ("//"), a backslash, an encoded slash or backslash (%2F, %5C), or an escape
// that cannot be decoded.
func RequestDiscovery(raw string) (d Discovery, ok bool, err error) {
	path, perr := url.PathUnescape(raw)
	if perr != nil {
		path = raw // still routed as a document's when it names one: then refused
	}
	if d, ok = ParseDiscovery(path); !ok {
		return Discovery{}, false, nil
	}
	if perr != nil || !cleanSuffix(d.Suffix) || containsFold(raw, "%2f") || containsFold(raw, "%5c") {
		return Discovery{}, true, ErrDiscoveryPath
	}
	return d, true, nil
}

// DecodePath is a request path as sent (without the query) decoded as url.URL.Path decodes
// it, or as it is when it cannot be: the path a challenge names (Map.Challenge) and a
// document's resource carry, as the Go gateway's r.URL.Path.
func DecodePath(raw string) string {
	if p, err := url.PathUnescape(raw); err == nil {
		return p
	}
	return raw
}

// EscapePath is a decoded path as a request sends it (url.URL.EscapedPath of a URL without
// RawPath, as the Go gateway writes its upstream's).
func EscapePath(p string) string {
	u := url.URL{Path: p}
	return u.EscapedPath()
}

// cleanSuffix reports whether a decoded suffix names itself only: no dot segment (nor one
// with parameters, "..;x", which some servers resolve too), empty segment or backslash.
func cleanSuffix(s string) bool {
	if strings.IndexByte(s, '\\') >= 0 {
		return false
	}
	for i := 0; i < len(s); {
		if s[i] != '/' {
			return false
		}
		seg := s[i+1:]
		if j := strings.IndexByte(seg, '/'); j >= 0 {
			seg = seg[:j]
		}
		last := i+1+len(seg) == len(s)
		if seg == "." || seg == ".." || strings.HasPrefix(seg, ".;") || strings.HasPrefix(seg, "..;") || (seg == "" && !last) {
			return false
		}
		i += 1 + len(seg)
	}
	return true
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// Map maps the upstream's OAuth addresses to the gateway's. Public is the gateway's
// public origin (ParsePublicURL), never a request's Host; EndpointPath is the upstream's
// MCP endpoint path, to which every MCP request goes, or "" when the gateway keeps the
// client's path.
type Map struct {
	Public       string
	EndpointPath string
}

// UpstreamPath is the upstream's path for d: the root form stays the root form; a suffix
// (the client's MCP path) becomes the upstream's MCP endpoint path when the upstream has
// one, and stays as it is when the gateway keeps the client's path.
func (m Map) UpstreamPath(d Discovery) string {
	return wellKnown[d.Doc] + m.upstreamSuffix(d.Suffix)
}

// upstreamSuffix maps a client's MCP path ("" for none) to the upstream's.
func (m Map) upstreamSuffix(clientPath string) string {
	if clientPath == "" || clientPath == "/" {
		return ""
	}
	if up := strings.TrimSuffix(m.EndpointPath, "/"); up != "" {
		return up
	}
	return clientPath
}

// Metadata rewrites a discovery document the upstream answered for d. Only
// protected-resource metadata changes, and in it only the top-level "resource" member: it
// names the gateway's public origin, with the path the client used (d.Suffix) when the
// upstream's resource is the upstream's MCP endpoint, else with the upstream resource's own
// path. Every other byte is kept. A document that is not a JSON object with exactly one
// string "resource" holding an absolute URL comes back unchanged with an error (the host
// passes it through and reports the fault). An empty Public changes nothing.
func (m Map) Metadata(d Discovery, doc []byte) ([]byte, error) {
	if d.Doc != DocProtectedResource || m.Public == "" {
		return doc, nil
	}
	start, end, n := -1, -1, 0
	err := jsonx.ValidateObject(doc, admission.MaxDepth, func(key string, s, e int) {
		if key == "resource" {
			start, end, n = s, e, n+1
		}
	})
	switch {
	case err != nil:
		return doc, errors.New("oauth metadata: not a JSON object")
	case n == 0:
		return doc, errors.New("oauth metadata: no resource member")
	case n > 1:
		return doc, errors.New("oauth metadata: resource given more than once")
	case doc[start] != '"':
		return doc, errors.New("oauth metadata: resource is not a string")
	}
	u, err := absoluteURL(jsonx.Unquote(string(doc[start:end])))
	if err != nil {
		return doc, errors.New("oauth metadata: resource " + err.Error())
	}
	if d.Suffix != "" && samePath(u.Path, m.upstreamSuffix(d.Suffix)) {
		u.Path, u.RawPath = d.Suffix, ""
	}
	out := make([]byte, 0, len(doc)+len(m.Public))
	out = append(out, doc[:start]...)
	out = jsonx.AppendString(out, m.public(u))
	return append(out, doc[end:]...), nil
}

// Challenge rewrites the resource_metadata parameter of every challenge in one
// WWW-Authenticate field value (RFC 9110 11.6.1; several challenges, quoted or token
// values, any case of the name) to the gateway's public origin. A URL at the upstream's
// protected-resource well-known path for its MCP endpoint becomes the gateway's for
// clientPath (the path of the request the challenge answers); any other path is kept.
// Everything else in the value is kept byte for byte. A value that cannot be read, or a
// resource_metadata that is not an absolute URL, comes back unchanged with an error. An
// empty Public changes nothing.
func (m Map) Challenge(value, clientPath string) (string, error) {
	if m.Public == "" {
		return value, nil
	}
	params, err := scanChallenges(value)
	if err != nil {
		return value, err
	}
	var out []byte
	last := 0
	for _, p := range params {
		if !strings.EqualFold(value[p.name:p.eq], "resource_metadata") {
			continue
		}
		u, err := absoluteURL(p.text(value))
		if err != nil {
			return value, errors.New("www-authenticate: resource_metadata " + err.Error())
		}
		if rest, ok := strings.CutPrefix(u.Path, wellKnown[DocProtectedResource]); ok && len(rest) > 1 &&
			rest[0] == '/' && samePath(rest, m.upstreamSuffix(clientPath)) {
			u.Path, u.RawPath = wellKnown[DocProtectedResource]+strings.TrimSuffix(clientPath, "/"), ""
		}
		out = append(out, value[last:p.start]...)
		out = appendQuoted(out, m.public(u))
		last = p.end
	}
	if out == nil {
		return value, nil
	}
	return string(append(out, value[last:]...)), nil
}

// public is u at the gateway's public origin.
func (m Map) public(u *url.URL) string {
	s := m.Public + u.EscapedPath()
	if u.ForceQuery || u.RawQuery != "" {
		s += "?" + u.RawQuery
	}
	if u.Fragment != "" {
		s += "#" + u.EscapedFragment()
	}
	return s
}

// ParsePublicURL checks a gateway's public address: an absolute http or https URL of an
// origin (no path but "/", no user, query or fragment). It returns the origin without a
// trailing slash, as Map.Public wants it.
func ParsePublicURL(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "":
		return "", errors.New("public url " + quote(s) + " is not an absolute http(s) URL")
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", errors.New("public url " + quote(s) + ": give scheme://host[:port] only (no user, query or fragment)")
	case u.Path != "" && u.Path != "/":
		return "", errors.New("public url " + quote(s) + ": give the origin only, without a path: the discovery documents carry the path each client used")
	}
	return u.Scheme + "://" + u.Host, nil
}

func absoluteURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return nil, errors.New("is not an absolute URL")
	}
	return u, nil
}

// samePath compares two paths, a trailing slash aside.
func samePath(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

func quote(s string) string { return string(appendQuoted(nil, s)) }

// appendQuoted appends s as an HTTP quoted-string.
func appendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, s[i])
	}
	return append(dst, '"')
}
