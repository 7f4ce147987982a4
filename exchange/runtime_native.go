//go:build !tinygo

package exchange

import (
	"context"
	"crypto/rand"
	"strings"
	"time"
	"unsafe"
)

// The runtime seams between the native core and the core in the TinyGo module
// (runtime_tinygo.go): what needs goroutines or timers natively has a single-threaded
// stand-in there, where the host owns time (RATIONALE.md, "The exchange in the module").

// withTimeout bounds ctx by d.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// randomText is crypto/rand.Text: 26 base32 characters, 128 bits.
func randomText() string { return rand.Text() }

// spawn runs f on its own goroutine.
func spawn(f func()) { go f() }

// timersFire: afterFunc's functions run when their time comes.
const timersFire = true

// stopper is a timer that can be stopped.
type stopper interface{ Stop() bool }

// afterFunc is time.AfterFunc.
func afterFunc(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }

// unzeroed returns an empty buffer of capacity n whose bytes are not zeroed first
// (strings.Builder.Grow): a list's buffer is hundreds of KB, and every byte of it is
// written. (TinyGo's allocator zeroes every allocation anyway: runtime_tinygo.go.)
func unzeroed(n int) []byte {
	var b strings.Builder
	b.Grow(max(n, 1))
	b.WriteByte(0) // a string of one byte: its data is the buffer's
	s := b.String()
	return unsafe.Slice(unsafe.StringData(s), max(n, 1))[:0]
}
