package filter

import (
	"errors"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/tidwall/gjson"
)

// store keeps workflow snapshots in Envoy shared data (per Envoy process and vm_id), under
// the keys the engine names.
//
// # Notes
//
//   - Snapshots are stored as the engine gave them and written back with compare-and-set on
//     the cas Envoy returned with the read.
//   - Shared data has no delete: an empty value is a tombstone and reads as absent (null).
//     Keys therefore never shrink; maxKeys bounds the keys this VM creates.
//   - Envoy ignores cas 0 ("write unconditionally") and creates an absent key whatever the
//     cas. A key read as absent is therefore created with casCreate, a cas no live entry is
//     expected to hold: Envoy creates the key if it is still absent and answers CasMismatch
//     if another worker created it meanwhile, which gives create-if-absent semantics.
type store struct {
	maxKeys int
	created int // keys this VM created
}

// casCreate is the cas used to create a key read as absent. Envoy's cas counter is
// process-wide, starts at 1 and would have to reach 2^32-2 and sit on exactly this key for
// the create to be mistaken for an update.
const casCreate = 0xfffffffe

// slot is one key as read: its stored snapshot (nil when absent or tombstoned) and the cas
// to write it back with (0 when the key does not exist).
type slot struct {
	value  []byte
	cas    uint32
	exists bool
}

var (
	errConflict = errors.New("compare-and-set conflict")
	errFull     = errors.New("state key bound reached")
)

// load reads keys. A read error other than "not found" is an error: the caller decides.
func (s *store) load(keys []string) (map[string]slot, error) {
	out := make(map[string]slot, len(keys))
	for _, k := range keys {
		v, cas, err := proxywasm.GetSharedData(k)
		switch {
		case errors.Is(err, types.ErrorStatusNotFound):
			out[k] = slot{}
		case err != nil:
			return nil, errors.New("reading shared data key[" + k + "]: " + err.Error())
		default:
			// Copy: the host's buffer is not ours to keep.
			out[k] = slot{value: append([]byte(nil), v...), cas: cas, exists: true}
		}
	}
	return out, nil
}

// canCreate reports whether n more keys may be created.
func (s *store) canCreate(n int) bool { return s.created+n <= s.maxKeys }

// write stores value under key with compare-and-set against prev (as read by load).
func (s *store) write(key string, value []byte, prev slot) error {
	cas := prev.cas
	if !prev.exists {
		if !s.canCreate(1) {
			return errFull
		}
		cas = casCreate
	}
	err := proxywasm.SetSharedData(key, value, cas)
	switch {
	case errors.Is(err, types.ErrorStatusCasMismatch):
		return errConflict
	case err != nil:
		return errors.New("writing shared data key[" + key + "]: " + err.Error())
	}
	if !prev.exists {
		s.created++
	}
	return nil
}

// tombstone empties key (shared data has no delete), retrying conflicts up to retries times.
// An absent or already empty key is left alone.
func (s *store) tombstone(key string, retries int) error {
	for i := 0; ; i++ {
		v, cas, err := proxywasm.GetSharedData(key)
		if errors.Is(err, types.ErrorStatusNotFound) || (err == nil && len(v) == 0) {
			return nil
		}
		if err != nil {
			return err
		}
		err = proxywasm.SetSharedData(key, nil, cas)
		if err == nil || !errors.Is(err, types.ErrorStatusCasMismatch) || i >= retries {
			return err
		}
	}
}

// appendStates appends "states":{key: snapshot|null, ...} for the engine. A stored value
// that is not JSON (it never is, unless something else wrote the key) is passed as a JSON
// string, which the engine reads as "not a snapshot" and restarts (STATE_RESET).
func appendStates(dst []byte, keys []string, slots map[string]slot) []byte {
	dst = append(dst, `"states":{`...)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		v := slots[k].value
		switch {
		case len(v) == 0:
			dst = append(dst, "null"...)
		case gjson.ValidBytes(v):
			dst = append(dst, v...)
		default:
			dst = appendString(dst, string(v))
		}
	}
	return append(dst, '}')
}
