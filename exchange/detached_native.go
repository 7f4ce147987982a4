//go:build !tinygo

package exchange

import (
	"context"
	"sync"
	"time"
)

// detachedTimeout is context.WithTimeout(context.WithoutCancel(ctx), d) whose timer is
// set only when something asks for Done (or an AfterFunc): a store that waits, an
// engine call the pool may interrupt. A settled success's transition writes to the store
// and asks for neither on the memory and Bolt stores; a timer set and stopped costs
// allocations and the runtime's timer heap on every call (RATIONALE.md, "What a moving
// call costs over an ungated one").
//
// # Notes
//
//   - Until Done is asked for, Err reads the clock; once it is, the context is the one
//     WithTimeout would have made, and answers as it does.
//   - Values are ctx's, except the context package's own cancel key, which WithoutCancel
//     hides (so context.Cause and the propagation of cancellation see this context's
//     own ending, not ctx's).
//   - Value calls ctx's Value directly: a WithoutCancel context reached through another
//     context's Value boxes its receiver (an allocation per lookup; wazero looks values up
//     on every engine call).
func detachedTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c := &detachedCtx{parent: ctx, at: time.Now().Add(d)}
	return c, c.end
}

type detachedCtx struct {
	parent context.Context
	at     time.Time
	mu     sync.Mutex
	real   context.Context // made by realize
	cancel context.CancelFunc
	ended  bool // end was called
	late   bool // end was called at or after the deadline
}

func (c *detachedCtx) Deadline() (time.Time, bool) { return c.at, true }

func (c *detachedCtx) Value(key any) any {
	if key == cancelCtxKey {
		return nil
	}
	return c.parent.Value(key)
}

func (c *detachedCtx) Done() <-chan struct{} { return c.realize().Done() }

// AfterFunc makes context.AfterFunc (and a child's cancellation) use the real context.
func (c *detachedCtx) AfterFunc(f func()) func() bool { return context.AfterFunc(c.realize(), f) }

func (c *detachedCtx) Err() error {
	c.mu.Lock()
	real, ended, late := c.real, c.ended, c.late
	c.mu.Unlock()
	switch {
	case real != nil:
		return real.Err()
	case ended && !late:
		return context.Canceled
	case ended || !time.Now().Before(c.at):
		return context.DeadlineExceeded
	}
	return nil
}

func (c *detachedCtx) realize() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real == nil {
		c.real, c.cancel = context.WithDeadline(context.WithoutCancel(c.parent), c.at)
		if c.ended && !c.late {
			c.cancel()
		}
	}
	return c.real
}

func (c *detachedCtx) end() {
	c.mu.Lock()
	if !c.ended {
		c.ended, c.late = true, !time.Now().Before(c.at)
	}
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// cancelCtxKey is the key by which the context package finds a context's cancelCtx
// (unexported): context.Cause asks a context's Value for it first.
var cancelCtxKey = func() any {
	p := &keyProbe{}
	_ = context.Cause(p)
	return p.key
}()

type keyProbe struct{ key any }

func (*keyProbe) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*keyProbe) Done() <-chan struct{}       { return nil }
func (*keyProbe) Err() error                  { return context.Canceled }
func (p *keyProbe) Value(key any) any {
	if p.key == nil {
		p.key = key
	}
	return nil
}
