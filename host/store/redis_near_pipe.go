package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// nearConn is the near cache's tracking connection: one RESP3 connection with client
// tracking (CLIENT TRACKING ON OPTIN), its read loop, and its own cache (nearCache).
//
// # Notes
//
//   - Commands are pipelined: a request (one or more commands) is queued and written under
//     one lock, so the queue is in the order of the wire, and the read loop hands each reply
//     to the oldest request still waiting, in order.
//   - The read loop applies everything the server sends in the order it was sent: an
//     invalidation push to the cache before the replies after it, a fill (a cached read's
//     reply) to the cache before the messages after it. So once a reply has come back,
//     every invalidation the server wrote before it has been applied; and the loop being
//     ours, it says when nothing it read is left unapplied (trackedConn.atBoundary).
//   - A cached read (fill) is CLIENT CACHING YES, then MULTI, PTTL key, GET key, EXEC: the
//     server tracks the key for this connection from the GET on, and the entry lives until
//     the key's expiry (PTTL from the send) or the store's idle TTL, whichever is sooner.
//     Other commands are not tracked (OPTIN).
//   - Any failure (a read or write error, a malformed message, a reply nobody waits for)
//     closes the connection and fails every request waiting on it; its cache goes with it,
//     and near dials a new connection, which starts with an empty cache.
type nearConn struct {
	tc           *trackedConn
	cache        *nearCache
	ttl          time.Duration // the store's idle TTL: an entry lives at most that long
	writeTimeout time.Duration

	wmu sync.Mutex // queues and writes a request as one step: the queue is the wire's order
	buf []byte

	qmu   sync.Mutex
	queue []*nearReq // written, waiting for replies, oldest first
	dead  error      // why the connection ended (nil: open)

	done     chan struct{} // closed when the read loop has ended
	lastRead atomic.Int64  // Unix nanoseconds of the last message read (keep-alive PING)
}

// nearCmd is one command of a request; fill names the key whose EXEC reply it is when the
// command ends a cached read.
type nearCmd struct {
	args []string
	fill string
}

// nearReq is a request waiting for its replies.
type nearReq struct {
	cmds    []nearCmd
	sent    time.Time
	replies []respValue
	pxat    []int64 // per reply: a fill's entry expiry (Unix ms; 0: none)
	err     error
	done    chan struct{}
}

// nearCacheSize bounds each tracking connection's cache, in bytes.
const nearCacheSize = 32 << 20

// fillCmds is a cached read of key.
func fillCmds(key string) []nearCmd {
	return []nearCmd{
		{args: []string{"CLIENT", "CACHING", "YES"}},
		{args: []string{"MULTI"}},
		{args: []string{"PTTL", key}},
		{args: []string{"GET", key}},
		{args: []string{"EXEC"}, fill: key},
	}
}

// fillsPerKey is the number of commands (and replies) of one fill.
const fillsPerKey = 5

// nearHello is what the near cache's connection says first.
type nearHello struct {
	user, password string
	db             int
	name           string
}

// startNearConn runs the read loop on tc and says hello: HELLO 3 (with AUTH and SETNAME),
// SELECT, CLIENT TRACKING ON OPTIN, in one round trip.
func startNearConn(ctx context.Context, tc *trackedConn, h nearHello, ttl, writeTimeout time.Duration, ping bool) (*nearConn, error) {
	c := &nearConn{
		tc:           tc,
		cache:        newNearCache(nearCacheSize),
		ttl:          ttl,
		writeTimeout: writeTimeout,
		done:         make(chan struct{}),
	}
	c.lastRead.Store(time.Now().UnixNano())
	go c.loop()
	hello := []string{"HELLO", "3"}
	switch {
	case h.user != "":
		hello = append(hello, "AUTH", h.user, h.password)
	case h.password != "":
		hello = append(hello, "AUTH", "default", h.password)
	}
	if h.name != "" {
		hello = append(hello, "SETNAME", h.name)
	}
	cmds := []nearCmd{{args: hello}}
	if h.db != 0 {
		cmds = append(cmds, nearCmd{args: []string{"SELECT", strconv.Itoa(h.db)}})
	}
	cmds = append(cmds, nearCmd{args: []string{"CLIENT", "TRACKING", "ON", "OPTIN"}})
	req, err := c.do(ctx, cmds)
	if err == nil {
		err = req.firstError()
	}
	if err == nil && req.replies[0].kind != '%' {
		err = errors.New("HELLO 3: not a RESP3 server")
	}
	if err != nil {
		c.fail(err)
		return nil, err
	}
	if ping {
		go c.keepAlive()
	}
	return c, nil
}

// do sends cmds as one write and waits for their replies (or ctx). A reply that is a Redis
// error is a reply (firstError); err is the connection's or ctx's.
func (c *nearConn) do(ctx context.Context, cmds []nearCmd) (*nearReq, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req := &nearReq{
		cmds:    cmds,
		replies: make([]respValue, 0, len(cmds)),
		pxat:    make([]int64, len(cmds)),
		done:    make(chan struct{}),
	}
	c.wmu.Lock()
	c.qmu.Lock()
	if err := c.dead; err != nil {
		c.qmu.Unlock()
		c.wmu.Unlock()
		return nil, err
	}
	req.sent = time.Now()
	c.queue = append(c.queue, req)
	c.qmu.Unlock()
	c.buf = c.buf[:0]
	for _, cmd := range cmds {
		c.buf = appendCommand(c.buf, cmd.args...)
	}
	_ = c.tc.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	_, err := c.tc.Write(c.buf)
	if cap(c.buf) > 64<<10 {
		c.buf = nil
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("write: %w", err))
	}
	select {
	case <-req.done:
		return req, req.err
	case <-ctx.Done():
		return nil, ctx.Err() // its replies are read and dropped
	}
}

// firstError is the first reply that is a Redis error.
func (r *nearReq) firstError() error {
	for _, v := range r.replies {
		if err := v.err(); err != nil {
			return err
		}
	}
	return nil
}

// loop reads and applies what the server sends until the connection fails.
func (c *nearConn) loop() {
	defer close(c.done)
	rd := newRESPReader(c.tc)
	c.tc.atBoundary() // nothing read yet
	for {
		v, err := rd.read()
		if err != nil {
			c.fail(fmt.Errorf("read: %w", err))
			return
		}
		c.lastRead.Store(time.Now().UnixNano())
		for _, p := range rd.pushes {
			c.push(p)
		}
		// Once v is applied, every whole message read has been, unless more is buffered.
		boundary := rd.br.Buffered() == 0
		if v.kind == '>' {
			c.push(v)
			if boundary {
				c.tc.atBoundary()
			}
			continue
		}
		if err := c.reply(v, boundary); err != nil {
			c.fail(err)
			return
		}
	}
}

// push applies a push message: an invalidation of keys, or of every key (a null, on
// FLUSHALL and FLUSHDB). Other pushes are not for the near cache.
func (c *nearConn) push(p respValue) {
	if len(p.elems) != 2 || string(p.elems[0].str) != "invalidate" {
		return
	}
	switch keys := p.elems[1]; keys.kind {
	case '_':
		c.cache.flush()
	case '*', '~':
		for _, k := range keys.elems {
			c.cache.invalidate(string(k.str))
		}
	}
}

// reply hands v to the oldest waiting request, after caching it when it ends a fill and
// marking the boundary when nothing more is buffered: a read that follows the reply finds
// the connection caught up without waiting for the loop to get back to its socket.
func (c *nearConn) reply(v respValue, boundary bool) error {
	c.qmu.Lock()
	if len(c.queue) == 0 {
		c.qmu.Unlock()
		return fmt.Errorf("%w: a reply no command waits for (%c)", errRESP, v.kind)
	}
	req := c.queue[0]
	c.qmu.Unlock()
	i := len(req.replies)
	if key := req.cmds[i].fill; key != "" {
		req.pxat[i] = c.fill(key, v, req.sent)
	}
	req.replies = append(req.replies, v)
	if boundary {
		c.tc.atBoundary()
	}
	if len(req.replies) < len(req.cmds) {
		return nil
	}
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.dead != nil {
		return nil // fail has taken the queue and ended req
	}
	c.queue[0] = nil
	c.queue = c.queue[1:]
	close(req.done)
	return nil
}

// fill caches a fill's EXEC reply ([PTTL, GET]) for key, and returns the entry's expiry.
func (c *nearConn) fill(key string, exec respValue, sent time.Time) int64 {
	if exec.kind != '*' || len(exec.elems) != 2 {
		return 0 // aborted (null) or failed: nothing cached
	}
	pttl, get := exec.elems[0], exec.elems[1]
	if pttl.kind != ':' || get.kind != '$' && get.kind != '_' {
		return 0 // an error in the transaction (WRONGTYPE, say)
	}
	var pxat int64
	if c.ttl > 0 {
		pxat = sent.Add(c.ttl).UnixMilli()
	}
	if pttl.num >= 0 {
		if at := sent.Add(time.Duration(pttl.num) * time.Millisecond).UnixMilli(); pxat == 0 || at < pxat {
			pxat = at
		}
	}
	var val []byte
	if get.kind == '$' {
		val = get.str
	}
	c.cache.put(key, val, pxat)
	return pxat
}

// fail ends the connection (the first error is kept) and every request waiting on it.
func (c *nearConn) fail(err error) {
	c.qmu.Lock()
	if c.dead != nil {
		c.qmu.Unlock()
		return
	}
	c.dead = err
	queue := c.queue
	c.queue = nil
	c.qmu.Unlock()
	_ = c.tc.Close()
	c.cache.flush()
	for _, req := range queue {
		req.err = err
		close(req.done)
	}
}

// broken reports whether the connection has ended.
func (c *nearConn) broken() bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.dead != nil
}

// close ends the connection.
func (c *nearConn) close() { c.fail(errors.New("near cache: closed")) }

// keepAlive sends a PING after each second without input, and ends the connection when
// its reply does not come within the write timeout: the liveness check where TCP
// keep-alive cannot be tuned per socket (tunedKeepAlive false).
func (c *nearConn) keepAlive() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, c.lastRead.Load())) < time.Second {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.writeTimeout)
		_, err := c.do(ctx, []nearCmd{{args: []string{"PING"}}})
		cancel()
		if err != nil {
			c.fail(fmt.Errorf("keep-alive PING: %w", err))
			return
		}
	}
}
