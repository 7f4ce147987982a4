package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"os"
)

func main() {
	module := flag.String("module", "build/stategate-exchange.wasm", "the exchange module")
	config := flag.String("config", "stategate.yaml", "the stategate configuration")
	upstream := flag.String("upstream", "http://127.0.0.1:3000/mcp", "the MCP server")
	listen := flag.String("listen", "127.0.0.1:8080", "where clients connect")
	public := flag.String("public-url", "", "the origin clients reach this host at (default http:// and -listen): OAuth discovery names it")
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
		*public = "http://" + *listen
	}
	h, err := New(context.Background(), Options{Module: wasm, Config: cfg, Upstream: *upstream, PublicURL: *public})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe(*listen, h))
}
