package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// near is a Redis store's near cache: values read through one RESP3 connection with client
// tracking (OPTIN; nearConn, the project's own), kept coherent by the server's
// invalidations, so a warm read costs no round trip. It serves GetNear only; every other
// operation of the store goes through go-redis as before, and never reads it.
//
// # Notes
//
//   - One connection: invalidations and replies come in the order the server sent them,
//     and the server sends a key's invalidation while it runs the write, before it answers
//     any later command on that connection. So once a reply to a command sent after a
//     write has come back on it, no entry the write made stale is left: the read loop
//     applies invalidations, and caches fills, before the messages after them.
//   - This store's own writes go through go-redis connections, whose acknowledgement does
//     not order them with the tracking connection. A key is marked dirty from before its
//     write is sent until a read sent through the tracking connection after the write was
//     acknowledged has come back (fresh, not from the cache): a dirty key is read that way,
//     one round trip that also orders every invalidation before it. So a read that starts
//     after this store's write of a key returned never gets a value older than that write.
//   - A hit needs the connection to have applied all the server delivered and to be open
//     (trackedConn.settled: the read loop at a message boundary, having applied every
//     whole message it read, and the socket peeked empty), else the keys are read past
//     the cache.
//   - A broken connection drops its cache with it (every connection has its own); a new
//     connection starts empty, so an invalidation lost with the old one cannot leave a
//     stale entry. A kill's end of stream fails caughtUp at once.
//   - A dead server or link is found by TCP keep-alive probes (on Linux: a second idle,
//     then three a second apart: about four seconds, as a PING with a 3 s timeout found
//     it, which other systems keep: nearConn.keepAlive),
//     which the server's kernel answers without sending the connection any data, and, as
//     no probe goes while sent data is unacknowledged, by TCP_USER_TIMEOUT (4 s) then. A
//     server that is up but stalled is not found (the PING found it), and needs not be: it
//     runs no write, so nothing it holds in the cache goes stale meanwhile (a stalled TCP
//     proxy in front of it, acknowledging for it, is not found either).
//   - Reads from the cache do not refresh a key's idle TTL on the server. An entry whose
//     key would expire within half the idle TTL is read again with GETEX (one round trip,
//     which refreshes it), so a key read often enough stays, as with Get.
type near struct {
	watch *connWatch    // the tracking connections' sockets (the newest: watch.cur)
	ttl   time.Duration // the store's idle TTL
	trips *atomic.Uint64

	addr         string
	dialer       net.Dialer
	hello        nearHello
	writeTimeout time.Duration

	dialMu sync.Mutex               // one dial at a time
	cur    atomic.Pointer[nearConn] // the tracking connection (nil: none yet, or closed)
	closed bool                     // under dialMu

	mu    sync.Mutex
	dirty map[string]*dirtyKey // value keys written by this store and not read fresh since

	pruning atomic.Bool
}

// dirtyKey is one key's writes in flight (inflight) and a count that changes whenever one
// begins or ends (epoch), so a fresh read can tell whether a write overlapped it.
type dirtyKey struct {
	inflight int
	epoch    uint64
}

// nearMaxDirty bounds the dirty keys kept: past it, a fence (PING on the tracking
// connection) clears the keys whose writes ended before it.
const nearMaxDirty = 4096

// newNear connects the tracking connection to the server ro names.
func newNear(ctx context.Context, ro *redis.Options, ttl time.Duration, trips *atomic.Uint64) (*near, error) {
	n := &near{
		watch:        &connWatch{},
		ttl:          ttl,
		trips:        trips,
		addr:         ro.Addr,
		dialer:       netDialer(ro),
		hello:        nearHello{user: ro.Username, password: ro.Password, db: ro.DB, name: "stategate-near"},
		writeTimeout: max(ro.WriteTimeout, ro.ReadTimeout, 3*time.Second),
		dirty:        map[string]*dirtyKey{},
	}
	if _, err := n.conn(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// netDialer is the tracking connection's dialer. Where TCP keep-alive can be tuned per
// socket (tunedKeepAlive), its KeepAlive is negative (the dial sets keepAliveConfig
// instead), and the connection sends no keep-alive PING: the PING's reply was the only
// thing a quiet server sent on the connection, and a warm read that met it in the socket
// could not tell it from an invalidation (see trackedConn.settled). Elsewhere the PING
// stays.
func netDialer(ro *redis.Options) net.Dialer {
	d := net.Dialer{Timeout: ro.DialTimeout}
	if d.Timeout <= 0 {
		d.Timeout = 5 * time.Second
	}
	if tunedKeepAlive {
		d.KeepAlive = -1
	}
	return d
}

// conn returns the open tracking connection, dialing a new one (empty cache) when there is
// none or it has ended.
func (n *near) conn(ctx context.Context) (*nearConn, error) {
	if c := n.cur.Load(); c != nil && !c.broken() {
		return c, nil
	}
	n.dialMu.Lock()
	defer n.dialMu.Unlock()
	if n.closed {
		return nil, errors.New("near cache: closed")
	}
	if c := n.cur.Load(); c != nil && !c.broken() {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.dialer.Timeout)
	defer cancel()
	tc, err := n.watch.dial(ctx, n.addr, &n.dialer)
	if err != nil {
		return nil, err
	}
	c, err := startNearConn(ctx, tc, n.hello, n.ttl, n.writeTimeout, !tunedKeepAlive)
	if err != nil {
		return nil, err
	}
	n.cur.Store(c)
	return c, nil
}

// writing marks vk dirty before a write of it is sent; the function it returns marks the
// write's end (acknowledged or failed: either way it may have run).
func (n *near) writing(vk string) func() {
	n.mu.Lock()
	d := n.dirty[vk]
	if d == nil {
		d = &dirtyKey{}
		n.dirty[vk] = d
	}
	d.inflight++
	d.epoch++
	many := len(n.dirty) > nearMaxDirty
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		d.inflight--
		d.epoch++
		n.mu.Unlock()
		if many && n.pruning.CompareAndSwap(false, true) {
			go n.prune()
		}
	}
}

// prune clears the dirty keys whose writes ended before a fence on the tracking
// connection: its reply comes after their invalidations.
func (n *near) prune() {
	defer n.pruning.Store(false)
	n.mu.Lock()
	seen := make(map[string]uint64, len(n.dirty))
	for k, d := range n.dirty {
		if d.inflight == 0 {
			seen[k] = d.epoch
		}
	}
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n.fence(ctx) != nil {
		return
	}
	n.mu.Lock()
	for k, e := range seen {
		if d := n.dirty[k]; d != nil && d.inflight == 0 && d.epoch == e {
			delete(n.dirty, k)
		}
	}
	n.mu.Unlock()
}

// fence returns once every invalidation the server sent before it has been applied.
func (n *near) fence(ctx context.Context) error {
	c, err := n.conn(ctx)
	if err != nil {
		return err
	}
	n.trips.Add(1)
	req, err := c.do(ctx, []nearCmd{{args: []string{"PING"}}})
	if err != nil {
		return err
	}
	return req.firstError()
}

// get reads vks (nil: absent): each from the cache when it is clean and warm; the rest
// with one round trip on the tracking connection for the misses of clean keys and one for
// the dirty keys.
func (n *near) get(ctx context.Context, vks []string) ([][]byte, error) {
	out := make([][]byte, len(vks))
	var clean, dirty []int
	var marks []*dirtyKey
	var epochs []uint64
	// Before any hit: the tracking connection must have applied all it was sent and be
	// open, else every key is read past the cache (whose reply orders what is pending).
	c := n.cur.Load()
	hits := c != nil && c.tc.settled()
	n.mu.Lock()
	for i, vk := range vks {
		if d := n.dirty[vk]; d != nil || !hits {
			var e uint64
			if d != nil {
				e = d.epoch
			}
			dirty, marks, epochs = append(dirty, i), append(marks, d), append(epochs, e)
		} else {
			clean = append(clean, i)
		}
	}
	n.mu.Unlock()
	var refresh []int
	if len(clean) > 0 {
		now := time.Now()
		var missed []int
		for _, i := range clean {
			v, pxat, ok := c.cache.get(vks[i], now)
			if !ok {
				missed = append(missed, i)
				continue
			}
			if v != nil {
				out[i] = append([]byte{}, v...) // the cache's bytes are shared
			}
			if n.stale(pxat, now) {
				refresh = append(refresh, i)
			}
		}
		if len(missed) > 0 {
			cmds := make([]nearCmd, 0, len(missed)*fillsPerKey)
			for _, i := range missed {
				cmds = append(cmds, fillCmds(vks[i])...)
			}
			n.trips.Add(1)
			req, err := c.do(ctx, cmds)
			if err != nil {
				return nil, err
			}
			if err := req.firstError(); err != nil {
				return nil, err
			}
			now := time.Now()
			for j, i := range missed {
				k := j*fillsPerKey + fillsPerKey - 1
				exec := req.replies[k]
				if exec.kind != '*' || len(exec.elems) != 2 {
					return nil, fmt.Errorf("near cache: transaction aborted (%c)", exec.kind)
				}
				v := exec.elems[1]
				switch {
				case v.isError():
					return nil, v.err()
				case v.kind == '$':
					out[i] = append([]byte{}, v.str...)
				case v.kind != '_':
					return nil, fmt.Errorf("near cache: GET replied %c", v.kind)
				}
				if n.stale(req.pxat[k], now) {
					refresh = append(refresh, i)
				}
			}
		}
	}
	if len(dirty) > 0 || len(refresh) > 0 {
		cmds := make([]nearCmd, 0, len(dirty)+len(refresh))
		for _, i := range dirty {
			cmds = append(cmds, nearCmd{args: []string{"GET", vks[i]}})
		}
		px := strconv.FormatInt(max(n.ttl.Milliseconds(), 1), 10)
		for _, i := range refresh {
			cmds = append(cmds, nearCmd{args: []string{"GETEX", vks[i], "PX", px}})
		}
		n.trips.Add(1)
		req, err := n.do(ctx, cmds)
		if err != nil && ctx.Err() == nil {
			// A connection found dead (killed, reset): once more, on a new one.
			n.trips.Add(1)
			req, err = n.do(ctx, cmds)
		}
		if err != nil {
			return nil, err
		}
		for j, v := range req.replies {
			i := 0
			if j < len(dirty) {
				i = dirty[j]
			} else {
				i = refresh[j-len(dirty)]
			}
			switch {
			case v.isError():
				return nil, v.err()
			case v.kind == '_':
				out[i] = nil
			case v.kind == '$':
				out[i] = v.str
			default:
				return nil, fmt.Errorf("near cache: GET replied %c", v.kind)
			}
		}
		n.mu.Lock()
		for j, i := range dirty {
			if d := marks[j]; d != nil && n.dirty[vks[i]] == d && d.inflight == 0 && d.epoch == epochs[j] {
				delete(n.dirty, vks[i]) // every write of it ended before the read was sent
			}
		}
		n.mu.Unlock()
	}
	return out, nil
}

// stale reports whether an entry expiring at pxat should be read again with GETEX: its
// key would expire on the server within half the idle TTL.
func (n *near) stale(pxat int64, now time.Time) bool {
	return pxat > 0 && time.UnixMilli(pxat).Sub(now) < n.ttl/2
}

// do sends cmds on the tracking connection (a new one when it has ended).
func (n *near) do(ctx context.Context, cmds []nearCmd) (*nearReq, error) {
	c, err := n.conn(ctx)
	if err != nil {
		return nil, err
	}
	return c.do(ctx, cmds)
}

func (n *near) close() {
	n.dialMu.Lock()
	n.closed = true
	n.dialMu.Unlock()
	if c := n.cur.Load(); c != nil {
		c.close()
	}
}

// GetNear reads keys as GetMany does, from the near cache when the store has one (a
// single server, redis://): a key neither written by this store since it was cached nor
// invalidated by the server costs no round trip. Without a near cache it is GetMany.
//
// # Notes
//
//   - What it returns is never older than a write of this store that returned before it
//     was called (dirty marks), nor than anything the server had delivered to the tracking
//     connection (a hit needs caughtUp). Another store's write on the same server reaches
//     it before that write's acknowledgement leaves the server (the PING before every
//     script, see eval). Across machines an invalidation could still be in flight when a
//     causally later read begins: GetNear is for the admission of a call that moves
//     nothing, never for a read a write will be based on (LockLoad and the
//     compare-and-set's re-read use the server).
func (r *Redis) GetNear(ctx context.Context, keys []string) ([][]byte, error) {
	if r.near == nil {
		return r.GetMany(ctx, keys)
	}
	vks := make([]string, len(keys))
	for i, k := range keys {
		vks[i] = r.lay.valueKey(k)
	}
	out, err := r.near.get(ctx, vks)
	if err != nil {
		return nil, fmt.Errorf("store[redis] url[%s] keys[%q]: get (near): %w", r.name, keys, err)
	}
	return out, nil
}

// NearCache reports whether the store reads through a near cache.
func (r *Redis) NearCache() bool { return r.near != nil }
