//go:build !tinygo

package cache

import (
	"context"
	"time"
)

// waitFlight waits up to wait for f, the flight of an identical call, and reports whether
// it ended with a cacheable result (in f.result).
func waitFlight(ctx context.Context, f *flight, wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-f.done:
		return f.result != nil
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
