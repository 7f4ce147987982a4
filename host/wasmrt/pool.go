package wasmrt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stategate/stategate/abi"
)

// Pool hands out plugin instances of one configuration to concurrent callers: a Wasm
// instance is single-threaded, so each call borrows one. Instances are created on demand
// up to Size; a call that traps or overruns its deadline discards its instance, and the
// next call creates a fresh one.
type Pool struct {
	rt       *Runtime
	config   []byte
	timeout  time.Duration
	idle     chan *Instance
	slots    chan struct{} // one token per instance that may exist
	replaced func()
}

// PoolOptions tunes a Pool.
type PoolOptions struct {
	Size     int           // instances at most (default 8)
	Timeout  time.Duration // per-call deadline (default 2s); needs a Runtime built with Interruptible
	Replaced func()        // called when a faulted instance is discarded (for metrics)
}

// NewPool creates a pool of instances of r configured with config. It instantiates one
// instance up front, so a broken module or configuration fails here.
func NewPool(ctx context.Context, r *Runtime, config []byte, opts PoolOptions) (*Pool, error) {
	if opts.Size <= 0 {
		opts.Size = 8
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	p := &Pool{rt: r, config: config, timeout: opts.Timeout, replaced: opts.Replaced,
		idle: make(chan *Instance, opts.Size), slots: make(chan struct{}, opts.Size)}
	for i := 0; i < opts.Size; i++ {
		p.slots <- struct{}{}
	}
	<-p.slots
	in, err := r.Instantiate(ctx, config)
	if err != nil {
		return nil, err
	}
	p.idle <- in
	return p, nil
}

// Call runs fn on input with a borrowed instance under the pool's deadline.
//
// # Notes
//
//   - On an Interruptible runtime the deadline stops the call (hard). Otherwise it is
//     checked when the call returns (soft): an instance that overran is retired and the
//     answer still used. Interruptible code runs about 10x slower under wazero (measured in
//     BenchmarkCall), and the plugin's work is linear in its input, which the gateway caps.
func (p *Pool) Call(ctx context.Context, fn abi.Function, input []byte) ([]byte, error) {
	in, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	defer p.put(in)
	if !p.rt.opts.Interruptible {
		start := time.Now()
		out, err := in.Call(ctx, fn, input)
		if d := time.Since(start); d > p.timeout {
			in.retire()
		}
		return out, err
	}
	// The caller going away must not kill the instance mid-call: only the deadline does.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout)
	out, err := in.Call(cctx, fn, input)
	cancel()
	if err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%w (deadline %s)", err, p.timeout)
	}
	return out, err
}

func (p *Pool) get(ctx context.Context) (*Instance, error) {
	select {
	case in := <-p.idle:
		return in, nil
	default:
	}
	select {
	case in := <-p.idle:
		return in, nil
	case <-p.slots:
		in, err := p.rt.Instantiate(context.WithoutCancel(ctx), p.config)
		if err != nil {
			p.slots <- struct{}{}
			return nil, err
		}
		return in, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// put returns in to the pool, or discards it when a call faulted it.
func (p *Pool) put(in *Instance) {
	if in.Trapped() {
		in.Close(context.Background())
		p.slots <- struct{}{}
		if p.replaced != nil {
			p.replaced()
		}
		return
	}
	p.idle <- in
}

// Close closes the idle instances.
func (p *Pool) Close(ctx context.Context) {
	for {
		select {
		case in := <-p.idle:
			in.Close(ctx)
		default:
			return
		}
	}
}
