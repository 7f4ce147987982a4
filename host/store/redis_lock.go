package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisLockPrefix namespaces the leases of Lock.
const redisLockPrefix = "stategate:lock:"

// unlockScript deletes the leases KEYS that still hold the caller's token ARGV[1], in one
// round trip. Returns how many it deleted.
var unlockScript = redis.NewScript(unlockSrc)

const unlockSrc = `
local n = 0
for _, k in ipairs(KEYS) do
  if redis.call("GET", k) == ARGV[1] then
    n = n + redis.call("DEL", k)
  end
end
return n
`

// lockScript takes the leases KEYS with token ARGV[1] for ARGV[2] milliseconds, all or
// none: it returns 0 when it took them, or the index (from 1) of the first one held.
var lockScript = redis.NewScript(lockSrc)

const lockSrc = `
for i, k in ipairs(KEYS) do
  if redis.call("EXISTS", k) == 1 then return i end
end
for _, k in ipairs(KEYS) do
  redis.call("SET", k, ARGV[1], "PX", ARGV[2])
end
return 0
`

// Lock implements Store.Lock: the keys' leases are taken all or none by one script per
// group of keys that share a hash slot (one group on a single server), groups in the order
// of their slots, each retried with a short backoff while one of its keys is held
// elsewhere.
//
// # Notes
//
//   - Deadlock-free: a holder waits only on a group of a higher slot than every group it
//     holds, and takes a group whole or not at all, so no two holders can wait on each
//     other (the in-process leases use the sorted order of keys the same way).
//   - All or nothing: a Lock that fails or gives up releases every group it took.
//   - A script that fails (a lost connection, a client-side read timeout while the server
//     stalls) may still have run on the server, once it resumes. Lock returns the error at
//     once and hands every lease it may hold (that group included) to the janitor, which
//     releases them in the background. A release that fails goes to the janitor too.
//   - The client does not pass ctx's deadline down to its sockets (ContextTimeoutEnabled is
//     off), so a command to a stalled server returns after the client's read timeout (3s
//     by default, read_timeout in the URL), not at ctx's deadline.
//   - A failed command whose wait had already found a key held, once ctx has ended,
//     reports ErrBusy: that is what ended the wait.
func (r *Redis) Lock(ctx context.Context, keys []string, ttl time.Duration) (func(), error) {
	lease, _, err := r.lock(ctx, keys, ttl, false)
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}

// LockLoad is Lock followed by Get of every key, in the same scripts: one round trip per
// slot group (one on a single server) instead of one for the leases and one for the
// reads. values[i] is keys[i]'s value (nil when absent); reads refresh the idle TTL as Get
// does.
func (r *Redis) LockLoad(ctx context.Context, keys []string, ttl time.Duration) (func(), [][]byte, error) {
	lease, values, err := r.LockLease(ctx, keys, ttl, true)
	if err != nil {
		return nil, nil, err
	}
	return lease.Release, values, nil
}

// LockLease is Lock, returning the leases as a *Lease that CompareAndSwapReleasing can
// release; with load it reads the keys too, as LockLoad does (values is nil without).
func (r *Redis) LockLease(ctx context.Context, keys []string, ttl time.Duration, load bool) (*Lease, [][]byte, error) {
	lease, got, err := r.lock(ctx, keys, ttl, load)
	if err != nil || !load {
		return lease, nil, err
	}
	values := make([][]byte, len(keys))
	for i, k := range keys {
		values[i] = got[k]
	}
	return lease, values, nil
}

// Lease is the leases one Lock took: their names and the token they hold.
//
// # Notes
//
//   - Release deletes the leases still held (those no CompareAndSwapReleasing deleted), in
//     one pipeline, on a context of its own; one that fails goes to the janitor. It may be
//     called more than once and costs no round trip once nothing is held.
//   - Every deletion checks the token, so a lease that lapsed and was taken by another
//     holder is never deleted.
type Lease struct {
	r     *Redis
	ctx   context.Context // the Lock's, for its values (a release outlives its cancellation)
	token string

	mu   sync.Mutex
	held []string // lease names not released yet
}

// Release releases the leases still held.
func (l *Lease) Release() {
	l.mu.Lock()
	held := l.held
	l.held = nil
	l.mu.Unlock()
	l.r.unlock(l.ctx, held, l.token)
}

// inSlot returns the lease names still held that a script on a key of slot s may name:
// all of them on a single server, those of slot s on a cluster.
func (l *Lease) inSlot(s int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.r.cluster {
		return slices.Clone(l.held)
	}
	var out []string
	for _, n := range l.held {
		if slot(n) == s {
			out = append(out, n)
		}
	}
	return out
}

// released drops names from the leases still held: a script deleted them.
func (l *Lease) released(names []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = slices.DeleteFunc(l.held, func(n string) bool { return slices.Contains(names, n) })
}

// lockLoadScript is lockScript that also reads: KEYS[1..n] the leases, KEYS[n+1..2n] the
// values; ARGV[3] the idle TTL in milliseconds. Returns {0, value or false, ...} when it
// took the leases, or {i} for the first one held.
var lockLoadScript = redis.NewScript(lockLoadSrc)

const lockLoadSrc = `
local n = #KEYS / 2
for i = 1, n do
  if redis.call("EXISTS", KEYS[i]) == 1 then return {i} end
end
local out = {0}
for i = 1, n do
  redis.call("SET", KEYS[i], ARGV[1], "PX", ARGV[2])
  local v = redis.call("GET", KEYS[n + i])
  if v then redis.call("PEXPIRE", KEYS[n + i], ARGV[3]) end
  out[i + 1] = v
end
return out
`

// lock takes the leases on keys, group by group (see Lock), reading the keys' values as
// it goes when load is set: it returns them by key, present values non-nil.
func (r *Redis) lock(ctx context.Context, keys []string, ttl time.Duration, load bool) (*Lease, map[string][]byte, error) {
	if err := checkLease(ttl); err != nil {
		return nil, nil, fmt.Errorf("store[redis] url[%s]: lock: %w", r.name, err)
	}
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, nil, err
	}
	token := hex.EncodeToString(tok[:])
	var held []string // lease names taken so far
	var values map[string][]byte
	if load {
		values = make(map[string][]byte, len(keys))
	}
	for _, group := range r.groups(sortedKeys(keys)) {
		names := make([]string, len(group), 2*len(group))
		for i, k := range group {
			names[i] = r.lay.lockKey(k)
		}
		script, args := lockScript, []any{token, ttl.Milliseconds()}
		if load {
			for _, k := range group {
				names = append(names, r.lay.valueKey(k))
			}
			script, args = lockLoadScript, append(args, r.ttlMillis())
		}
		leases := names[:len(group)]
		busy := false
		wait := time.Millisecond
		for {
			n, vals, err := lockReply(r.eval(ctx, script, names, args...))
			if err != nil {
				r.orphan(append(held, leases...), token)
				if busy && ctx.Err() != nil {
					return nil, nil, fmt.Errorf("store[redis] url[%s] key[%q]: lock: %w (%w)", r.name, group[0], ErrBusy, ctx.Err())
				}
				return nil, nil, fmt.Errorf("store[redis] url[%s] key[%q]: lock: %w", r.name, group[0], err)
			}
			if n == 0 {
				held = append(held, leases...)
				for i, k := range group {
					if load && i < len(vals) {
						values[k] = vals[i]
					}
				}
				break
			}
			busy = true
			k := group[min(max(n, 1), len(group))-1]
			// Jittered, so waiters on one key spread their polls over the interval.
			t := time.NewTimer(wait/2 + time.Duration(mrand.Int64N(int64(wait/2)+1)))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				r.unlock(ctx, held, token)
				return nil, nil, fmt.Errorf("store[redis] url[%s] key[%q]: lock: %w (%w)", r.name, k, ErrBusy, ctx.Err())
			}
			if wait < 20*time.Millisecond {
				wait *= 2
			}
		}
	}
	return &Lease{r: r, ctx: ctx, token: token, held: held}, values, nil
}

// lockReply reads lockScript's reply (a number) or lockLoadScript's ({number, values...}):
// 0 and the values read, or the index of the key held.
func lockReply(cmd *redis.Cmd) (int, [][]byte, error) {
	v, err := cmd.Result()
	if err != nil {
		return 0, nil, err
	}
	switch v := v.(type) {
	case int64:
		return int(v), nil, nil
	case []any:
		if len(v) == 0 {
			return 0, nil, errors.New("lock: empty reply")
		}
		n, ok := v[0].(int64)
		if !ok {
			return 0, nil, fmt.Errorf("lock: reply %T", v[0])
		}
		vals := make([][]byte, len(v)-1)
		for i, x := range v[1:] {
			if s, ok := x.(string); ok {
				vals[i] = []byte(s)
			}
		}
		return int(n), vals, nil
	}
	return 0, nil, fmt.Errorf("lock: reply %T", v)
}

// groups splits sorted keys into the groups one script may touch: all of them on a single
// server; per hash slot of their leases, in slot order, on a cluster.
func (r *Redis) groups(keys []string) [][]string {
	if !r.cluster || len(keys) <= 1 {
		return [][]string{keys}
	}
	bySlot := map[int][]string{}
	var slots []int
	for _, k := range keys {
		s := slot(r.lay.lockKey(k))
		if _, ok := bySlot[s]; !ok {
			slots = append(slots, s)
		}
		bySlot[s] = append(bySlot[s], k)
	}
	slices.Sort(slots)
	out := make([][]string, len(slots))
	for i, s := range slots {
		out[i] = bySlot[s]
	}
	return out
}

// slotGroups splits Redis key names by hash slot (one group on a single server).
func (r *Redis) slotGroups(names []string) [][]string {
	if !r.cluster || len(names) <= 1 {
		return [][]string{names}
	}
	bySlot := map[int][]string{}
	var slots []int
	for _, n := range names {
		s := slot(n)
		if _, ok := bySlot[s]; !ok {
			slots = append(slots, s)
		}
		bySlot[s] = append(bySlot[s], n)
	}
	out := make([][]string, len(slots))
	for i, s := range slots {
		out[i] = bySlot[s]
	}
	return out
}

// unlock deletes the leases lockKeys that still hold token, on a context of its own (ctx
// may have ended); when that fails, the janitor retries.
func (r *Redis) unlock(ctx context.Context, lockKeys []string, token string) {
	if len(lockKeys) == 0 {
		return
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if r.release(uctx, lockKeys, token, false) != nil {
		r.orphan(lockKeys, token)
	}
}

// release runs the unlock script on every slot group of lockKeys, in one pipeline (one
// round trip per server). eval sends the script text (EVAL) rather than its digest, for a
// server that may have lost its script cache.
func (r *Redis) release(ctx context.Context, lockKeys []string, token string, eval bool) error {
	groups := r.slotGroups(lockKeys)
	if len(groups) == 1 {
		if eval {
			return unlockScript.Eval(ctx, r.client, lockKeys, token).Err()
		}
		return unlockScript.Run(ctx, r.client, lockKeys, token).Err()
	}
	run := func(useEval bool) error {
		_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, g := range groups {
				if useEval {
					unlockScript.Eval(ctx, p, g, token)
				} else {
					unlockScript.EvalSha(ctx, p, g, token)
				}
			}
			return nil
		})
		return err
	}
	err := run(eval)
	if err != nil && !eval && redis.HasErrorPrefix(err, "NOSCRIPT") {
		err = run(true)
	}
	return err
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
				err := r.release(ctx, o.lockKeys, o.token, true)
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
