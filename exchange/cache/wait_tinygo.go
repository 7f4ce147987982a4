//go:build tinygo

package cache

import (
	"context"
	"time"
)

// waitFlight never waits in the module (-scheduler=none: one thread, no goroutines): the
// call goes upstream itself.
func waitFlight(context.Context, *flight, time.Duration) bool { return false }
