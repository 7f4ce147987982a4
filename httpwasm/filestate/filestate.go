// Package filestate is kvstate.KV over the files of one directory: the state of the
// http-wasm build (httpwasm/), whose ABI has no shared data, kept where every guest
// instance of every host process that mounts the directory sees the same values.
//
// # Notes
//
//   - A key's value is one file, "v-<sha256 of the key>", holding the value's bytes. It is
//     only ever replaced by a rename of a fully written temporary file, so a read never
//     sees half a value and Get takes no lock.
//   - A compare-and-set holds the key's lock file, "l-<sha256>", created with O_CREAT|O_EXCL
//     (one creator wins, at the file system), for the read, the compare and the rename; the
//     lock holds its expiry (unix ms). A lock past its expiry (its holder trapped or was
//     closed in the middle) is broken: renamed away, so that of two breakers one wins.
//   - Leases (kvstate) are keys like any other: compare-and-set on them is what makes them
//     exclusive, and their expiry is what frees them, so no lock file is held across calls.
//   - Nothing is fsynced: a value survives the guest and the host process, not a power
//     loss of the machine (RATIONALE.md, "State in a host whose ABI has none").
package filestate

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/stategate/stategate/exchange/kvstate"
)

// Dir is kvstate.KV over the files of one directory.
type Dir struct {
	path string
	// Now is the clock lock files expire by (nil: time.Now).
	Now func() time.Time
	// Hold is how long a lock file stays valid (the longest a compare-and-set may take
	// before another caller may break it); Wait bounds how long CAS waits for a lock.
	Hold, Wait time.Duration
	// Unique names temporary files apart (an instance's own prefix, then a counter).
	Unique string
	seq    uint64
}

// Open returns the Dir at path after checking that files can be created there
// exclusively, renamed and removed: what every compare-and-set does.
func Open(path, unique string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("filestate: no directory given")
	}
	d := &Dir{path: path, Hold: 2 * time.Second, Wait: 5 * time.Second, Unique: unique}
	st, err := os.Stat(path)
	if err != nil {
		return nil, errors.New("filestate: directory[" + path + "]: " + err.Error())
	}
	if !st.IsDir() {
		return nil, errors.New("filestate: directory[" + path + "]: not a directory")
	}
	probe := d.file("p-", d.next())
	f, err := os.OpenFile(probe, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, errors.New("filestate: directory[" + path + "]: cannot create files: " + err.Error())
	}
	f.Close()
	if _, err := os.OpenFile(probe, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil || !errors.Is(err, fs.ErrExist) {
		os.Remove(probe)
		return nil, errors.New("filestate: directory[" + path + "]: exclusive create is not honoured")
	}
	moved := probe + ".r"
	if err := os.Rename(probe, moved); err != nil {
		os.Remove(probe)
		return nil, errors.New("filestate: directory[" + path + "]: cannot rename files: " + err.Error())
	}
	if err := os.Remove(moved); err != nil {
		return nil, errors.New("filestate: directory[" + path + "]: cannot remove files: " + err.Error())
	}
	return d, nil
}

func (d *Dir) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Dir) next() string {
	d.seq++
	return d.Unique + "-" + strconv.FormatUint(d.seq, 10)
}

func (d *Dir) file(prefix, name string) string { return d.path + "/" + prefix + name }

// name is the file name part of key: the hex SHA-256 of its bytes (any key, any length).
func name(key string) string {
	sum := sha256.Sum256([]byte(key))
	const hexd = "0123456789abcdef"
	b := make([]byte, 0, 64)
	for _, c := range sum {
		b = append(b, hexd[c>>4], hexd[c&15])
	}
	return string(b)
}

// Get implements kvstate.KV.
func (d *Dir) Get(keys []string) ([]kvstate.Value, error) {
	out := make([]kvstate.Value, len(keys))
	for i, k := range keys {
		v, err := d.read(name(k))
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (d *Dir) read(n string) (kvstate.Value, error) {
	b, err := os.ReadFile(d.file("v-", n))
	switch {
	case err == nil:
		if b == nil {
			b = []byte{}
		}
		return kvstate.Value{B: b, Ok: true}, nil
	case errors.Is(err, fs.ErrNotExist):
		return kvstate.Value{}, nil
	}
	return kvstate.Value{}, errors.New("filestate: read: " + err.Error())
}

// CAS implements kvstate.KV: under the key's lock file, the value is compared with prev
// and replaced by next (written to a temporary file, then renamed over it), or removed.
func (d *Dir) CAS(_ string, key string, prev, next kvstate.Value) (bool, error) {
	n := name(key)
	unlock, err := d.lock(n)
	if err != nil {
		return false, err
	}
	defer unlock()
	cur, err := d.read(n)
	if err != nil {
		return false, err
	}
	if cur.Ok != prev.Ok || !bytes.Equal(cur.B, prev.B) {
		return false, nil
	}
	if !next.Ok {
		if err := os.Remove(d.file("v-", n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, errors.New("filestate: remove: " + err.Error())
		}
		return true, nil
	}
	tmp := d.file("t-", n+"."+d.next())
	if err := os.WriteFile(tmp, next.B, 0o600); err != nil {
		os.Remove(tmp)
		return false, errors.New("filestate: write: " + err.Error())
	}
	if err := os.Rename(tmp, d.file("v-", n)); err != nil {
		os.Remove(tmp)
		return false, errors.New("filestate: rename: " + err.Error())
	}
	return true, nil
}

// lock creates the key's lock file exclusively, waiting (1 ms steps, up to Wait) while
// another holds it, and breaking it once past its expiry.
func (d *Dir) lock(n string) (func(), error) {
	path := d.file("l-", n)
	start := d.now().UnixMilli() // wall clock only: a host's monotonic clock may not be time
	for step := 0; ; step++ {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			exp := strconv.AppendInt(nil, d.now().Add(d.Hold).UnixMilli(), 10)
			_, werr := f.Write(exp)
			f.Close()
			if werr != nil {
				os.Remove(path)
				return nil, errors.New("filestate: lock: " + werr.Error())
			}
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, errors.New("filestate: lock: " + err.Error())
		}
		d.breakStale(path)
		if d.now().UnixMilli()-start > d.Wait.Milliseconds() {
			return nil, errors.New("filestate: lock: held by another caller for longer than " + d.Wait.String())
		}
		time.Sleep(time.Duration(min(step+1, 10)) * 100 * time.Microsecond)
	}
}

// breakStale removes the lock file at path when it is past its expiry, or empty and older
// than Hold (its creator stopped between the create and the write): it is renamed to a
// name of this caller's first, so that of two callers breaking it only one removes it.
func (d *Dir) breakStale(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	now := d.now()
	if len(b) > 0 {
		exp, err := strconv.ParseInt(string(b), 10, 64)
		if err == nil && exp > now.UnixMilli() {
			return
		}
	} else if st, err := os.Stat(path); err != nil || now.UnixMilli()-st.ModTime().UnixMilli() < d.Hold.Milliseconds() {
		return
	}
	gone := path + ".stale." + d.next()
	if os.Rename(path, gone) == nil {
		os.Remove(gone)
	}
}

// ValueFile is the name of the file holding key's value in the directory.
func ValueFile(key string) string { return "v-" + name(key) }
