package flow

import (
	"errors"
	"strconv"
	"strings"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/oauth"
)

// OAuth discovery for a host that leaves it to the flow (Options.OAuth; the exchange
// module): the rules are oauth.Map's, as in host/gateway (discovery.go) and
// envoy/filter (oauth.go). A discovery request is forwarded to the upstream's document
// without MCP processing; the protected-resource metadata of a GET is read whole and its
// resource rewritten; every answer's WWW-Authenticate challenges are rewritten. Anything
// that cannot be read passes unchanged and is reported (fail open, as the gateway).

// discovery decides on a request for a discovery document; ok is false for any other.
func (f *Flow) discovery(r Request) (d Decision, ok bool) {
	if f.o.OAuth == nil {
		return Decision{}, false
	}
	method := strings.ToUpper(r.Method)
	if method != "GET" && method != "HEAD" && method != "OPTIONS" {
		return Decision{}, false
	}
	path, query, hasQuery := strings.Cut(r.Path, "?")
	doc, ok, err := oauth.RequestDiscovery(path)
	switch {
	case !ok:
		return Decision{}, false
	case err != nil:
		return plainError(404, "Not Found: "+err.Error()), true // as the gateway: nothing forwarded
	}
	up := oauth.EscapePath(f.o.OAuth.UpstreamPath(doc))
	if hasQuery {
		up += "?" + query
	}
	// The client's forwarding headers go, as the gateway's reverse proxy drops them (it sets
	// its own; the host knows the client's address, the module does not).
	drop := forwarding
	var o *Open
	if method == "GET" && doc.Doc == oauth.DocProtectedResource && f.o.OAuth.Public != "" {
		drop = forwardingEncoding // read to be rewritten: uncompressed
		o = &Open{f: f, pass: true, meta: doc}
	}
	d = Decision{Do: DoForward, Method: r.Method, Path: up, Origin: true, Headers: endToEnd(r.Headers, drop), Body: r.Body, Open: o}
	return d, true
}

// forwarding are the headers httputil.ReverseProxy removes from every request before its
// Rewrite (the gateway's discovery proxy); forwardingEncoding, those and Accept-Encoding.
var (
	forwardingEncoding = []string{"Accept-Encoding", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}
	forwarding         = forwardingEncoding[1:]
)

// challenges reports whether answers are read for their WWW-Authenticate challenges.
func (f *Flow) challenges() bool { return f.o.OAuth != nil && f.o.OAuth.Public != "" }

// clientPath is a request path without its query, decoded as the Go gateway's r.URL.Path
// (the path a challenge names).
func clientPath(p string) string {
	p, _, _ = strings.Cut(p, "?")
	return oauth.DecodePath(p)
}

// rewriteChallenges rewrites the resource_metadata of every WWW-Authenticate challenge in
// h (the upstream's answer to an MCP request, already copied by EndToEnd) for the client's
// path; a value that cannot be read passes unchanged (a fault). A discovery document's
// answer keeps its own, as in the gateway.
func (o *Open) rewriteChallenges(h Headers) {
	if !o.f.challenges() || o.meta.Doc != 0 {
		return
	}
	for i, kv := range h {
		if !strings.EqualFold(kv[0], "WWW-Authenticate") {
			continue
		}
		out, err := o.f.o.OAuth.Challenge(kv[1], o.path)
		if err != nil {
			o.f.o.Core.Fault(abi.FaultUpstreamBody, err, "header", "WWW-Authenticate")
		}
		h[i][1] = out
	}
}

// metadata buffers a 200 protected-resource metadata answer and, at its end, writes it
// rewritten; over MaxBodyBytes it passes unchanged from there on (a fault).
func (o *Open) metadata(chunk []byte, eos bool, out *Output) {
	o.buf = grow(o.buf, chunk)
	if len(o.buf) > o.f.o.MaxBodyBytes {
		o.f.o.Core.Fault(abi.FaultResponseTooLarge, errors.New("oauth metadata over the body limit: passed through"), "path", o.path)
		o.mode = modePass
		*out = Output{Start: true, Status: o.status, Headers: o.withLength(o.respHeaders), Body: o.buf}
		o.started, o.buf = true, nil
		return
	}
	if !eos {
		return
	}
	body, err := o.f.o.OAuth.Metadata(o.meta, o.buf)
	if err != nil {
		o.f.o.Core.Fault(abi.FaultUpstreamBody, err, "path", o.path)
	}
	o.buf = nil
	h := o.respHeaders.With(nil, [2]string{"Content-Length", strconv.Itoa(len(body))})
	o.started = true
	*out = Output{Start: true, Status: o.status, Headers: h, Body: body}
}
