package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The file's layout (see Bolt). Bucket names and the format header are part of it:
// changing what a bucket holds means a new boltVersion.
var (
	bucketMeta     = []byte("meta")
	bucketData     = []byte("data")
	bucketExpiry   = []byte("expiry")
	bucketSessions = []byte("sessions")
	bucketOwners   = []byte("owners")

	metaFormat  = []byte("format")
	metaVersion = []byte("version")
)

const (
	boltFormat  = "stategate-store"
	boltVersion = "1"

	// boltLockTimeout is how long an open waits for another process's lock on the file.
	boltLockTimeout = time.Second
)

// boltBuckets are a transaction's buckets, all present once the format is checked.
type boltBuckets struct {
	data, expiry, sessions, owners *bbolt.Bucket
}

func bucketsOf(tx *bbolt.Tx) boltBuckets {
	bk := boltBuckets{
		data:     tx.Bucket(bucketData),
		expiry:   tx.Bucket(bucketExpiry),
		sessions: tx.Bucket(bucketSessions),
		owners:   tx.Bucket(bucketOwners),
	}
	// Expiry keys start with the time, so inserts land at the end of the index: split its
	// pages nearly full (bbolt's default of half full suits random keys, as in the others).
	bk.expiry.FillPercent = 0.9
	return bk
}

// dataKey is the data bucket's key for key: bbolt refuses empty keys, so every key gets a
// one-byte prefix.
func dataKey(key string) []byte { return append([]byte{'k'}, key...) }

// record is a data bucket value: the expiry (Unix nanoseconds, big-endian) and the value.
func record(expires uint64, value []byte) []byte {
	r := make([]byte, 8, 8+len(value))
	binary.BigEndian.PutUint64(r, expires)
	return append(r, value...)
}

// expiryKey is the expiry index's key: the expiry first, so a cursor meets the oldest
// entries first.
func expiryKey(expires uint64, key string) []byte {
	k := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(k, expires)
	return append(k, key...)
}

// sessionKey and ownerKey index (session, key) pairs both ways. A length prefix keeps
// prefix scans exact: uvarints are prefix-free, so the keys starting with
// lengthPrefixed(session) are exactly that session's.
func sessionKey(session, key string) []byte { return append(lengthPrefixed(session), key...) }
func ownerKey(key, session string) []byte   { return append(lengthPrefixed(key), session...) }

func lengthPrefixed(s string) []byte {
	b := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(s)), uint64(len(s)))
	return append(b, s...)
}

// splitLengthPrefixed splits a sessions or owners key into its two strings.
func splitLengthPrefixed(k []byte) (first, rest string, ok bool) {
	n, w := binary.Uvarint(k)
	if w <= 0 || n > uint64(len(k)-w) {
		return "", "", false
	}
	return string(k[w : w+int(n)]), string(k[w+int(n):]), true
}

// suffixes returns what follows prefix in every key of b that starts with it.
func suffixes(b *bbolt.Bucket, prefix []byte) []string {
	var out []string
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		out = append(out, string(k[len(prefix):]))
	}
	return out
}

// has reports whether b holds k (Get cannot tell an empty value from none).
func has(b *bbolt.Bucket, k []byte) bool {
	got, _ := b.Cursor().Seek(k)
	return bytes.Equal(got, k)
}

// openBoltFile opens the store file at path for writing, creating it (with its header)
// when absent or empty. A file that is locked, damaged, not bbolt, another program's
// bbolt database, or another format version is refused and left as it was.
func openBoltFile(path string) (*bbolt.DB, error) {
	info, err := os.Stat(path)
	switch {
	case err == nil && info.Size() > 0:
		// Read-only first: refusing a file must not write to it (bbolt's read-write open
		// may commit on its own, e.g. to add a freelist), and the full walk reads every page.
		if err := inspectBoltFile(path); err != nil {
			return nil, err
		}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	db, err := openBoltDB(path, false)
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		switch fresh, err := checkFormat(tx); {
		case err != nil:
			return err
		case !fresh:
			return errRollback // nothing to write
		}
		return initFormat(tx)
	})
	if err != nil && !errors.Is(err, errRollback) {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// openBoltDB opens path with bbolt, waiting at most boltLockTimeout for another
// process's lock, and names each way it can fail.
func openBoltDB(path string, readOnly bool) (db *bbolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, refuse("damaged file: bbolt failed reading it: %v", p)
		}
	}()
	db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: boltLockTimeout, ReadOnly: readOnly})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("file is locked (waited %s): another stategate may be using it: %w", boltLockTimeout, err)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, refuse("not a bbolt database, or a damaged one: %w", err)
	case err != nil:
		return nil, err
	}
	return db, nil
}

// inspectBoltFile checks, read-only, that path holds a stategate store (or an empty bbolt
// database) and that every page reachable from its buckets reads back.
func inspectBoltFile(path string) (err error) {
	db, err := openBoltDB(path, true)
	if err != nil {
		return err
	}
	defer db.Close()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = refuse("damaged file: bbolt failed reading it: %v", p)
		}
	}()
	return db.View(func(tx *bbolt.Tx) error {
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		if info.Size() < tx.Size() {
			return refuse("damaged file: %d bytes, but its pages reach byte %d (truncated?)", info.Size(), tx.Size())
		}
		if fresh, err := checkFormat(tx); err != nil || fresh {
			return err
		}
		return walkBoltFile(tx)
	})
}

// refuse formats the error for a file that is not (or no longer) a store this release
// can use, and says what to do.
func refuse(format string, args ...any) error {
	return fmt.Errorf(format+" (left as it is: move it away, or use another path, to start afresh)", args...)
}

// checkFormat reports whether tx's database is empty (fresh: no bucket at all), or
// refuses it unless it holds this format and version with every bucket.
func checkFormat(tx *bbolt.Tx) (fresh bool, err error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		name, _ := tx.Cursor().First()
		if name == nil {
			return true, nil
		}
		return false, refuse("not a stategate store: no %q bucket, but a bucket[%q]: another program's bbolt database", bucketMeta, name)
	}
	if f := meta.Get(metaFormat); string(f) != boltFormat {
		return false, refuse("not a stategate store: format[%q], want %q", f, boltFormat)
	}
	if v := meta.Get(metaVersion); string(v) != boltVersion {
		return false, refuse("format version[%s] is not supported (want %s): written by another stategate release", v, boltVersion)
	}
	for _, name := range [][]byte{bucketData, bucketExpiry, bucketSessions, bucketOwners} {
		if tx.Bucket(name) == nil {
			return false, refuse("damaged file: bucket[%s] is missing", name)
		}
	}
	return false, nil
}

// initFormat writes the header and creates the buckets of a fresh file.
func initFormat(tx *bbolt.Tx) error {
	meta, err := tx.CreateBucket(bucketMeta)
	if err != nil {
		return err
	}
	if err := meta.Put(metaFormat, []byte(boltFormat)); err != nil {
		return err
	}
	if err := meta.Put(metaVersion, []byte(boltVersion)); err != nil {
		return err
	}
	for _, name := range [][]byte{bucketData, bucketExpiry, bucketSessions, bucketOwners} {
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	return nil
}

// walkBoltFile reads every entry of every bucket (so every reachable page) and checks
// the shape of each key and value.
func walkBoltFile(tx *bbolt.Tx) error {
	bk := bucketsOf(tx)
	check := func(name []byte, b *bbolt.Bucket, ok func(k, v []byte) bool) error {
		return b.ForEach(func(k, v []byte) error {
			if !ok(k, v) {
				return refuse("damaged file: bucket[%s] has a malformed entry (key %q)", name, k)
			}
			return nil
		})
	}
	if err := check(bucketData, bk.data, func(k, v []byte) bool { return len(k) > 0 && k[0] == 'k' && len(v) >= 8 }); err != nil {
		return err
	}
	if err := check(bucketExpiry, bk.expiry, func(k, _ []byte) bool { return len(k) >= 8 }); err != nil {
		return err
	}
	split := func(k, _ []byte) bool { _, _, ok := splitLengthPrefixed(k); return ok }
	if err := check(bucketSessions, bk.sessions, split); err != nil {
		return err
	}
	return check(bucketOwners, bk.owners, split)
}
