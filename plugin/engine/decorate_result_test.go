package engine

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stategate/stategate/abi"
)

// TestDecorateResult_concurrentScratch: a native engine shared by goroutines (the hosts
// that run it natively do) gives each call its own answer although decorate_result keeps
// one scratch buffer; run with -race.
func TestDecorateResult_concurrentScratch(t *testing.T) {
	e := sampleEngine(t)
	input := func(n int) []byte {
		text := strings.Repeat("w"+strconv.Itoa(n)+" ", 2000+n*500)
		return []byte(`{"tool":"tasks.update","message":{"jsonrpc":"2.0","id":` + strconv.Itoa(n) + `,"result":{"content":[{"type":"text","text":"` + text + `"}]}}}`)
	}
	want := make([][]byte, 8)
	for n := range want {
		want[n] = e.Call(abi.FuncDecorateResult, input(n))
		if !bytes.Contains(want[n], []byte("Cache invalidated")) {
			t.Fatalf("no block in %.200s", want[n])
		}
	}
	var wg sync.WaitGroup
	for n := range want {
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			in := input(n)
			for i := 0; i < 50; i++ {
				if got := e.Call(abi.FuncDecorateResult, in); !bytes.Equal(got, want[n]) {
					t.Errorf("call %d of input %d answered differently:\n%.300s", i, n, got)
					return
				}
			}
		}(n)
	}
	wg.Wait()
}
