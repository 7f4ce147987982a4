// Command daprwasm serves HTTP through Dapr's wasm middleware (github.com/dapr/
// components-contrib v1.16.1, middleware/http/wasm) in front of one upstream: the
// middleware as Dapr builds it from a Middleware component's metadata (url, guestConfig),
// used as a library, so that the tests of examples/dapr run the http-wasm build in it.
//
//	daprwasm -listen 127.0.0.1:0 -upstream http://127.0.0.1:3001 -wasm FILE -config FILE
//
// It prints "listening on ADDR" once it serves; a guest the middleware refuses ends it
// with status 2 and the middleware's error.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"

	"github.com/dapr/components-contrib/metadata"
	"github.com/dapr/components-contrib/middleware"
	"github.com/dapr/components-contrib/middleware/http/wasm"
	"github.com/dapr/kit/logger"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	upstream := flag.String("upstream", "", "the upstream's origin")
	module := flag.String("wasm", "", "the guest module")
	config := flag.String("config", "", "a file holding the guest configuration (guestConfig)")
	flag.Parse()
	cfg, err := os.ReadFile(*config)
	if err != nil {
		fail(err)
	}
	u, err := url.Parse(*upstream)
	if err != nil || u.Host == "" {
		fail(fmt.Errorf("-upstream: %q is not an origin", *upstream))
	}
	log := logger.NewLogger("daprwasm")
	log.SetOutputLevel(logger.DebugLevel)
	mw := wasm.NewMiddleware(log)
	h, err := mw.GetHandler(context.Background(), middleware.Metadata{Base: metadata.Base{
		Name:       "stategate",
		Properties: map[string]string{"url": "file://" + *module, "guestConfig": string(cfg)},
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "daprwasm: the wasm middleware refused the guest:", err)
		os.Exit(2)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		fail(err)
	}
	fmt.Println("listening on", l.Addr().String())
	fail(http.Serve(l, h(httputil.NewSingleHostReverseProxy(u))))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "daprwasm:", err)
	os.Exit(1)
}
