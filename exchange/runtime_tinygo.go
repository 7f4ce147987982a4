//go:build tinygo

package exchange

import (
	"context"
	"crypto/rand"
	"time"
)

// The core in the TinyGo module (-scheduler=none: no goroutines) runs one call at a time,
// and the host owns time: a deadline is the host's (http_timeout), a lease lapses by the
// expiry stored with it, and a cache flight is never joined (waiting would block the only
// thread: exchange/cache/wait_tinygo.go). runtime_native.go has the native versions.

// withTimeout returns ctx: no context with a deadline (its cancel propagation needs a
// goroutine), the host bounds the call.
func withTimeout(ctx context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
	return ctx, func() {}
}

const base32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// randomText is crypto/rand.Text (not in TinyGo's crypto/rand): 26 base32 characters.
func randomText() string {
	var b [26]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = base32[b[i]%32]
	}
	return string(b[:])
}

// spawn runs f now.
func spawn(f func()) { f() }

// timersFire: afterFunc's functions run when their time comes.
const timersFire = false

// stopper is a timer that can be stopped.
type stopper interface{ Stop() bool }

type never struct{}

func (never) Stop() bool { return true }

// afterFunc never fires: a task's lease lapses in the store by its expiry.
func afterFunc(time.Duration, func()) stopper { return never{} }

// unzeroed returns an empty buffer of capacity n (TinyGo's allocator zeroes every
// allocation: no way around it, and the native version's strings.Builder costs module
// size).
//
//go:inline
func unzeroed(n int) []byte { return make([]byte, 0, n) }

// detachedTimeout is ctx without its cancellation: the module has no timers.
func detachedTimeout(ctx context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
	return context.WithoutCancel(ctx), func() {}
}

// lazyTimeout is withTimeout.
func lazyTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return withTimeout(ctx, d)
}
