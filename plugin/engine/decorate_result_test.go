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

// TestEngine_concurrentRequests: calls of every export that parses a request, on
// goroutines sharing one native engine (whose request and scratch buffer one call at a
// time reuses), each answer as when the calls ran one by one; run with -race.
func TestEngine_concurrentRequests(t *testing.T) {
	e := sampleEngine(t)
	const key = "stategate/v1/checkout/session//s"
	calls := []struct {
		fn abi.Function
		in func(n int) []byte
	}{
		{abi.FuncTransition, func(n int) []byte {
			return []byte(`{"tool":"cart.add_item","session":"s` + strconv.Itoa(n) + `","states":{"` + key + strconv.Itoa(n) + `":null}}`)
		}},
		{abi.FuncCheckLimits, func(n int) []byte {
			return []byte(`{"tool":"cart.pay","session":"s` + strconv.Itoa(n) + `","states":{"` + key + strconv.Itoa(n) + `":null}}`)
		}},
		{abi.FuncDecorateResult, func(n int) []byte {
			return []byte(`{"tool":"tasks.update","message":{"jsonrpc":"2.0","id":` + strconv.Itoa(n) + `,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", n*300) + `"}]}}}`)
		}},
		{abi.FuncDecorateTools, func(n int) []byte {
			return []byte(`{"message":{"jsonrpc":"2.0","id":` + strconv.Itoa(n) + `,"result":{"tools":[{"name":"cart.pay","inputSchema":{}},{"name":"t` + strconv.Itoa(n) + `","inputSchema":{}}]}},"session":"s` + strconv.Itoa(n) + `","states":{"` + key + strconv.Itoa(n) + `":null}}`)
		}},
	}
	want := make([][]byte, 8*len(calls))
	for n := range want {
		c := calls[n%len(calls)]
		want[n] = e.Call(c.fn, c.in(n))
		if bytes.HasPrefix(want[n], []byte(`{"error"`)) || bytes.HasPrefix(want[n], []byte(`{"needState"`)) {
			t.Fatalf("call %d: %s", n, want[n])
		}
	}
	var wg sync.WaitGroup
	for n := range want {
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			c := calls[n%len(calls)]
			in := c.in(n)
			for i := 0; i < 50; i++ {
				if got := e.Call(c.fn, in); !bytes.Equal(got, want[n]) {
					t.Errorf("call %d of input %d answered differently:\n%.300s\nwant %.300s", i, n, got, want[n])
					return
				}
			}
		}(n)
	}
	wg.Wait()
}
