// Package entropy is the random source of the http-wasm build's guest instances. A host
// may give its guests a fixed random sequence (Traefik leaves wazero's default: the same
// bytes in every instance), yet every id the exchange core mints (gateway sessions, lease
// tokens, the cache-key secret) must differ between instances and be unguessable. Reader
// is SHA-256 in counter mode over a key hashed from every input it is given.
package entropy

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"time"

	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/httpwasm/filestate"
)

// Reader is a deterministic random bit generator over a seed.
type Reader struct {
	key [32]byte
	ctr uint64
	buf [32]byte
	n   int // bytes of buf not yet used
}

// New returns a Reader keyed by inputs and the wall clock's nanoseconds.
func New(inputs ...[]byte) *Reader {
	h := sha256.New()
	var t [8]byte
	binary.LittleEndian.PutUint64(t[:], uint64(time.Now().UnixNano()))
	h.Write(t[:])
	for _, in := range inputs {
		var l [8]byte
		binary.LittleEndian.PutUint64(l[:], uint64(len(in)))
		h.Write(l[:])
		h.Write(in)
	}
	r := &Reader{}
	h.Sum(r.key[:0])
	return r
}

// Read implements io.Reader; it never fails.
func (r *Reader) Read(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		if r.n == 0 {
			var block [40]byte
			copy(block[:], r.key[:])
			binary.LittleEndian.PutUint64(block[32:], r.ctr)
			r.ctr++
			r.buf = sha256.Sum256(block[:])
			r.n = len(r.buf)
		}
		c := copy(p, r.buf[len(r.buf)-r.n:])
		r.n -= c
		p = p[c:]
	}
	return total, nil
}

// InstanceKey is the state key counting the guest instances that started on a state
// directory.
const InstanceKey = "stategate/httpwasm/instances"

// Instance draws this instance's number from the state directory at dir: a counter under
// InstanceKey, incremented with compare-and-set, so no two instances on the directory get
// the same number. ok is false when the directory cannot be used.
func Instance(dir string) (n uint64, ok bool) {
	d, err := filestate.Open(dir, "seed-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err != nil {
		return 0, false
	}
	for range 1000 {
		v, err := d.Get([]string{InstanceKey})
		if err != nil || len(v) != 1 {
			return 0, false
		}
		cur := uint64(0)
		if v[0].Ok {
			if cur, err = strconv.ParseUint(string(v[0].B), 10, 64); err != nil {
				cur = 0
			}
		}
		next := kvstate.Value{B: strconv.AppendUint(nil, cur+1, 10), Ok: true}
		if done, err := d.CAS("", InstanceKey, v[0], next); err != nil {
			return 0, false
		} else if done {
			return cur + 1, true
		}
	}
	return 0, false
}
