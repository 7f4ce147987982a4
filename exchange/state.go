package exchange

import (
	"context"
	"time"
	"unsafe"

	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/state"
)

// The state contract every host keeps (exchange/state), under the names hosts know it by.
type (
	State        = state.State
	Capabilities = state.Capabilities
	Lease        = state.Lease
	LeaseFunc    = state.LeaseFunc
	Slot         = state.Slot
)

// Errors a State returns (state.ErrConflict, state.ErrBusy).
var (
	ErrConflict = state.ErrConflict
	ErrBusy     = state.ErrBusy
)

// Replace replaces the value under key by the core's state protocol (state.Replace).
func Replace(ctx context.Context, st State, owner, key string, wait time.Duration, fn func(Slot) ([]byte, error)) error {
	return state.Replace(ctx, st, owner, key, wait, fn)
}

// ownedBytes is the bytes of a member read by driver.ParseOwned (or of any string), not a
// copy: they must never be written to (nil for "").
func ownedBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// ownedString is b as a string, not a copy: b must not change while it is used.
func ownedString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// PluginError is an engine export's error answer (driver.PluginError).
type PluginError = driver.PluginError
