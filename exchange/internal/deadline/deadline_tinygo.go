//go:build tinygo

package deadline

import (
	"context"
	"time"
)

// The core in the TinyGo module (-scheduler=none: no goroutines) runs one call at a time,
// and the host owns time: a deadline is the host's (http_timeout). deadline.go has the
// native versions.

// Within returns ctx: no context with a deadline (its cancel propagation needs a
// goroutine), the host bounds the call.
func Within(ctx context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
	return ctx, func() {}
}

// Detached is ctx without its cancellation: the module has no timers.
func Detached(ctx context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
	return context.WithoutCancel(ctx), func() {}
}

// Lazy is Within.
func Lazy(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return Within(ctx, d)
}
