package store

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// near is a Redis store's near cache: values read through one RESP3 connection with client
// tracking (rueidis, OPTIN), kept coherent by the server's invalidations, so a warm read
// costs no round trip. It serves GetNear only; every other operation of the store goes
// through go-redis as before, and never reads it.
//
// # Notes
//
//   - One connection (PipelineMultiplex -1): invalidations and replies come in the order
//     the server sent them, and the server sends a key's invalidation while it runs the
//     write, before it answers any later command on that connection. So once a reply to a
//     command sent after a write has come back on it, no entry the write made stale is
//     left. rueidis applies invalidations in its read loop, before the replies after them.
//   - This store's own writes go through go-redis connections, whose acknowledgement does
//     not order them with the tracking connection. A key is marked dirty from before its
//     write is sent until a read sent through the tracking connection after the write was
//     acknowledged has come back (fresh, not from the cache): a dirty key is read that way,
//     one round trip that also orders every invalidation before it. So a read that starts
//     after this store's write of a key returned never gets a value older than that write.
//   - A hit needs the connection to have applied all the server delivered and to be open
//     (watch.caughtUp: the read loop idle in our read syscall, the socket peeked empty),
//     else the keys are read past the cache. AlwaysPipelining keeps the read loop running
//     between commands (rueidis otherwise reads only while a command waits).
//   - A broken connection drops its cache with it (rueidis gives every connection its own
//     cache, closed when the connection is); a new connection starts empty, so an
//     invalidation lost with the old one cannot leave a stale entry. A kill's end of
//     stream fails caughtUp at once.
//   - A dead server or link is found by TCP keep-alive probes (on Linux: a second idle,
//     then three a second apart: about four seconds, as rueidis's PING with its 3 s
//     timeout found it, which other systems keep),
//     which the server's kernel answers without sending the connection any data, and, as
//     no probe goes while sent data is unacknowledged, by TCP_USER_TIMEOUT (4 s) then. A
//     server that is up but stalled is not found (the PING found it), and needs not be: it
//     runs no write, so nothing it holds in the cache goes stale meanwhile (a stalled TCP
//     proxy in front of it, acknowledging for it, is not found either).
//   - Reads from the cache do not refresh a key's idle TTL on the server. An entry whose
//     key would expire within half the idle TTL is read again with GETEX (one round trip,
//     which refreshes it), so a key read often enough stays, as with Get.
type near struct {
	client rueidis.Client
	watch  *connWatch    // the tracking connection, for caughtUp
	ttl    time.Duration // the store's idle TTL
	trips  *atomic.Uint64

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
	watch := &connWatch{}
	c, err := rueidis.NewClient(rueidis.ClientOption{
		DialCtxFn:         watch.dial,
		InitAddress:       []string{ro.Addr},
		Username:          ro.Username,
		Password:          ro.Password,
		SelectDB:          ro.DB,
		TLSConfig:         ro.TLSConfig,
		Dialer:            netDialer(ro),
		DisableTCPNoDelay: false,
		ConnWriteTimeout:  max(ro.WriteTimeout, ro.ReadTimeout, 3*time.Second),
		DisableRetry:      true, // a failed read is an error, as with go-redis (MaxRetries -1)
		PipelineMultiplex: -1,   // one connection: replies and invalidations in one order
		AlwaysPipelining:  true, // a read loop always running: invalidations applied as they come
		ForceSingleClient: true,
		CacheSizeEachConn: 32 << 20,
		BlockingPipeline:  1 << 30, // never a pooled connection of its own: order is the point
		ClientName:        "stategate-near",
	})
	if err != nil {
		return nil, err
	}
	n := &near{client: c, watch: watch, ttl: ttl, trips: trips, dirty: map[string]*dirtyKey{}}
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		c.Close()
		return nil, err
	}
	return n, nil
}

// netDialer is the tracking connection's dialer. Where TCP keep-alive can be tuned per
// socket (tunedKeepAlive), its KeepAlive is negative, which turns rueidis's keep-alive
// PING off (it sends one after each second without input): the PING's reply was the only
// thing a quiet server sent on the connection, and a warm read that met it in the socket
// could not tell it from an invalidation (see caughtUp). The liveness it gave is TCP's
// instead (connWatch.dial: keepAliveConfig). Elsewhere the PING stays.
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
	n.trips.Add(1)
	return n.client.Do(ctx, n.client.B().Ping().Build()).Error()
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
	hits := n.watch.caughtUp()
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
	c := n.client
	var refresh []int
	if len(clean) > 0 {
		cmds := make([]rueidis.CacheableTTL, len(clean))
		for j, i := range clean {
			cmds[j] = rueidis.CT(c.B().Get().Key(vks[i]).Cache(), n.ttl)
		}
		missed := false
		for j, res := range c.DoMultiCache(ctx, cmds...) {
			missed = missed || !res.IsCacheHit()
			v, err := res.AsBytes()
			switch {
			case rueidis.IsRedisNil(err):
				continue
			case err != nil:
				return nil, err
			}
			out[clean[j]] = append([]byte{}, v...) // the cache's bytes are shared
			if pxat := res.CachePXAT(); pxat > 0 && time.Until(time.UnixMilli(pxat)) < n.ttl/2 {
				refresh = append(refresh, clean[j]) // refresh the idle TTL on the server
			}
		}
		if missed {
			n.trips.Add(1)
		}
	}
	if len(dirty) > 0 || len(refresh) > 0 {
		cmds := make([]rueidis.Completed, 0, len(dirty)+len(refresh))
		for _, i := range dirty {
			cmds = append(cmds, c.B().Get().Key(vks[i]).Build())
		}
		for _, i := range refresh {
			cmds = append(cmds, c.B().Getex().Key(vks[i]).PxMilliseconds(max(n.ttl.Milliseconds(), 1)).Build())
		}
		n.trips.Add(1)
		results := c.DoMulti(ctx, cmds...)
		if results[0].NonRedisError() != nil && ctx.Err() == nil {
			// A connection found dead (killed, reset): once more, on a new one.
			n.trips.Add(1)
			results = c.DoMulti(ctx, cmds...)
		}
		for j, res := range results {
			i := 0
			if j < len(dirty) {
				i = dirty[j]
			} else {
				i = refresh[j-len(dirty)]
			}
			v, err := res.AsBytes()
			switch {
			case rueidis.IsRedisNil(err):
				out[i] = nil
			case err != nil:
				return nil, err
			case v == nil:
				out[i] = []byte{}
			default:
				out[i] = v
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

func (n *near) close() { n.client.Close() }

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
