// Package store holds the workflow snapshots a gateway keeps between calls: the engine
// derives the keys and produces the values, the store only keeps opaque bytes and swaps
// them atomically.
//
// Three implementations share one contract (the suite in store_test.go runs against each):
// Memory, in the process and bounded with LRU eviction (the demo's and tests' store); Bolt,
// a file on disk that survives restarts (the default of stategate serve); and Redis, for
// replicas that share state.
package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Store holds workflow snapshots for the gateway. Values are opaque bytes (the engine's
// snapshots).
//
// # Notes
//
//   - Every entry expires after Options.IdleTTL without a read or a write.
//   - A present value is never nil: an empty value reads back as a non-nil empty slice, so
//     nil always means absent.
//   - Implementations are safe for concurrent use.
type Store interface {
	// Get returns the value under key, or nil (and no error) when absent. A read refreshes
	// the idle TTL.
	Get(ctx context.Context, key string) ([]byte, error)
	// CompareAndSwap sets key to new only if its current value equals old (old == nil: only
	// if absent). It records key as belonging to session (when session != "") so Forget
	// can free it.
	//
	// A false result with a nil error is a conflict: re-read and re-apply.
	CompareAndSwap(ctx context.Context, session, key string, old, new []byte) (bool, error)
	// Forget deletes every key recorded for session (the session ended: DELETE, or 404
	// from upstream). Forgetting an unknown session, or "", does nothing.
	Forget(ctx context.Context, session string) error
	// Lock takes exclusive leases on keys (for at most ttl, so a crashed holder cannot
	// block them for good) and returns the function that releases them. It waits while
	// another holder has one, until ctx ends: callers bound the wait with ctx's deadline.
	// The gateway holds the state keys of a call that can move a workflow from its
	// admission to its stored transition, so two racing calls are admitted one at a time,
	// on one replica or several.
	//
	// # Notes
	//
	//   - A wait that ends because another holder kept a key returns an error wrapping
	//     ErrBusy (and ctx's error); the message names the key. Every other error is the
	//     store failing (or ctx ending before the store answered), never ErrBusy.
	//   - A lease lapses after ttl (at least 1ms), and may then be taken by a waiter.
	//     Releasing a lease that lapsed does nothing, even when another holder has taken
	//     the key since.
	//   - The release function may be called more than once.
	Lock(ctx context.Context, keys []string, ttl time.Duration) (func(), error)
	// Close releases the store's resources.
	Close() error
}

// Options tunes a Store. The zero value gives the defaults.
type Options struct {
	// MaxEntries bounds the entries of a Memory store; the least recently used entry is
	// evicted past it (default 100000). It is for Memory only: Redis ignores it (bound
	// Redis with maxmemory), and so does Bolt, whose file holds the entries written within
	// IdleTTL, however many (bound it with IdleTTL and disk space).
	MaxEntries int
	// IdleTTL is how long an entry lives without a read or a write (default 24h).
	IdleTTL time.Duration
}

// Defaults applied to zero (or negative) Options fields.
const (
	DefaultMaxEntries = 100000
	DefaultIdleTTL    = 24 * time.Hour
)

func (o Options) withDefaults() Options {
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.IdleTTL <= 0 {
		o.IdleTTL = DefaultIdleTTL
	}
	return o
}

// Open opens the store named by spec: "memory" for a Memory store, "bolt:PATH" for a Bolt
// store in the file PATH (relative to the working directory unless absolute), or
// "redis://HOST:PORT/DB" (also "rediss://" for TLS) for a Redis store on one server,
// "redis+cluster://HOST:PORT[,HOST:PORT...]" for Redis Cluster (NewRedisCluster) or
// "redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER" for a primary found through Sentinel
// (NewRedisSentinel).
func Open(ctx context.Context, spec string, opts Options) (Store, error) {
	switch {
	case spec == "memory":
		return NewMemory(opts), nil
	case strings.HasPrefix(spec, "bolt:"):
		path := strings.TrimPrefix(spec, "bolt:")
		if path == "" {
			return nil, fmt.Errorf("store: spec[%s] names no file: want \"bolt:PATH\"", spec)
		}
		b, err := NewBolt(path, opts)
		if err != nil {
			return nil, err // not a nil *Bolt in a non-nil Store
		}
		return b, nil
	case strings.HasPrefix(spec, schemeCluster), strings.HasPrefix(spec, "rediss+cluster://"):
		r, err := NewRedisCluster(ctx, spec, opts)
		if err != nil {
			return nil, err
		}
		return r, nil
	case strings.HasPrefix(spec, schemeSentinel), strings.HasPrefix(spec, "rediss+sentinel://"):
		r, err := NewRedisSentinel(ctx, spec, opts)
		if err != nil {
			return nil, err
		}
		return r, nil
	case strings.HasPrefix(spec, "redis://"), strings.HasPrefix(spec, "rediss://"):
		r, err := NewRedis(ctx, spec, opts)
		if err != nil {
			return nil, err
		}
		return r, nil
	default:
		return nil, fmt.Errorf("store: unknown spec[%s]: want \"memory\", \"bolt:PATH\", \"redis://HOST:PORT/DB\", \"redis+cluster://HOST:PORT,...\" or \"redis+sentinel://HOST:PORT,.../MASTER\"", spec)
	}
}
