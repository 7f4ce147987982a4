package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/exchangetest"
)

// TestHost_slowClientIsCutOff: a client that sends its body slower than the body timeout
// is answered 400 and its connection closed; one that sends its headers slower than the
// header timeout has its connection closed. Neither holds a connection for ever.
func TestHost_slowClientIsCutOff(t *testing.T) {
	module := loadModule(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}))
	defer up.Close()
	h, err := New(context.Background(), Options{Module: module, Config: exchangetest.Config("sample.json"), Upstream: up.URL + "/mcp",
		BodyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer("", h, 200*time.Millisecond)
	go srv.Serve(ln)
	defer srv.Close()
	addr := ln.Addr().String()

	t.Run("body", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":", addr)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		rd := bufio.NewReader(conn)
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatalf("no answer to a stalled body: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("stalled body: status %d, want 400", resp.StatusCode)
		}
		if _, err := rd.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("the connection of a stalled body stays open: %v", err)
		}
	})
	t.Run("headers", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\n", addr) // and nothing more
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadAll(conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("a client stalled in its headers still holds its connection after 10 s")
		}
	})
}
