//go:build !tinygo

// Package deadline bounds the exchange's contexts the same way natively and in the TinyGo
// modules (deadline_tinygo.go), where the host owns time and there is no goroutine to
// cancel a context by: Within, Detached and Lazy.
package deadline

import (
	"context"
	"sync"
	"time"
)

// Within bounds ctx by d (context.WithTimeout).
func Within(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// Detached is context.WithTimeout(context.WithoutCancel(ctx), d) whose timer is
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
//   - Values are ctx's, except (detached) the context package's own cancel key, which
//     WithoutCancel hides (so context.Cause sees this context's own ending, not ctx's).
//     Not detached (Lazy), context.Cause gives ctx's cause once ctx has one, even
//     when this context's deadline passed first (WithTimeout's would give
//     DeadlineExceeded): nothing here sets causes.
//   - Value calls ctx's Value directly: a WithoutCancel context reached through another
//     context's Value boxes its receiver (an allocation per lookup; wazero looks values up
//     on every engine call).
func Detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c := &detachedCtx{parent: ctx, at: time.Now().Add(d), detached: true}
	return c, c.end
}

// Lazy is context.WithTimeout(ctx, d) made as Detached is: the timer is set
// when something asks for Done (a lease's wait on a held key; never on a free one).
// Values, ctx's ending and its earlier deadline are ctx's, as they are through WithTimeout.
func Lazy(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c := &detachedCtx{parent: ctx, at: time.Now().Add(d)}
	return c, c.end
}

type detachedCtx struct {
	parent   context.Context
	at       time.Time
	detached bool // WithoutCancel(parent): its ending and deadline do not reach this one
	mu       sync.Mutex
	real     context.Context // made by realize
	cancel   context.CancelFunc
	final    error // the error once end was called
}

func (c *detachedCtx) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && !c.detached && d.Before(c.at) {
		return d, true
	}
	return c.at, true
}

func (c *detachedCtx) Value(key any) any {
	if c.detached && key == cancelCtxKey {
		return nil
	}
	return c.parent.Value(key)
}

func (c *detachedCtx) Done() <-chan struct{} { return c.realize().Done() }

// AfterFunc makes context.AfterFunc (and a child's cancellation) use the real context.
func (c *detachedCtx) AfterFunc(f func()) func() bool { return context.AfterFunc(c.realize(), f) }

func (c *detachedCtx) Err() error {
	c.mu.Lock()
	real, final := c.real, c.final
	c.mu.Unlock()
	switch {
	case real != nil:
		return real.Err()
	case final != nil:
		return final
	}
	return c.liveErr()
}

// liveErr is Err before Done was asked for or end called.
func (c *detachedCtx) liveErr() error {
	if !c.detached {
		if err := c.parent.Err(); err != nil {
			return err
		}
	}
	if !time.Now().Before(c.at) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *detachedCtx) realize() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real == nil {
		parent := c.parent
		if c.detached {
			parent = context.WithoutCancel(parent)
		}
		c.real, c.cancel = context.WithDeadline(parent, c.at)
		if c.final == context.Canceled {
			c.cancel()
		}
	}
	return c.real
}

func (c *detachedCtx) end() {
	err := c.liveErr()
	if err == nil {
		err = context.Canceled
	}
	c.mu.Lock()
	if c.final == nil {
		c.final = err
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
