package main

import (
	"context"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	module := flag.String("module", "build/stategate-exchange.wasm", "the exchange module")
	config := flag.String("config", "stategate.yaml", "the stategate configuration")
	upstream := flag.String("upstream", "http://127.0.0.1:3000/mcp", "the MCP server")
	listen := flag.String("listen", "127.0.0.1:8080", "where clients connect")
	public := flag.String("public-url", "", "the origin clients reach this host at: OAuth discovery names it (default http:// and -listen; none when -listen's host is a wildcard such as 0.0.0.0, or its port 0: the documents and challenges then pass unchanged)")
	flag.Parse()
	wasm, err := os.ReadFile(*module)
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := os.ReadFile(*config)
	if err != nil {
		log.Fatal(err)
	}
	if *public == "" {
		if *public = defaultPublicURL(*listen); *public == "" {
			log.Printf("no public URL (-listen %s names no address to give clients; set -public-url): OAuth discovery documents and challenges pass unchanged", *listen)
		}
	}
	h, err := New(context.Background(), Options{Module: wasm, Config: cfg, Upstream: *upstream, PublicURL: *public})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(newServer(*listen, h, headerTimeout).ListenAndServe())
}

// headerTimeout bounds how long a request's headers may take to arrive, as in `stategate
// serve`; the Host bounds the body (Options.BodyTimeout).
const headerTimeout = 10 * time.Second

// newServer is the listener's server: a client that sends its headers slower than
// headerTimeout has its connection closed, so slow clients cannot hold connections for
// ever.
func newServer(addr string, h http.Handler, headerTimeout time.Duration) *http.Server {
	return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: headerTimeout}
}

// defaultPublicURL is the public URL a listen address implies: http:// and the address,
// or "" when it names no address a client can be given: a wildcard host (every interface:
// "", 0.0.0.0, ::) or port 0.
func defaultPublicURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "0" {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return ""
	}
	return "http://" + listen
}
