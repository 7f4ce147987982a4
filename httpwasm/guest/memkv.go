package guest

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/stategate/stategate/exchange/kvstate"
)

// MemKV is kvstate.KV in one guest instance's memory: the state of a configuration that
// needs none shared between requests (no stateDir). What it holds lives as long as the
// instance, which the host may replace at any time.
type MemKV map[string][]byte

// MaxMemKeys bounds the keys a MemKV holds (a session's record, its tool list): at the
// bound, a key is not created and the call that needed it fails as a store failure would.
const MaxMemKeys = 65536

// Get implements kvstate.KV.
func (m MemKV) Get(keys []string) ([]kvstate.Value, error) {
	out := make([]kvstate.Value, len(keys))
	for i, k := range keys {
		if v, ok := m[k]; ok {
			out[i] = kvstate.Value{B: v, Ok: true}
		}
	}
	return out, nil
}

// CAS implements kvstate.KV.
func (m MemKV) CAS(_ string, key string, prev, next kvstate.Value) (bool, error) {
	cur, ok := m[key]
	if ok != prev.Ok || !bytes.Equal(cur, prev.B) {
		return false, nil
	}
	if next.Ok && !ok && len(m) >= MaxMemKeys {
		return false, errors.New("the instance's state holds " + strconv.Itoa(MaxMemKeys) + " keys: no more are created (set httpWasm.stateDir)")
	}
	if next.Ok {
		m[key] = append([]byte(nil), next.B...)
	} else {
		delete(m, key)
	}
	return true, nil
}
