//go:build unix

package store

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeRedis is one scripted server connection for nearConn: the test reads the commands it
// is sent and writes what it answers, byte for byte, in the segments it chooses.
type fakeRedis struct {
	t    *testing.T
	conn net.Conn
	rd   *respReader
}

// newFakeRedis connects a nearConn (idle TTL ttl) to a scripted server and answers its
// hello.
func newFakeRedis(t *testing.T, ttl time.Duration) (*fakeRedis, *nearConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *fakeRedis, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		f := &fakeRedis{t: t, conn: c, rd: newRESPReader(c)}
		hello := f.commands(2)
		if hello[0] != "HELLO 3 SETNAME stategate-near" || hello[1] != "CLIENT TRACKING ON OPTIN" {
			t.Errorf("hello: %q", hello)
		}
		f.send("%1\r\n+proto\r\n:3\r\n+OK\r\n")
		accepted <- f
	}()
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc, err := newTrackedConn(c.(*net.TCPConn))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nc, err := startNearConn(ctx, tc, nearHello{name: "stategate-near"}, ttl, 3*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	f := <-accepted
	if f == nil {
		t.Fatal("no connection accepted")
	}
	t.Cleanup(func() { nc.close(); f.conn.Close() })
	return f, nc
}

// commands reads n commands, each as its arguments joined by spaces.
func (f *fakeRedis) commands(n int) []string {
	f.t.Helper()
	out := make([]string, n)
	for i := range out {
		v, err := f.rd.read()
		if err != nil {
			f.t.Errorf("server read: %v", err)
			return out
		}
		args := make([]string, len(v.elems))
		for j, a := range v.elems {
			args[j] = string(a.str)
		}
		out[i] = strings.Join(args, " ")
	}
	return out
}

func (f *fakeRedis) send(s string) {
	f.t.Helper()
	if _, err := f.conn.Write([]byte(s)); err != nil {
		f.t.Errorf("server write: %v", err)
	}
}

// fillReply answers a fill (CLIENT CACHING YES, MULTI, PTTL, GET, EXEC) with the value v
// ("" with null: absent) and pttl.
func fillReply(pttl, v string, null bool) string {
	get := "$" + strconv.Itoa(len(v)) + "\r\n" + v + "\r\n"
	if null {
		get = "_\r\n"
	}
	return "+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:" + pttl + "\r\n" + get
}

func invalidate(keys ...string) string {
	s := ">2\r\n$10\r\ninvalidate\r\n*" + strconv.Itoa(len(keys)) + "\r\n"
	for _, k := range keys {
		s += "$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n"
	}
	return s
}

const flushAll = ">2\r\n$10\r\ninvalidate\r\n_\r\n"

// fill runs a fill of key on nc, answered by f with script (the fill's replies and
// whatever the server sends around them), and returns the fill's request.
func fill(t *testing.T, f *fakeRedis, nc *nearConn, key, script string) *nearReq {
	t.Helper()
	type result struct {
		req *nearReq
		err error
	}
	done := make(chan result, 1)
	go func() {
		req, err := nc.do(context.Background(), fillCmds(key))
		done <- result{req, err}
	}()
	got := f.commands(fillsPerKey)
	if want := "CLIENT CACHING YES|MULTI|PTTL " + key + "|GET " + key + "|EXEC"; strings.Join(got, "|") != want {
		t.Fatalf("fill sent %q, want %q", got, want)
	}
	f.send(script)
	r := <-done
	if r.err != nil {
		t.Fatalf("fill: %v", r.err)
	}
	return r.req
}

// ping sends a PING on nc, answered by f with script.
func ping(t *testing.T, f *fakeRedis, nc *nearConn, script ...string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := nc.do(context.Background(), []nearCmd{{args: []string{"PING"}}})
		done <- err
	}()
	if got := f.commands(1); got[0] != "PING" {
		t.Fatalf("sent %q, want PING", got)
	}
	for _, s := range script {
		f.send(s)
		time.Sleep(time.Millisecond) // each in its own segment
	}
	if err := <-done; err != nil {
		t.Fatalf("ping: %v", err)
	}
}

func cached(nc *nearConn, key string) (string, bool) {
	v, _, ok := nc.cache.get(key, time.Now())
	return string(v), ok
}

// settle waits until the connection has applied all it was sent (at most a second).
func settle(t *testing.T, nc *nearConn) {
	t.Helper()
	for end := time.Now().Add(time.Second); !nc.tc.settled(); {
		if time.Now().After(end) {
			t.Fatal("never settled")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// TestNearConn_invalidationBeforeReply: an invalidation the server sent before a reply is
// applied before the reply is handed over, whether it came in the reply's segment, in one
// of its own, or split across segments.
func TestNearConn_invalidationBeforeReply(t *testing.T) {
	f, nc := newFakeRedis(t, time.Hour)
	inv := invalidate("k")
	for _, script := range [][]string{
		{inv + "+PONG\r\n"},
		{inv, "+PONG\r\n"},
		{inv[:7], inv[7:20], inv[20:] + "+PO", "NG\r\n"},
	} {
		fill(t, f, nc, "k", fillReply("-1", "v1", false))
		if v, ok := cached(nc, "k"); !ok || v != "v1" {
			t.Fatalf("after the fill: %q %v", v, ok)
		}
		ping(t, f, nc, script...)
		if v, ok := cached(nc, "k"); ok {
			t.Fatalf("segments %q: %q still cached after the reply that followed its invalidation", script, v)
		}
	}
}

// TestNearConn_fillThenInvalidation: a fill's reply is cached before what follows it is
// applied, so an invalidation right behind it (a write after the GET ran) removes it; an
// invalidation before it (a write before the GET ran, whose value the GET read) does not.
func TestNearConn_fillThenInvalidation(t *testing.T) {
	f, nc := newFakeRedis(t, time.Hour)
	fill(t, f, nc, "k", fillReply("-1", "old", false)+invalidate("k"))
	ping(t, f, nc, "+PONG\r\n")
	if v, ok := cached(nc, "k"); ok {
		t.Fatalf("%q cached after its invalidation", v)
	}
	fill(t, f, nc, "k", invalidate("k")+fillReply("-1", "new", false))
	ping(t, f, nc, "+PONG\r\n")
	if v, ok := cached(nc, "k"); !ok || v != "new" {
		t.Fatalf("the fill after an invalidation: %q %v, want new", v, ok)
	}
	// An absent key is cached as absent.
	fill(t, f, nc, "gone", fillReply("-2", "", true))
	if v, ok := cached(nc, "gone"); !ok || v != "" {
		t.Fatalf("absent key: %q %v", v, ok)
	}
}

// TestNearConn_flushAll: the invalidation with a null (FLUSHALL, FLUSHDB) empties the cache.
func TestNearConn_flushAll(t *testing.T) {
	f, nc := newFakeRedis(t, time.Hour)
	fill(t, f, nc, "a", fillReply("-1", "1", false))
	fill(t, f, nc, "b", fillReply("-1", "2", false))
	ping(t, f, nc, flushAll+"+PONG\r\n")
	if n := nc.cache.len(); n != 0 {
		t.Fatalf("%d entries after a flush-all invalidation", n)
	}
}

// TestNearConn_invalidationBetweenCommands: an invalidation that comes while no command
// waits is applied by the read loop on its own, and the connection is not settled until
// it has been, also when it comes in pieces.
func TestNearConn_invalidationBetweenCommands(t *testing.T) {
	f, nc := newFakeRedis(t, time.Hour)
	for i := range 200 {
		fill(t, f, nc, "k", fillReply("-1", "v", false))
		settle(t, nc)
		inv := invalidate("k")
		cut := 1 + i%(len(inv)-1)
		f.send(inv[:cut]) // on the socket once the write returns (loopback)
		if i%2 == 0 {
			time.Sleep(200 * time.Microsecond) // the loop holds a piece of a message
			if nc.tc.settled() {
				t.Fatalf("round %d: settled with %d bytes of an invalidation read", i, cut)
			}
		}
		f.send(inv[cut:])
		settle(t, nc)
		if v, ok := cached(nc, "k"); ok {
			t.Fatalf("round %d: settled, and %q still cached after its invalidation", i, v)
		}
	}
}

// TestNearConn_pushInsideReply: an invalidation inside a transaction's reply (Redis 6) is
// applied, and the reply keeps its shape.
func TestNearConn_pushInsideReply(t *testing.T) {
	f, nc := newFakeRedis(t, time.Hour)
	fill(t, f, nc, "a", fillReply("-1", "1", false))
	req := fill(t, f, nc, "b", "+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:-1\r\n"+invalidate("a")+"$1\r\n2\r\n")
	if exec := req.replies[4]; len(exec.elems) != 2 || string(exec.elems[1].str) != "2" {
		t.Fatalf("EXEC reply %+v", exec)
	}
	if _, ok := cached(nc, "a"); ok {
		t.Fatal("a still cached")
	}
	if v, ok := cached(nc, "b"); !ok || v != "2" {
		t.Fatalf("b: %q %v", v, ok)
	}
}

// TestNearConn_expiry: an entry lives until the key's PTTL from the send, or the idle TTL,
// whichever is sooner.
func TestNearConn_expiry(t *testing.T) {
	f, nc := newFakeRedis(t, time.Hour)
	before := time.Now()
	req := fill(t, f, nc, "k", fillReply("50", "v", false))
	after := time.Now()
	pxat := req.pxat[4]
	if pxat < before.Add(50*time.Millisecond).UnixMilli() || pxat > after.Add(50*time.Millisecond).UnixMilli() {
		t.Fatalf("pxat %d, want the send + 50 ms", pxat)
	}
	if _, ok := cached(nc, "k"); !ok {
		t.Fatal("not cached")
	}
	time.Sleep(time.Until(time.UnixMilli(pxat)) + time.Millisecond)
	if _, ok := cached(nc, "k"); ok {
		t.Fatal("served past the key's expiry")
	}
	req = fill(t, f, nc, "k", fillReply("-1", "v", false)) // no expiry: the idle TTL
	if got := time.Until(time.UnixMilli(req.pxat[4])); got < 59*time.Minute || got > time.Hour {
		t.Fatalf("no PTTL: entry for %v, want the idle TTL (1h)", got)
	}
}

// TestNearConn_failure: a reply nobody waits for is a protocol error: the connection ends,
// is never settled again, and fails what waits on it; so does an end of stream.
func TestNearConn_failure(t *testing.T) {
	f, nc := newFakeRedis(t, time.Hour)
	fill(t, f, nc, "k", fillReply("-1", "v", false))
	f.send("+OK\r\n")
	select {
	case <-nc.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the read loop did not end on a stray reply")
	}
	if !nc.broken() || nc.tc.settled() || nc.cache.len() != 0 {
		t.Fatalf("broken %v settled %v entries %d", nc.broken(), nc.tc.settled(), nc.cache.len())
	}
	if _, err := nc.do(context.Background(), []nearCmd{{args: []string{"PING"}}}); err == nil {
		t.Fatal("a command on an ended connection succeeded")
	}

	f, nc = newFakeRedis(t, time.Hour)
	done := make(chan error, 1)
	go func() {
		_, err := nc.do(context.Background(), []nearCmd{{args: []string{"PING"}}})
		done <- err
	}()
	f.commands(1)
	f.conn.Close()
	if err := <-done; err == nil {
		t.Fatal("a command waiting on a closed connection succeeded")
	}
	if nc.tc.settled() {
		t.Fatal("settled after an end of stream")
	}
}

// TestNearCache_bounded: the cache keeps at most its size in bytes, least recently used
// out first, and never a value larger than itself.
func TestNearCache_bounded(t *testing.T) {
	c := newNearCache(10 * (nearEntryOverhead + 2))
	for i := range 20 {
		c.put(strconv.Itoa(i%10)+"k", []byte("v"), 0) // each costs overhead + 3
	}
	if c.size > c.max || c.len() > 10 {
		t.Fatalf("size %d of %d, %d entries", c.size, c.max, c.len())
	}
	if _, _, ok := c.get("9k", time.Now()); !ok {
		t.Fatal("the most recent entry was evicted")
	}
	c.put("big", make([]byte, c.max), 0)
	if _, _, ok := c.get("big", time.Now()); ok {
		t.Fatal("a value larger than the cache was kept")
	}
	c.invalidate("9k")
	if _, _, ok := c.get("9k", time.Now()); ok {
		t.Fatal("invalidated entry served")
	}
}
