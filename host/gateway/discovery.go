package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/oauth"
)

// OAuth discovery through the gateway (exchange/oauth has the rules): GET, HEAD and
// OPTIONS of the well-known discovery documents go to the upstream's without MCP
// processing; protected-resource metadata comes back with its resource at the gateway's
// public address, and every WWW-Authenticate challenge on an MCP answer with its
// resource_metadata there.

type discoveryKey struct{}
type clientPathKey struct{}

// isDiscovery reports whether r reads a discovery document, and which; err refuses a
// document's path that could resolve to another (oauth.RequestDiscovery).
func isDiscovery(r *http.Request) (oauth.Discovery, bool, error) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return oauth.RequestDiscovery(r.URL.EscapedPath())
	}
	return oauth.Discovery{}, false, nil
}

// serveDiscovery proxies a discovery request to the upstream's document, or answers 404 to
// one refused (the exchange module's answer too).
func (g *Gateway) serveDiscovery(w http.ResponseWriter, r *http.Request, d oauth.Discovery, err error) {
	if err != nil {
		http.Error(w, "Not Found: "+err.Error(), http.StatusNotFound)
		return
	}
	g.discovery.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), discoveryKey{}, d)))
}

func (g *Gateway) newDiscoveryProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			d, _ := pr.In.Context().Value(discoveryKey{}).(oauth.Discovery)
			u := *g.opts.Upstream
			u.Path, u.RawPath, u.RawQuery = g.oauth.UpstreamPath(d), "", pr.In.URL.RawQuery
			pr.Out.URL = &u
			pr.Out.Host = ""
			pr.SetXForwarded()
			if d.Doc == oauth.DocProtectedResource && g.oauth.Public != "" {
				// Read to be rewritten: Go's transport negotiates gzip itself and decompresses.
				pr.Out.Header.Del("Accept-Encoding")
			}
		},
		Transport:      g.opts.Transport,
		ModifyResponse: g.rewriteMetadata,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.Core().Fault(abi.FaultUpstream, err, "method", r.Method, "path", r.URL.Path)
			http.Error(w, "Bad Gateway: the gateway could not get this document from the MCP server", http.StatusBadGateway)
		},
	}
}

// rewriteMetadata rewrites protected-resource metadata the upstream answered (200) to name
// the gateway. A document the gateway cannot read or that is over the body limit passes
// unchanged, and the fault is reported: never an error of the gateway's own making.
func (g *Gateway) rewriteMetadata(resp *http.Response) error {
	d, _ := resp.Request.Context().Value(discoveryKey{}).(oauth.Discovery)
	if d.Doc != oauth.DocProtectedResource || g.oauth.Public == "" || resp.StatusCode != http.StatusOK ||
		resp.Request.Method != http.MethodGet {
		return nil
	}
	limit := g.opts.MaxBodyBytes
	body, err := readAll(resp.Body, resp.ContentLength, int64(limit)+1)
	if err != nil {
		return err // the upstream broke off its answer: ErrorHandler
	}
	if len(body) > limit {
		g.Core().Fault(abi.FaultResponseTooLarge, errors.New("oauth metadata over the body limit: passed through"), "path", resp.Request.URL.Path)
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return nil
	}
	resp.Body.Close()
	out, err := g.oauth.Metadata(d, body)
	if err != nil {
		g.Core().Fault(abi.FaultUpstreamBody, err, "path", resp.Request.URL.Path)
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
	return nil
}

// rewriteChallenges rewrites the resource_metadata of every WWW-Authenticate challenge in
// h (an upstream's answer to a request for clientPath) to the gateway's public address; a
// value it cannot read passes unchanged and the fault is reported.
func (g *Gateway) rewriteChallenges(h http.Header, clientPath string) {
	vs := h["Www-Authenticate"]
	if len(vs) == 0 || g.oauth.Public == "" {
		return
	}
	for i, v := range vs {
		out, err := g.oauth.Challenge(v, clientPath)
		if err != nil {
			g.Core().Fault(abi.FaultUpstreamBody, err, "header", "WWW-Authenticate")
		}
		vs[i] = out
	}
}

// challengesOf is the pass-through proxy's ModifyResponse: the challenges of an answer
// name the gateway, for the path the client used (Rewrite keeps it in the context).
func (g *Gateway) challengesOf(resp *http.Response) error {
	if len(resp.Header["Www-Authenticate"]) > 0 {
		path, _ := resp.Request.Context().Value(clientPathKey{}).(string)
		g.rewriteChallenges(resp.Header, path)
	}
	return nil
}

type readCloser struct {
	io.Reader
	io.Closer
}
