package gateway_test

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// The floor rows of BenchmarkGatewayPaths: the memory store's moving call (the row
// tools_call/gateway_gated_memory) with one bare round trip added to each call, made by
// the upstream's handler, so the same run shows what a round trip alone costs here,
// whatever a store would do with it:
//
//	floor_rt_redis            a PING to the redis-server of the Redis rows, awaited
//	                          before the answer (a write that must be durable first)
//	floor_rt_redis_overlap    the same PING sent as the request arrives and awaited before
//	                          the answer (a write overlapped with the upstream call)
//	floor_rt_redis_unawaited  the same PING sent as the answer goes, never awaited (a
//	                          write after the answer: not durable when it is acknowledged)
//	floor_rt_loopback         a round trip to a server in this process, awaited (the same
//	                          sockets without another process to wake)
//
// The PINGs go over one raw connection (RESP by hand): no client library's cost is in them.

type floorMode int

const (
	floorAwaited floorMode = iota
	floorOverlap
	floorUnawaited
)

// pinger makes PING round trips on one connection, one at a time, and counts the PONGs.
type pinger struct {
	mu    sync.Mutex
	conn  net.Conn
	r     *bufio.Reader
	pongs atomic.Int64
	err   atomic.Value // the first error, as an error
}

func newPinger(b *testing.B, addr string) *pinger {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return &pinger{conn: c, r: bufio.NewReader(c)}
}

func (p *pinger) ping() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.conn.Write([]byte("PING\r\n")); err != nil {
		p.err.CompareAndSwap(nil, err)
		return
	}
	line, err := p.r.ReadString('\n')
	if err != nil || line != "+PONG\r\n" {
		p.err.CompareAndSwap(nil, errors.Join(err, errors.New("reply "+line)))
		return
	}
	p.pongs.Add(1)
}

// check fails b unless every call made its round trip (init's calls included: at least
// requests) and none failed.
func (p *pinger) check(b *testing.B, name string, requests int) {
	if err, _ := p.err.Load().(error); err != nil {
		b.Fatalf("%s: a round trip failed: %v", name, err)
	}
	if n := p.pongs.Load(); n < int64(requests) {
		b.Fatalf("%s: %d round trips for %d calls", name, n, requests)
	}
}

// floorUpstream wraps an upstream so that each request makes one round trip with p, as mode
// says (the rows' timed requests are all tools/call).
func floorUpstream(h http.Handler, p *pinger, mode floorMode) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode {
		case floorAwaited:
			p.ping()
			h.ServeHTTP(w, r)
		case floorOverlap:
			done := make(chan struct{})
			go func() { p.ping(); close(done) }()
			h.ServeHTTP(w, r)
			<-done
		case floorUnawaited:
			h.ServeHTTP(w, r)
			go p.ping()
		}
	})
}

// echoServer answers every line with +PONG, in this process; it returns its address.
func echoServer(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					if _, err := c.Write([]byte("+PONG\r\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}
