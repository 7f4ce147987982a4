package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/bbolt"
)

// Bolt is the Store in one file on disk (bbolt, a copy-on-write B+tree), for a single
// gateway that keeps its workflows across restarts.
//
// # Notes
//
//   - Durability: every CompareAndSwap that returns true is its own read-write
//     transaction, committed and synced (fdatasync) before it returns: a killed process
//     loses no acknowledged write (TestBolt_killedMidLoadLosesNothing), nor does a power
//     cut on a disk that honours the sync. Writes are serialised and each waits for its
//     sync, which bounds them at about 1/(sync latency): ~0.7 ms, ~1,400 writes a second
//     on the disk here (BenchmarkStore/bolt/CompareAndSwap). A conflict, a Forget of an
//     unknown session and a refresh that is not due commit nothing.
//   - ctx is checked when an operation starts; bbolt transactions cannot be interrupted.
//   - One process: bbolt locks the file (flock). A second open, in this process or
//     another, fails after boltLockTimeout (1s) with an error naming the path and saying
//     another stategate may be using it. Leases (Lock) therefore live in this process, as
//     for Memory, and lapse after their ttl.
//   - Opening never resets or rewrites a file it did not create. A new or empty file gets
//     the "meta" bucket (format "stategate-store", version "1") and the buckets below.
//     Any other file is first opened read-only and refused, unchanged, when it is not
//     bbolt, is damaged (bad meta pages, truncated, a page that does not read back, a
//     malformed entry: the open reads every entry, O(file size), about 15 ms per 10,000
//     entries here), is another program's bbolt database (no "meta" bucket) or has another
//     format version. An empty bbolt database (no buckets) is adopted.
//   - Layout, one bucket each:
//     data: 'k'+key → expiry (8 bytes, Unix ns, big-endian) + value;
//     expiry: expiry (8 bytes) + key → "" (oldest first, for the sweeper);
//     sessions: uvarint(len(session)) + session + key → "" (what Forget deletes);
//     owners: uvarint(len(key)) + key + session → "" (the sessions to unlink when an entry
//     goes).
//   - Size: an entry written by one session stores its key four times, its session twice
//     and its value once, plus 16 bytes of bbolt header per bucket entry: ~505 bytes for a
//     60-byte key, a 36-byte session and a 110-byte value, ~745 bytes of file with pages
//     about 70% full (random keys split pages half full; the expiry index, written in
//     time order, splits them 90% full). Measured by TestBolt_bytesPerEntry. Freed pages
//     are reused; the file does not shrink.
//   - Idle TTL: each entry stores its expiry; a read that finds it expired answers absent.
//     A read refreshes the expiry with a write transaction (a sync) only when the last
//     refresh is older than 1% of IdleTTL or a minute, whichever is less, so a hot key is
//     written at most once a minute and an entry lives between IdleTTL minus that and
//     IdleTTL after its last read.
//   - A sweeper goroutine deletes expired entries (with their index entries), oldest
//     first, 1,000 per transaction, every IdleTTL/10 clamped to [1s, 1min]; Close stops it.
//   - Options.MaxEntries does not apply: the file holds what was written within IdleTTL.
//   - Values are copied in and out; callers may reuse their slices.
type Bolt struct {
	db    *bbolt.DB
	path  string
	ttl   time.Duration
	slack time.Duration    // a read refreshes an expiry set longer ago than this
	now   func() time.Time // the clock of expiries; tests replace it

	leases    *leases
	stop      chan struct{} // closed by Close
	swept     chan struct{} // closed when the sweeper has stopped
	closeOnce sync.Once
	closeErr  error
}

var _ Store = (*Bolt)(nil)

// errRollback ends a read-write transaction that has nothing to write, without a commit
// (and its sync).
var errRollback = errors.New("rollback")

// sweepBatch bounds the entries one sweeper transaction deletes, so writers wait little.
const sweepBatch = 1000

// NewBolt opens the store in the file at path, creating it when absent (see Bolt for what
// it refuses), and starts its sweeper.
func NewBolt(path string, opts Options) (*Bolt, error) {
	opts = opts.withDefaults()
	return openBolt(path, opts, time.Now, min(max(opts.IdleTTL/10, time.Second), time.Minute))
}

func openBolt(path string, opts Options, now func() time.Time, sweepEvery time.Duration) (*Bolt, error) {
	opts = opts.withDefaults()
	db, err := openBoltFile(path)
	if err != nil {
		return nil, fmt.Errorf("store[bolt] path[%s]: %w", path, err)
	}
	b := &Bolt{
		db:     db,
		path:   path,
		ttl:    opts.IdleTTL,
		slack:  min(opts.IdleTTL/100, time.Minute),
		now:    now,
		leases: newLeases("bolt"),
		stop:   make(chan struct{}),
		swept:  make(chan struct{}),
	}
	go b.sweeper(sweepEvery)
	return b, nil
}

// Get implements Store.Get.
func (b *Bolt) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := b.now()
	var v []byte
	var due bool
	err := b.db.View(func(tx *bbolt.Tx) error {
		exp, val, err := readRecord(tx.Bucket(bucketData).Get(dataKey(key)), now)
		if val != nil {
			v, due = bytes.Clone(val), b.due(exp, now)
		}
		return err
	})
	if err == nil && due {
		err = b.db.Update(func(tx *bbolt.Tx) error {
			bk, now := bucketsOf(tx), b.now()
			exp, val, err := readRecord(bk.data.Get(dataKey(key)), now)
			v = bytes.Clone(val)
			switch {
			case err != nil:
				return err
			case val == nil || !b.due(exp, now): // gone, or refreshed meanwhile
				return errRollback
			}
			return b.put(bk, key, exp, true, val, now)
		})
		if errors.Is(err, errRollback) {
			err = nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("store[bolt] path[%s] key[%q]: get: %w", b.path, key, err)
	}
	return v, nil
}

// CompareAndSwap implements Store.CompareAndSwap in one committed transaction.
func (b *Bolt) CompareAndSwap(ctx context.Context, session, key string, old, new []byte) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	err := b.db.Update(func(tx *bbolt.Tx) error {
		return b.cas(bucketsOf(tx), session, key, old, new, b.now()) // now: after waiting for the writer lock
	})
	switch {
	case errors.Is(err, errRollback):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("store[bolt] path[%s] key[%q]: compare-and-swap: %w", b.path, key, err)
	}
	return true, nil
}

// cas is CompareAndSwap inside a read-write transaction; errRollback is a conflict.
func (b *Bolt) cas(bk boltBuckets, session, key string, old, new []byte, now time.Time) error {
	rec := bk.data.Get(dataKey(key))
	exp, cur, err := readRecord(rec, now)
	switch {
	case err != nil:
		return err
	case old == nil && cur != nil, old != nil && (cur == nil || !bytes.Equal(cur, old)):
		return errRollback
	case cur == nil && rec != nil: // expired, not swept yet: drop it and its sessions
		if err := bk.remove(key); err != nil {
			return err
		}
	}
	if err := b.put(bk, key, exp, cur != nil, new, now); err != nil {
		return err
	}
	if session == "" || has(bk.owners, ownerKey(key, session)) {
		return nil
	}
	if err := bk.owners.Put(ownerKey(key, session), nil); err != nil {
		return err
	}
	return bk.sessions.Put(sessionKey(session, key), nil)
}

// Forget implements Store.Forget.
func (b *Bolt) Forget(ctx context.Context, session string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if session == "" {
		return nil
	}
	err := b.db.Update(func(tx *bbolt.Tx) error {
		bk := bucketsOf(tx)
		keys := suffixes(bk.sessions, lengthPrefixed(session))
		if len(keys) == 0 {
			return errRollback
		}
		for _, k := range keys {
			if err := bk.remove(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errRollback) {
		return fmt.Errorf("store[bolt] path[%s] session[%q]: forget: %w", b.path, session, err)
	}
	return nil
}

// Lock implements Store.Lock with leases in this process (see leases): the file is this
// process's alone, so no other gateway can contend for its keys.
func (b *Bolt) Lock(ctx context.Context, keys []string, ttl time.Duration) (func(), error) {
	select {
	case <-b.stop:
		return nil, fmt.Errorf("store[bolt] path[%s]: lock: %w", b.path, errClosed)
	default:
	}
	return b.leases.lock(ctx, keys, ttl)
}

var errClosed = errors.New("store is closed")

// Close implements Store.Close: it stops the sweeper and closes the file (waiting for
// transactions in flight). Calling it again returns the first call's result.
func (b *Bolt) Close() error {
	b.closeOnce.Do(func() {
		close(b.stop)
		<-b.swept
		if err := b.db.Close(); err != nil {
			b.closeErr = fmt.Errorf("store[bolt] path[%s]: close: %w", b.path, err)
		}
	})
	return b.closeErr
}

// errDamagedRecord marks a data record too short to hold its expiry.
var errDamagedRecord = errors.New("damaged record")

// readRecord splits a data record into its expiry and value. The value is nil when rec
// is nil or expired at now; it points into bbolt's pages (valid during the transaction).
func readRecord(rec []byte, now time.Time) (expires uint64, value []byte, err error) {
	switch {
	case rec == nil:
		return 0, nil, nil
	case len(rec) < 8:
		return 0, nil, errDamagedRecord
	}
	expires = binary.BigEndian.Uint64(rec)
	if uint64(now.UnixNano()) >= expires {
		return expires, nil, nil
	}
	return expires, rec[8:len(rec):len(rec)], nil
}

// due reports whether a read at now should refresh an entry expiring at expires.
func (b *Bolt) due(expires uint64, now time.Time) bool {
	touched := int64(expires) - b.ttl.Nanoseconds()
	return now.UnixNano()-touched >= b.slack.Nanoseconds()
}

// put writes value under key, expiring IdleTTL after now, and moves its expiry index
// entry (from oldExpires, when hadOld).
func (b *Bolt) put(bk boltBuckets, key string, oldExpires uint64, hadOld bool, value []byte, now time.Time) error {
	if hadOld {
		if err := bk.expiry.Delete(expiryKey(oldExpires, key)); err != nil {
			return err
		}
	}
	exp := uint64(now.Add(b.ttl).UnixNano())
	if err := bk.data.Put(dataKey(key), record(exp, value)); err != nil {
		return err
	}
	return bk.expiry.Put(expiryKey(exp, key), nil)
}

// remove deletes key's entry, its expiry index entry and its (session, key) pairs.
func (bk boltBuckets) remove(key string) error {
	dk := dataKey(key)
	if rec := bk.data.Get(dk); len(rec) >= 8 {
		if err := bk.expiry.Delete(expiryKey(binary.BigEndian.Uint64(rec), key)); err != nil {
			return err
		}
	}
	if err := bk.data.Delete(dk); err != nil {
		return err
	}
	for _, s := range suffixes(bk.owners, lengthPrefixed(key)) {
		if err := bk.owners.Delete(ownerKey(key, s)); err != nil {
			return err
		}
		if err := bk.sessions.Delete(sessionKey(s, key)); err != nil {
			return err
		}
	}
	return nil
}

// sweeper runs sweep every interval until Close.
func (b *Bolt) sweeper(every time.Duration) {
	defer close(b.swept)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			// An error (a full disk) leaves the entries for the next round; reads already
			// answer them as absent.
			_, _ = b.sweep()
		}
	}
}

// sweep deletes every entry expired at b.now(), sweepBatch per transaction, and returns
// how many it deleted.
func (b *Bolt) sweep() (int, error) {
	total := 0
	for {
		now := uint64(b.now().UnixNano())
		var expired []string
		err := b.db.View(func(tx *bbolt.Tx) error {
			c := tx.Bucket(bucketExpiry).Cursor()
			for k, _ := c.First(); k != nil && len(expired) < sweepBatch; k, _ = c.Next() {
				if len(k) < 8 || binary.BigEndian.Uint64(k) > now {
					break
				}
				expired = append(expired, string(k))
			}
			return nil
		})
		if err != nil || len(expired) == 0 {
			return total, err
		}
		select {
		case <-b.stop: // Close is waiting
			return total, nil
		default:
		}
		deleted := 0
		err = b.db.Update(func(tx *bbolt.Tx) error {
			bk := bucketsOf(tx)
			deleted = 0
			for _, ek := range expired {
				key := ek[8:]
				// Still the entry's expiry? A write since the View moved it.
				rec := bk.data.Get(dataKey(key))
				if len(rec) >= 8 && !bytes.Equal(rec[:8], []byte(ek[:8])) {
					continue
				}
				if err := bk.expiry.Delete([]byte(ek)); err != nil {
					return err
				}
				if err := bk.remove(key); err != nil {
					return err
				}
				deleted++
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += deleted
		if len(expired) < sweepBatch {
			return total, nil
		}
	}
}
