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
	flag.Parse()
	wasm, err := os.ReadFile(*module)
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := os.ReadFile(*config)
	if err != nil {
		log.Fatal(err)
	}
	h, err := New(context.Background(), Options{Module: wasm, Config: cfg, Upstream: *upstream})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe(*listen, h))
}
