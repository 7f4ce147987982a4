package toollist

import (
	"fmt"
	"strings"
	"testing"
)

func benchResult(n int) string {
	var s strings.Builder
	s.WriteString(`{"tools":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			s.WriteByte(',')
		}
		fmt.Fprintf(&s, `{"name":"records.op%d","description":"Operation %d on records. Returns the affected records.","inputSchema":{"type":"object","properties":{"id":{"type":"string","description":"record id"}},"required":["id"]}}`, i, i)
	}
	s.WriteString(`]}`)
	return s.String()
}

func BenchmarkSplitTools(b *testing.B) {
	r := benchResult(1000)
	b.SetBytes(int64(len(r)))
	for i := 0; i < b.N; i++ {
		splitTools(r)
	}
}

func BenchmarkToolMemoLookup(b *testing.B) {
	r := benchResult(1000)
	a, _ := splitTools(r)
	m := NewTools(16, 64<<20)
	outs := make([]toolOut, len(a.elems))
	have := make([]bool, len(a.elems))
	for i, e := range a.elems {
		outs[i] = toolOut{out: r[e.start:e.end], name: `"x"`}
	}
	m.store("g", r, &a, outs, have)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.lookup("g", r, &a, nil, outs, have)
	}
}

func BenchmarkAssembleList(b *testing.B) {
	r := benchResult(1000)
	a, _ := splitTools(r)
	outs := make([]toolOut, len(a.elems))
	for i, e := range a.elems {
		outs[i] = toolOut{out: r[e.start:e.end], name: `"x"`}
	}
	for i := 0; i < b.N; i++ {
		assembleList(r, &a, outs, nil, nil)
	}
}
