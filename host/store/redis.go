package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis layout. Data keys and session sets live in separate sub-namespaces, so no key
// the engine derives can name a session set.
const (
	redisKeyPrefix     = "stategate:key:"
	redisSessionPrefix = "stategate:session:"
)

// Redis is a Store on one Redis server (6.2 or later), shared by gateway replicas.
//
// # Notes
//
//   - Key layout: the value of key is at "stategate:key:<key>" (Redis keys are binary
//     safe, so key is stored as is); the keys written for a session are members of the set
//     "stategate:session:<id>", with id percent-encoded outside [A-Za-z0-9._~-]. Both
//     carry the idle TTL as PX/PEXPIRE.
//   - CompareAndSwap is one Lua script (GET, compare, SET PX, SADD, PEXPIRE), so it is
//     atomic against every other client. Get is GETEX PX, which refreshes the value's TTL
//     but not its session set's: a session that only reads may outlive its set, in which
//     case Forget leaves its keys to expire on their own.
//   - A key written by two sessions is in both sets; Forget of either deletes it.
//   - The scripts touch keys they are not passed (Forget deletes the set's members), so
//     this is for a single server (or a primary with replicas), not Redis Cluster.
type Redis struct {
	client *redis.Client
	ttl    time.Duration
	name   string // the URL without its password, for errors

	orphans chan orphan   // leases to release in the background (see janitor)
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the janitor has stopped
	once    sync.Once
}

var _ Store = (*Redis)(nil)

// casScript: KEYS[1] the value key, KEYS[2] the session set (absent: no session);
// ARGV[1] "1" when old must equal ARGV[2], "0" when the key must be absent;
// ARGV[3] the new value; ARGV[4] the TTL in milliseconds. Returns 1 when swapped.
var casScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if ARGV[1] == '0' then
  if cur then return 0 end
elseif cur ~= ARGV[2] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
if KEYS[2] then
  redis.call('SADD', KEYS[2], KEYS[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
return 1
`)

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

// NewRedis connects to the server at url (redis://[user:password@]HOST:PORT/DB, or
// rediss:// for TLS) and pings it, so a wrong address fails here and not on first use.
func NewRedis(ctx context.Context, url string, opts Options) (*Redis, error) {
	opts = opts.withDefaults()
	name := redactURL(url)
	ro, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("store[redis] url[%s]: %w", name, err)
	}
	// No automatic retries: a compare-and-set retried after a lost reply would report a
	// conflict for a write that committed, and the caller would apply its transition twice.
	// A failed command surfaces as an error instead (the gate then fails closed).
	ro.MaxRetries = -1
	client := redis.NewClient(ro)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("store[redis] url[%s]: ping: %w", name, err)
	}
	r := &Redis{client: client, ttl: opts.IdleTTL, name: name,
		orphans: make(chan orphan, orphanQueue), stop: make(chan struct{}), done: make(chan struct{})}
	go r.janitor()
	return r, nil
}

// Get implements Store.Get.
func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	v, err := r.client.GetEx(ctx, redisKeyPrefix+key, r.ttl).Bytes()
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

// CompareAndSwap implements Store.CompareAndSwap.
func (r *Redis) CompareAndSwap(ctx context.Context, session, key string, old, new []byte) (bool, error) {
	keys := []string{redisKeyPrefix + key}
	if session != "" {
		keys = append(keys, redisSessionPrefix+escapeSession(session))
	}
	mode := "1"
	if old == nil {
		mode, old = "0", []byte{}
	}
	if new == nil {
		new = []byte{}
	}
	n, err := casScript.Run(ctx, r.client, keys, mode, old, new, r.ttlMillis()).Int()
	if err != nil {
		return false, fmt.Errorf("store[redis] url[%s] key[%q]: compare-and-swap: %w", r.name, key, err)
	}
	return n == 1, nil
}

// Forget implements Store.Forget.
func (r *Redis) Forget(ctx context.Context, session string) error {
	if session == "" {
		return nil
	}
	key := redisSessionPrefix + escapeSession(session)
	if err := forgetScript.Run(ctx, r.client, []string{key}).Err(); err != nil {
		return fmt.Errorf("store[redis] url[%s] session[%q]: forget: %w", r.name, session, err)
	}
	return nil
}

// Close implements Store.Close: it stops the janitor (leases it still had to release lapse
// after their ttl) and closes the connection pool.
func (r *Redis) Close() error {
	r.once.Do(func() {
		close(r.stop)
		<-r.done
	})
	return r.client.Close()
}

func (r *Redis) ttlMillis() int64 { return max(r.ttl.Milliseconds(), 1) }

// escapeSession percent-encodes every byte outside [A-Za-z0-9._~-], so distinct ids give
// distinct set keys and none contains glob ('*', '?', '['), hash-tag ('{') or
// separator characters.
func escapeSession(id string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(id))
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '_', c == '~', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// redactURL hides a password in a redis URL, for error messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable>"
	}
	return u.Redacted()
}
