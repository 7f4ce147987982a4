package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis layout. Data keys and session sets live in separate sub-namespaces, so no key
// the engine derives can name a session set.
const (
	redisKeyPrefix     = "stategate:key:"
	redisSessionPrefix = "stategate:session:"
)

// Redis is a Store on Redis (6.2 or later), shared by gateway replicas: one server
// (redis://), a primary found through Sentinel (redis+sentinel://), or a Redis Cluster
// (redis+cluster://).
//
// # Notes
//
//   - Key layout (see layout): on one server the value of key is at "stategate:key:<key>"
//     (Redis keys are binary safe, so key is stored as is) and the keys written for a
//     session are members of the set "stategate:session:<id>", with id percent-encoded
//     outside [A-Za-z0-9._~-]. On a cluster every name carries a hash tag (slotTag), so
//     what one script touches shares a slot. Values and sets carry the idle TTL as
//     PX/PEXPIRE.
//   - CompareAndSwap is one Lua script (GET, compare, SET PX, SADD, PEXPIRE), so it is
//     atomic against every other client; CompareAndSwapReleasing also deletes the caller's
//     leases in it once the value is swapped. Get is GETEX PX, which refreshes the value's TTL
//     but not its session set's: a session that only reads may outlive its set, in which
//     case Forget leaves its keys to expire on their own.
//   - A key written by two sessions is in both sets; Forget of either deletes it.
//   - Commands that are not safe to repeat (the compare-and-set and lease scripts) are
//     never retried by the client library, on any deployment (see noRetry).
//   - With Options' wait (the URL's wait=N, default 1 for Sentinel), a compare-and-set
//     and a lease count only once N replicas acknowledged them (WAIT, in the same round
//     trip), so a failover to an acknowledging replica keeps them.
type Redis struct {
	client  redis.UniversalClient
	cluster bool // keys are grouped per hash slot
	lay     layout
	wait    int           // replicas that must acknowledge a write (0: none)
	waitFor time.Duration // how long WAIT waits for them
	ttl     time.Duration
	name    string // the URL without its password, for errors
	trips   atomic.Uint64
	near    *near // the near cache of GetNear (nil: none)

	orphans chan orphan   // leases to release in the background (see janitor)
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the janitor has stopped
	once    sync.Once
}

var _ Store = (*Redis)(nil)

// casScript: KEYS[1] the value key, then the session set when ARGV[5] is "1", then
// leases to release once the value is swapped; ARGV[1] "1" when old must equal ARGV[2],
// "0" when the key must be absent; ARGV[3] the new value; ARGV[4] the TTL in
// milliseconds; ARGV[6] the leases' token (a lease holding another is left alone).
// Returns 1 when swapped; a conflict releases nothing.
var casScript = redis.NewScript(casSrc)

const casSrc = `
local cur = redis.call('GET', KEYS[1])
if ARGV[1] == '0' then
  if cur then return 0 end
elseif cur ~= ARGV[2] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
local leases = 2
if ARGV[5] == '1' then
  redis.call('SADD', KEYS[2], KEYS[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  leases = 3
end
for i = leases, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[6] then redis.call('DEL', KEYS[i]) end
end
return 1
`

// forgetScript: KEYS[1] the session set. Deletes its members, then the set, in batches
// that stay under Lua's unpack limit. Returns the number of members.
var forgetScript = redis.NewScript(`
local members = redis.call('SMEMBERS', KEYS[1])
for i = 1, #members, 1000 do
  redis.call('DEL', unpack(members, i, math.min(i + 999, #members)))
end
redis.call('DEL', KEYS[1])
return #members
`)

// forgetTaggedScript: KEYS[1] the session set, ARGV[1] the prefix of names in its slot.
// Deletes the members in the set's slot and the set; returns the members of other slots
// (keys written by the session under another unit's tag) for the caller to delete.
var forgetTaggedScript = redis.NewScript(`
local members = redis.call('SMEMBERS', KEYS[1])
local here, other = {}, {}
for _, m in ipairs(members) do
  if string.sub(m, 1, #ARGV[1]) == ARGV[1] then
    here[#here + 1] = m
  else
    other[#other + 1] = m
  end
end
for i = 1, #here, 1000 do
  redis.call('DEL', unpack(here, i, math.min(i + 999, #here)))
end
redis.call('DEL', KEYS[1])
return other
`)

// NewRedis connects to the server at url (redis://[user:password@]HOST:PORT/DB, or
// rediss:// for TLS) and pings it, so a wrong address fails here and not on first use.
// With near_cache=on in the URL it opens the near cache of GetNear (one more connection,
// RESP3 with client tracking); not over TLS (rediss://), whose socket it cannot peek at.
// It is off by default: its freshness across replicas rests on how Redis orders its
// output and on the network delivering an invalidation before a client's next request
// reaches another replica, proven here on one host only (RATIONALE.md, "A near cache").
func NewRedis(ctx context.Context, url string, opts Options) (*Redis, error) {
	name := redactURL(url)
	url, nearOn, err := cutNearOption(url)
	if err != nil {
		return nil, fmt.Errorf("store[redis] url[%s]: %w", name, err)
	}
	ro, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("store[redis] url[%s]: %w", name, err)
	}
	// No automatic retries: a compare-and-set retried after a lost reply would report a
	// conflict for a write that committed, and the caller would apply its transition twice.
	// A failed command surfaces as an error instead (the gate then fails closed).
	ro.MaxRetries = -1
	r, err := newRedis(ctx, redis.NewClient(ro), name, false, 0, 0, opts)
	if err != nil || !nearOn || ro.TLSConfig != nil || !nearSupported {
		return r, err // the near cache peeks at a plain TCP socket (redis_near_conn.go)
	}
	if r.near, err = newNear(ctx, ro, r.ttl, &r.trips); err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("store[redis] url[%s]: near cache: %w", name, err)
	}
	return r, nil
}

// cutNearOption removes near_cache=on|off from a redis:// URL's query (go-redis refuses
// options it does not know) and reports it (default off).
func cutNearOption(raw string) (string, bool, error) {
	base, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw, false, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return raw, false, nil // go-redis reports it
	}
	on := false
	switch v := q.Get("near_cache"); v {
	case "on", "true", "1":
		on = true
	case "", "off", "false", "0":
	default:
		return "", false, fmt.Errorf("near_cache[%s]: want on or off", v)
	}
	q.Del("near_cache")
	if len(q) == 0 {
		return base, on, nil
	}
	return base + "?" + q.Encode(), on, nil
}

// newRedis pings client and starts the store's janitor.
func newRedis(ctx context.Context, client redis.UniversalClient, name string, cluster bool, wait int, waitFor time.Duration, opts Options) (*Redis, error) {
	opts = opts.withDefaults()
	r := &Redis{client: client, cluster: cluster, lay: layout{tagged: cluster}, wait: wait, waitFor: waitFor,
		ttl: opts.IdleTTL, name: name,
		orphans: make(chan orphan, orphanQueue), stop: make(chan struct{}), done: make(chan struct{})}
	hook := tripCounter{&r.trips}
	if cc, ok := client.(*redis.ClusterClient); ok {
		// Count what each node is sent: a cluster pipeline is one exchange per node.
		cc.OnNewNode(func(node *redis.Client) { node.AddHook(hook) })
	} else {
		client.AddHook(hook)
	}
	if err := r.ping(ctx); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("store[redis] url[%s]: ping: %w", name, err)
	}
	go r.janitor()
	return r, nil
}

// ping checks that the deployment answers: every master of a cluster, and that its slots
// are all served.
func (r *Redis) ping(ctx context.Context) error {
	cc, ok := r.client.(*redis.ClusterClient)
	if !ok {
		return r.client.Ping(ctx).Err()
	}
	info, err := cc.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return errors.New("cluster_state is not ok")
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() })
}

// RoundTrips counts the exchanges with Redis so far: a command, or a pipeline sent to one
// server, is one. A new connection's handshake (HELLO, AUTH, SELECT, CLIENT) is not
// counted: it is paid once per pooled connection, not per operation.
func (r *Redis) RoundTrips() uint64 { return r.trips.Load() }

// tripCounter is the go-redis hook behind RoundTrips.
type tripCounter struct{ n *atomic.Uint64 }

func (h tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && !handshake(cmds[0]) {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

func handshake(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "auth", "select", "client":
		return true
	}
	return false
}

// Get implements Store.Get.
func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	v, err := r.client.GetEx(ctx, r.lay.valueKey(key), r.ttl).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("store[redis] url[%s] key[%q]: get: %w", r.name, key, err)
	case v == nil:
		return []byte{}, nil
	}
	return v, nil
}

// GetMany reads keys as Get does, in one pipeline: one round trip on a server, one per
// server holding a key (in parallel) on a cluster. Absent keys are nil.
func (r *Redis) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	if len(keys) == 1 {
		v, err := r.Get(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		return [][]byte{v}, nil
	}
	cmds := make([]*redis.StringCmd, len(keys))
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.GetEx(ctx, r.lay.valueKey(k), r.ttl)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store[redis] url[%s] keys[%q]: get: %w", r.name, keys, err)
	}
	out := make([][]byte, len(keys))
	for i, c := range cmds {
		v, err := c.Bytes()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return nil, fmt.Errorf("store[redis] url[%s] key[%q]: get: %w", r.name, keys[i], err)
		case v == nil:
			out[i] = []byte{}
		default:
			out[i] = v
		}
	}
	return out, nil
}

// CompareAndSwap implements Store.CompareAndSwap.
func (r *Redis) CompareAndSwap(ctx context.Context, session, key string, old, new []byte) (bool, error) {
	return r.compareAndSwap(ctx, session, key, old, new, nil)
}

// CompareAndSwapReleasing is CompareAndSwap that, when it swaps, also releases lease's
// leases in the same script, so a moving call's last write and its release are one round
// trip. lease is one this store's LockLease took.
//
// # Notes
//
//   - It releases the leases a script on key may name: all of them on a single server (or
//     a Sentinel primary), those in key's hash slot on a cluster. lease.Release releases
//     the rest, and nothing (no round trip) when nothing is left.
//   - A conflict releases nothing: the caller still holds every lease while it re-reads
//     and re-applies.
//   - An error leaves the swap and the release unknown, both or neither (one script):
//     the caller treats it as a failed write and holds the lease (lease.Release is not
//     called; what the script did not delete lapses). Settling (see settle) never reports
//     a conflict here: once the script may have run, the lease may be gone and another
//     holder may have written, so a value that is neither old nor new is an error, not a
//     conflict that would make the caller apply its transition twice.
func (r *Redis) CompareAndSwapReleasing(ctx context.Context, session, key string, old, new []byte, lease *Lease) (bool, error) {
	if lease == nil || lease.r != r {
		return false, fmt.Errorf("store[redis] url[%s] key[%q]: compare-and-swap: a lease this store did not take", r.name, key)
	}
	return r.compareAndSwap(ctx, session, key, old, new, lease)
}

// compareAndSwap runs casScript on key, releasing lease's leases in key's slot when it
// swaps (lease nil: none).
func (r *Redis) compareAndSwap(ctx context.Context, session, key string, old, new []byte, lease *Lease) (bool, error) {
	vk := r.lay.valueKey(key)
	if r.near != nil {
		defer r.near.writing(vk)() // GetNear reads it fresh until a read after this write
	}
	keys := []string{vk}
	inSet := "0"
	if session != "" {
		sk := r.lay.sessionKey(session)
		if r.cluster && slot(sk) != slot(vk) {
			// A key of another unit (a handle) recorded for a session: its set lives in
			// another slot. Record it first: a member whose write then fails is harmless
			// (Forget deletes a key that is not there), a write without its member is not.
			_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.SAdd(ctx, sk, vk)
				p.PExpire(ctx, sk, r.ttl)
				return nil
			})
			if err != nil {
				return false, fmt.Errorf("store[redis] url[%s] key[%q]: compare-and-swap: record in session[%q]: %w", r.name, key, session, err)
			}
		} else {
			keys, inSet = append(keys, sk), "1"
		}
	}
	token := ""
	var leases []string
	if lease != nil {
		token, leases = lease.token, lease.inSlot(slot(vk))
		keys = append(keys, leases...)
	}
	mode := "1"
	if old == nil {
		mode, old = "0", []byte{}
	}
	if new == nil {
		new = []byte{}
	}
	run := func(mode string, old []byte) (bool, error) {
		n, err := r.eval(ctx, casScript, keys, mode, old, new, r.ttlMillis(), inSet, token).Int()
		if err == nil && n == 1 && lease != nil {
			lease.released(leases)
		}
		return n == 1, err
	}
	ok, err := run(mode, old)
	if err != nil {
		return r.settle(ctx, key, vk, run, mode, old, new, len(leases) > 0, err)
	}
	return ok, nil
}

// settleFor bounds how long a compare-and-set whose outcome is unknown keeps trying to
// learn it (within ctx's deadline).
const settleFor = 15 * time.Second

// settle finds out what became of a compare-and-set that failed with err (a lost reply, a
// primary that died, too few replicas acknowledging): the script may or may not have run,
// and a failover may have lost it. It reads the key (vk) until the store answers, then:
//
//   - the key holds new: the write landed. The compare-and-set new→new is run (it writes
//     the same bytes and, with wait, waits for replicas again) so that success means what
//     a first-time success means;
//   - the key still holds old (or is still absent): the write did not land, or was lost in
//     a failover; the compare-and-set is run again;
//   - anything else: another writer got in first, a conflict. When the script releases
//     leases (releases), it is an error instead: the script may have run, released them
//     and let the next holder write, and a conflict would make the caller re-apply a
//     transition that is stored.
//
// So a retry only ever runs the compare-and-set itself (run), and a transition is never
// applied twice. A writer that finds new can not tell its own write from another writer's
// identical one; the gateway's writers hold a lease and write snapshots with a sequence, so
// identical bytes are its own. It gives up with err after settleFor or when ctx ends.
func (r *Redis) settle(ctx context.Context, key, vk string, run func(mode string, old []byte) (bool, error), mode string, old, new []byte, releases bool, err error) (bool, error) {
	first := err
	fail := func() (bool, error) {
		return false, fmt.Errorf("store[redis] url[%s] key[%q]: compare-and-swap: %w", r.name, key, first)
	}
	deadline := time.Now().Add(settleFor)
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		if time.Now().Add(wait).After(deadline) {
			return fail()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fail()
		case <-t.C:
		}
		cur, err := r.client.Get(ctx, vk).Bytes()
		present := err == nil
		if err != nil && !errors.Is(err, redis.Nil) {
			continue // the store does not answer yet
		}
		var ok bool
		switch {
		case present && bytes.Equal(cur, new):
			ok, err = run("1", new)
		case (mode == "0" && !present) || (mode == "1" && present && bytes.Equal(cur, old)):
			ok, err = run(mode, old)
		case releases:
			return false, fmt.Errorf("store[redis] url[%s] key[%q]: compare-and-swap: outcome unknown (%w), and the key now holds another writer's value", r.name, key, first)
		default:
			return false, nil
		}
		if err == nil {
			return ok, nil
		}
	}
}

// Forget implements Store.Forget.
func (r *Redis) Forget(ctx context.Context, session string) error {
	if session == "" {
		return nil
	}
	key := r.lay.sessionKey(session)
	if !r.lay.tagged {
		if err := forgetScript.Run(ctx, r.client, []string{key}).Err(); err != nil {
			return fmt.Errorf("store[redis] url[%s] session[%q]: forget: %w", r.name, session, err)
		}
		if r.near != nil {
			// The script's keys are not known here: a fence on the tracking connection
			// applies their invalidations before Forget returns.
			if err := r.near.fence(ctx); err != nil {
				return fmt.Errorf("store[redis] url[%s] session[%q]: forget: near cache fence: %w", r.name, session, err)
			}
		}
		return nil
	}
	prefix := key[:strings.IndexByte(key, '}')+2] // "stategate:{<tag>}:"
	other, err := forgetTaggedScript.Run(ctx, r.client, []string{key}, prefix).StringSlice()
	if err == nil && len(other) > 0 {
		_, err = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range other {
				p.Del(ctx, k)
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("store[redis] url[%s] session[%q]: forget: %w", r.name, session, err)
	}
	return nil
}

// eval runs script once, never retried by the client library (a lost reply is an error,
// not a second run), followed in the same round trip by WAIT when writes must reach
// replicas: a script that ran but that too few replicas acknowledged is an error.
func (r *Redis) eval(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	run := func(name, body string) (*redis.Cmd, *redis.IntCmd, error) {
		a := make([]any, 0, 3+len(keys)+len(args))
		a = append(a, name, body, len(keys))
		for _, k := range keys {
			a = append(a, k)
		}
		cmd := redis.NewCmd(ctx, append(a, args...)...)
		if r.wait == 0 && (r.cluster || script != casScript) {
			return cmd, nil, r.client.Process(ctx, noRetry{cmd})
		}
		if r.wait == 0 {
			// A compare-and-set goes after a PING, in the same round trip: its reply queues
			// this connection for writing before the script runs, so the invalidations the
			// script causes are queued after it and written first (the server writes the
			// most recently queued connection first): other replicas' near caches have them
			// before this acknowledgement leaves (see near).
			var err error
			_, perr := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Ping(ctx)
				err = p.Process(ctx, noRetry{cmd})
				return nil
			})
			if perr != nil && cmd.Err() == nil {
				err = perr
			}
			return cmd, nil, errors.Join(err, cmd.Err())
		}
		// WAIT names no key, so a cluster would send it to any node: the pipeline goes to
		// the primary serving the script's slot instead (a MOVED answer then fails the call,
		// closed, rather than being followed).
		var c redis.Cmdable = r.client
		if cc, ok := r.client.(*redis.ClusterClient); ok {
			node, err := cc.MasterForKey(ctx, keys[0])
			if err != nil {
				cmd.SetErr(err)
				return cmd, nil, err
			}
			c = node
		}
		var wait *redis.IntCmd
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			_ = p.Process(ctx, noRetry{cmd})
			wait = redis.NewIntCmd(ctx, "wait", r.wait, max(r.waitFor.Milliseconds(), 1))
			_ = p.Process(ctx, wait)
			return nil
		})
		return cmd, wait, err
	}
	cmd, wait, err := run("evalsha", script.Hash())
	if err != nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd, wait, err = run("eval", scriptSource[script])
	}
	if err == nil && wait != nil && wait.Val() < int64(r.wait) {
		err = fmt.Errorf("written on the primary but acknowledged by %d of %d replicas within %v", wait.Val(), r.wait, r.waitFor)
		cmd.SetErr(err)
	}
	if err != nil && cmd.Err() == nil {
		cmd.SetErr(err)
	}
	return cmd
}

// noRetry marks a command the client library must not send twice: the cluster client
// otherwise retries a command on some network errors, and a compare-and-set or lease
// script repeated after a lost reply would report a conflict for its own write.
type noRetry struct{ *redis.Cmd }

func (noRetry) NoRetry() bool { return true }

// scriptSource keeps each script's text for EVAL (redis.Script does not expose it).
var scriptSource = map[*redis.Script]string{}

func init() {
	for s, src := range map[*redis.Script]string{casScript: casSrc, unlockScript: unlockSrc, lockScript: lockSrc, lockLoadScript: lockLoadSrc} {
		scriptSource[s] = src
	}
}

// Close implements Store.Close: it stops the janitor (leases it still had to release lapse
// after their ttl) and closes the connection pool.
func (r *Redis) Close() error {
	r.once.Do(func() {
		close(r.stop)
		<-r.done
		if r.near != nil {
			r.near.close()
		}
	})
	return r.client.Close()
}

func (r *Redis) ttlMillis() int64 { return max(r.ttl.Milliseconds(), 1) }

// escapeSession percent-encodes every byte outside [A-Za-z0-9._~-], so distinct ids give
// distinct set keys and none contains glob ('*', '?', '['), hash-tag ('{') or
// separator characters.
func escapeSession(id string) string { return percentEncode(id, false) }

// redactURL hides a password in a redis URL (also in a host list that url.Parse refuses),
// for error messages.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "<unparsable>"
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		end = i
	}
	if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
		if user, _, hasPass := strings.Cut(rest[:at], ":"); hasPass {
			rest = user + ":xxxxx" + rest[at:]
		}
	}
	return scheme + "://" + rest
}
