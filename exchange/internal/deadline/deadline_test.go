//go:build !tinygo

package deadline

import (
	"context"
	"errors"
	"testing"
	"time"
)

type valueKey struct{}

// TestDetachedTimeout holds Detached to what
// context.WithTimeout(context.WithoutCancel(ctx), d) answers: values, deadline, errors
// and causes, before and after Done is asked for, when cancelled and when the deadline
// passes, with the parent cancelled.
func TestDetachedTimeout(t *testing.T) {
	if cancelCtxKey == nil {
		t.Fatal("the context package's cancel key was not found")
	}
	type make func(context.Context, time.Duration) (context.Context, context.CancelFunc)
	ref := func(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), d)
	}
	check := func(name string, got, want context.Context) {
		t.Helper()
		if g, w := got.Err(), want.Err(); !errors.Is(g, w) || (g == nil) != (w == nil) {
			t.Errorf("%s: Err %v, want %v", name, g, w)
		}
		if g, w := context.Cause(got), context.Cause(want); !errors.Is(g, w) || (g == nil) != (w == nil) {
			t.Errorf("%s: Cause %v, want %v", name, g, w)
		}
		if g, w := got.Value(valueKey{}), want.Value(valueKey{}); g != w {
			t.Errorf("%s: Value %v, want %v", name, g, w)
		}
		if _, ok := got.Deadline(); !ok {
			t.Errorf("%s: no deadline", name)
		}
	}
	for _, done := range []bool{false, true} {
		for _, c := range []struct {
			name string
			d    time.Duration
			end  bool // cancel before looking
		}{{"live", time.Hour, false}, {"cancelled", time.Hour, true}, {"expired", time.Millisecond, false}, {"expired then cancelled", time.Millisecond, true}} {
			parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), valueKey{}, "v"))
			cancelParent() // the parent's ending does not reach either
			var ctxs [2]context.Context
			for i, mk := range []make{Detached, ref} {
				ctx, cancel := mk(parent, c.d)
				defer cancel()
				if done {
					_ = ctx.Done()
				}
				if c.d < time.Second {
					time.Sleep(5 * c.d)
				}
				if c.end {
					cancel()
				}
				ctxs[i] = ctx
			}
			name := c.name
			if done {
				name += " (Done asked for)"
			}
			check(name, ctxs[0], ctxs[1])
			// A child made now ends with it.
			child, stop := context.WithCancel(ctxs[0])
			if ctxs[1].Err() != nil {
				select {
				case <-child.Done():
				case <-time.After(10 * time.Second):
					t.Errorf("%s: a child did not end with it", name)
				}
			} else if child.Err() != nil {
				t.Errorf("%s: a child ended: %v", name, child.Err())
			}
			stop()
		}
	}
	// Lazy against context.WithTimeout, the parent live or cancelled.
	{
		for _, done := range []bool{false, true} {
			parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), valueKey{}, "v"))
			var ctxs [2]context.Context
			for i, mk := range []make{Lazy, context.WithTimeout} {
				ctx, cancel := mk(parent, time.Hour)
				defer cancel()
				if done {
					_ = ctx.Done()
				}
				ctxs[i] = ctx
			}
			check("lazy, live", ctxs[0], ctxs[1])
			if d, _ := ctxs[0].Deadline(); d.After(time.Now().Add(2 * time.Hour)) {
				t.Errorf("lazy: deadline %v", d)
			}
			cancelParent()
			if !done {
				_ = ctxs[1].Done()
				time.Sleep(10 * time.Millisecond) // the reference's cancellation reaches it
			}
			check("lazy, parent cancelled", ctxs[0], ctxs[1])
		}
	}
	// Asking for Done after the deadline, and waiting on it before.
	ctx, cancel := Detached(context.Background(), 20*time.Millisecond)
	defer cancel()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done did not close at the deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err %v", ctx.Err())
	}
}
