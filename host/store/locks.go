package store

import (
	"context"
	"sort"
	"sync"
)

// keyLocks is the in-process lock behind Memory.Lock.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{}
	refs int
}

// lock takes every key (in sorted order, so two calls never deadlock) and returns the
// function that releases them. A caller whose context ends while waiting gets its error.
func (l *keyLocks) lock(ctx context.Context, keys []string) (func(), error) {
	keys = append([]string(nil), keys...)
	sort.Strings(keys)
	var held []string
	release := func() {
		for _, k := range held {
			l.release(k)
		}
	}
	for i, k := range keys {
		if i > 0 && keys[i-1] == k {
			continue
		}
		l.mu.Lock()
		kl := l.m[k]
		if kl == nil {
			kl = &keyLock{ch: make(chan struct{}, 1)}
			l.m[k] = kl
		}
		kl.refs++
		l.mu.Unlock()
		select {
		case kl.ch <- struct{}{}:
			held = append(held, k)
		case <-ctx.Done():
			l.mu.Lock()
			kl.refs--
			if kl.refs == 0 {
				delete(l.m, k)
			}
			l.mu.Unlock()
			release()
			return nil, ctx.Err()
		}
	}
	return release, nil
}

func (l *keyLocks) release(k string) {
	l.mu.Lock()
	kl := l.m[k]
	kl.refs--
	if kl.refs == 0 {
		delete(l.m, k)
	}
	l.mu.Unlock()
	<-kl.ch
}
