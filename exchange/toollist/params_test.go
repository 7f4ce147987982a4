package toollist

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// TestParamHeaders_concurrentLearnAndGet: lists and calls on many goroutines (run with
// -race).
func TestParamHeaders_concurrentLearnAndGet(t *testing.T) {
	p := NewParams()
	lists := []string{
		`{"tools":[{"name":"a","inputSchema":{"properties":{"x":{"x-mcp-header":"X"}}}},{"name":"b","inputSchema":{}}]}`,
		`{"tools":[{"name":"a","inputSchema":{}},{"name":"b","inputSchema":{"properties":{"y":{"properties":{"z":{"x-mcp-header":"Z"}}}}}}]}`,
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 2000; j++ {
				if (i+j)%2 == 0 {
					p.Learn("", "", gjson.Parse(lists[(i+j)%4/2]))
				} else {
					for _, d := range p.Get("", "", "a") {
						_ = d.Name + strings.Join(d.Path, ".")
					}
					_ = p.Get("", "", "b")
				}
			}
		}(i)
	}
	wg.Wait()
	p.Learn("", "", gjson.Parse(lists[1]))
	if d := p.Get("", "", "b"); len(d) != 1 || d[0].Name != "Z" || strings.Join(d[0].Path, ".") != "y.z" {
		t.Fatalf("b's declarations after the last list: %+v", d)
	}
	if d := p.Get("", "", "a"); d != nil {
		t.Fatalf("a, listed last without declarations, kept %+v", d)
	}
}

// TestParamHeaders_bounds: a tool declaring more headers than maxParamDecls, or one name
// twice in any case, has none kept, and a list of many declarations is read in linear time
// (found by review: 20,000 declarations took 4.8 s).
func TestParamHeaders_bounds(t *testing.T) {
	list := func(n int, dup bool) gjson.Result {
		var b strings.Builder
		b.WriteString(`{"tools":[{"name":"t","inputSchema":{"properties":{`)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"p%d":{"x-mcp-header":"H%d"}`, i, i)
		}
		if dup {
			b.WriteString(`,"q":{"x-mcp-header":"h0"}`)
		}
		b.WriteString(`}}}]}`)
		return gjson.Parse(b.String())
	}
	p := NewParams()
	p.Learn("", "", list(maxParamDecls, false))
	if n := len(p.Get("", "", "t")); n != maxParamDecls {
		t.Fatalf("%d declarations kept, want %d", n, maxParamDecls)
	}
	for _, l := range []gjson.Result{list(maxParamDecls+1, false), list(3, true), list(50000, false)} {
		p.Learn("", "", l)
		if d := p.Get("", "", "t"); d != nil {
			t.Fatalf("a tool with %d declarations (or a name twice) kept %d", len(l.Raw), len(d))
		}
	}
}
