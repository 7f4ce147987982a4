package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisLockPrefix namespaces the leases of Lock.
const redisLockPrefix = "stategate:lock:"

// unlockScript deletes the leases KEYS that still hold the caller's token ARGV[1], in one
// round trip. Returns how many it deleted.
var unlockScript = redis.NewScript(`
local n = 0
for _, k in ipairs(KEYS) do
  if redis.call("GET", k) == ARGV[1] then
    n = n + redis.call("DEL", k)
  end
end
return n
`)

// Lock implements Store.Lock with one lease per key (SET NX PX with a random token),
// taken in sorted order, retried with a short backoff while held elsewhere.
//
// # Notes
//
//   - A SET NX that fails (a lost connection, a client-side read timeout while the server
//     stalls) may still have set the key on the server, once it resumes. Lock returns the
//     error at once and hands every lease it may hold (that one included) to the janitor,
//     which releases them in the background. A release that fails goes to the janitor too.
//   - The client does not pass ctx's deadline down to its sockets (ContextTimeoutEnabled is
//     off), so a command to a stalled server returns after the client's read timeout (3s
//     by default, read_timeout in the URL), not at ctx's deadline.
//   - A failed command whose wait had already found the key held, once ctx has ended,
//     reports ErrBusy: that is what ended the wait.
func (r *Redis) Lock(ctx context.Context, keys []string, ttl time.Duration) (func(), error) {
	if err := checkLease(ttl); err != nil {
		return nil, fmt.Errorf("store[redis] url[%s]: lock: %w", r.name, err)
	}
	keys = sortedKeys(keys)
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(tok[:])
	held := make([]string, 0, len(keys))
	for _, k := range keys {
		lk := redisLockPrefix + k
		busy := false
		wait := time.Millisecond
		for {
			ok, err := r.client.SetNX(ctx, lk, token, ttl).Result()
			if err != nil {
				r.orphan(append(held, lk), token)
				if busy && ctx.Err() != nil {
					return nil, fmt.Errorf("store[redis] url[%s] key[%q]: lock: %w (%w)", r.name, k, ErrBusy, ctx.Err())
				}
				return nil, fmt.Errorf("store[redis] url[%s] key[%q]: lock: %w", r.name, k, err)
			}
			if ok {
				held = append(held, lk)
				break
			}
			busy = true
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				r.unlock(ctx, held, token)
				return nil, fmt.Errorf("store[redis] url[%s] key[%q]: lock: %w (%w)", r.name, k, ErrBusy, ctx.Err())
			}
			if wait < 20*time.Millisecond {
				wait *= 2
			}
		}
	}
	var once sync.Once
	return func() { once.Do(func() { r.unlock(ctx, held, token) }) }, nil
}

// unlock deletes the leases lockKeys that still hold token, on a context of its own (ctx
// may have ended); when that fails, the janitor retries.
func (r *Redis) unlock(ctx context.Context, lockKeys []string, token string) {
	if len(lockKeys) == 0 {
		return
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if unlockScript.Run(uctx, r.client, lockKeys, token).Err() != nil {
		r.orphan(lockKeys, token)
	}
}

// orphan is a set of leases the janitor must release: Lock may hold them without knowing.
type orphan struct {
	lockKeys []string
	token    string
}

// orphanQueue bounds the orphans waiting for the janitor; past it they are dropped and
// lapse after their ttl.
const orphanQueue = 1024

// orphan queues lockKeys for the janitor, or drops them when its queue is full.
func (r *Redis) orphan(lockKeys []string, token string) {
	select {
	case r.orphans <- orphan{lockKeys: append([]string(nil), lockKeys...), token: token}:
	default:
	}
}

// janitor releases orphaned leases, one set at a time, until Close.
//
// # Notes
//
//   - Each release is the unlock script sent as EVAL (not EVALSHA), so a server that lost
//     its script cache still runs it, and it is retried with a backoff (10ms doubling to
//     1s) until the server answers. A new connection's handshake needs an answer before
//     any command is sent, so during a stall every try fails until the server resumes.
//   - The first answer comes after the server has resumed, so after it ran the SET NX
//     whose reply was lost: that command had reached it before the stall ended, on
//     another connection, and the server serves connections in the order they became
//     readable. The token check keeps the script from deleting a later holder's lease.
func (r *Redis) janitor() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case o := <-r.orphans:
			for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				err := unlockScript.Eval(ctx, r.client, o.lockKeys, o.token).Err()
				cancel()
				if err == nil {
					break
				}
				t := time.NewTimer(wait)
				select {
				case <-r.stop:
					t.Stop()
					return
				case <-t.C:
				}
			}
		}
	}
}
