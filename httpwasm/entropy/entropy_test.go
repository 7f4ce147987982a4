package entropy

import (
	"bytes"
	"sync"
	"testing"
)

// TestReader: the same inputs give another stream at another instant (the wall clock is an
// input), and a stream never repeats its blocks.
func TestReader(t *testing.T) {
	a, b := New([]byte("fixed")), New([]byte("fixed"))
	var x, y [64]byte
	a.Read(x[:])
	b.Read(y[:])
	if bytes.Equal(x[:], y[:]) {
		t.Fatal("two readers on the same inputs gave the same bytes")
	}
	if bytes.Equal(x[:32], x[32:]) {
		t.Fatal("a reader repeated a block")
	}
	var odd [7]byte
	if n, err := a.Read(odd[:]); n != 7 || err != nil {
		t.Fatalf("Read(7) = %d, %v", n, err)
	}
}

// TestInstance: instances starting at once on one directory all get different numbers.
func TestInstance(t *testing.T) {
	dir := t.TempDir()
	const n = 16
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, ok := Instance(dir)
			mu.Lock()
			defer mu.Unlock()
			if !ok || seen[k] {
				t.Errorf("Instance = %d, %v (seen: %v)", k, ok, seen[k])
			}
			seen[k] = true
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d numbers for %d instances", len(seen), n)
	}
	if _, ok := Instance(dir + "/missing"); ok {
		t.Fatal("Instance on a missing directory")
	}
}
