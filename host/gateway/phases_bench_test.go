//go:build linux

package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
	"golang.org/x/sys/unix"
)

// BenchmarkGatewayPhases splits the time of a tools/call through the gateway, and through
// the reverse proxy of BenchmarkGatewayPaths, into phases, with the upstream
// (bigUpstream(10)) in this process and in a process of its own (tools_call_remote), the
// rows interleaved round by round as in BenchmarkGatewayPaths. It shows where the
// gateway's time over the proxy goes when the upstream is another process. Each phase is
// the median over rounds of its per-round p50, in µs:
//
//	pre       the handler's start to the upstream request: the gateway's admission (the
//	          body read, flow.Request, the request built)
//	pre_cpu   the same on the thread's CPU clock (the calls whose pre phase stayed on one
//	          thread): pre_cpu near pre means the phase ran, not waited
//	upstream  the upstream request sent to its answer's head
//	body      the head to the end of the answer's body (the proxy writes the client's
//	          answer here, the gateway reads the body)
//	post      the end of the body to the handler's return (the gateway's answer leg)
//	in        the client's request sent to the handler's start
//	out       the handler's return to the client having the answer (the gateway's
//	          answer is written here, after the handler returns)
//
// ns/op is the whole call's.
//
// The phases are taken by a timing http.RoundTripper (Options.Transport, the proxy's
// Transport) and a timing handler around each server, so the gateway runs unchanged.
// STATEGATE_PATHS_ROUNDS and STATEGATE_PATHS_N as in BenchmarkGatewayPaths (default 5 and
// 1000); STATEGATE_PATHS_UPSTREAM_CPU pins the remote upstream (main_test.go).
//
//	go test ./host/gateway -run '^$' -bench GatewayPhases -benchtime 1x
func BenchmarkGatewayPhases(b *testing.B) {
	rounds, n := envInt("STATEGATE_PATHS_ROUNDS", 5), envInt("STATEGATE_PATHS_N", 1000)
	ctx := context.Background()
	rt := pluginRuntime(b)
	// One request at a time (the rows run one after another); done says its handler has
	// returned, which may be after the client has its answer (the proxy flushes it).
	var cur phaseMarks
	done := make(chan struct{}, 1)
	// Both sides send upstream over a clone of http.DefaultTransport (the reverse proxy's
	// own), without an environment's proxy.
	transport := func() http.RoundTripper {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		return phaseTransport{rt: t, m: &cur}
	}
	proxy := func(up string) string {
		u, _ := url.Parse(up)
		s := httptest.NewServer(phaseHandler{m: &cur, done: done, h: &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(&url.URL{Scheme: "http", Host: u.Host})
				pr.Out.Host = ""
			},
			Transport:     transport(),
			FlushInterval: -1,
			ErrorLog:      log.New(io.Discard, "", 0),
		}})
		b.Cleanup(s.Close)
		return s.URL + "/mcp"
	}
	gw := func(up string) string {
		u, _ := url.Parse(up + "/mcp")
		pool, err := wasmrt.NewPool(ctx, rt, pathsConfig, wasmrt.PoolOptions{Size: 4})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { pool.Close(ctx) })
		g, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: pathsConfig,
			Store: store.NewMemory(store.Options{}), Transport: transport()})
		if err != nil {
			b.Fatal(err)
		}
		s := httptest.NewServer(phaseHandler{m: &cur, done: done, h: g})
		b.Cleanup(s.Close)
		return s.URL + "/mcp"
	}
	local := httptest.NewServer(bigUpstream(10))
	b.Cleanup(local.Close)
	remote := upstreamChild(b)
	warm := []string{listBody}
	var rows []*pathRow
	for _, up := range []struct{ prefix, url string }{{"tools_call/", local.URL}, {"tools_call_remote/", remote}} {
		g := gw(up.url)
		rows = append(rows,
			&pathRow{name: up.prefix + "proxy", url: proxy(up.url), body: gatedCallBody, warm: warm},
			&pathRow{name: up.prefix + "gateway_ungated", url: g, body: ungatedCallBody, warm: warm},
			&pathRow{name: up.prefix + "gateway_gated_memory", url: g, body: gatedCallBody, warm: warm})
	}
	for _, r := range rows {
		r.init(b)
	}
	time.Sleep(50 * time.Millisecond) // the last init handler has returned
	select {
	case <-done:
	default:
	}
	const nPhases = 8
	names := [nPhases]string{"pre", "pre_cpu", "upstream", "body", "post", "in", "out", "total"}
	p50 := make([][nPhases][]time.Duration, len(rows)) // [row][phase][round]
	per := make([][]time.Duration, nPhases)
	for round := 0; round < rounds; round++ {
		for j := range rows {
			i := (j + round) % len(rows)
			for k := range per {
				per[k] = per[k][:0]
			}
			for k := 0; k < n; k++ {
				cur = phaseMarks{}
				start := time.Now()
				rows[i].do(b)
				end := time.Now()
				<-done
				m := cur
				if m.handlerStart.IsZero() || m.sent.IsZero() || m.head.IsZero() || m.bodyEnd.IsZero() || m.handlerEnd.IsZero() {
					b.Fatalf("%s: a call's phases were not all seen: %+v", rows[i].name, m)
				}
				per[0] = append(per[0], m.sent.Sub(m.handlerStart))
				if m.tidStart == m.tidSent {
					per[1] = append(per[1], m.cpuSent-m.cpuStart)
				}
				per[2] = append(per[2], m.head.Sub(m.sent))
				per[3] = append(per[3], m.bodyEnd.Sub(m.head))
				per[4] = append(per[4], m.handlerEnd.Sub(m.bodyEnd))
				per[5] = append(per[5], m.handlerStart.Sub(start))
				per[6] = append(per[6], end.Sub(m.handlerEnd))
				per[7] = append(per[7], end.Sub(start))
			}
			for k, d := range per {
				if len(d) == 0 {
					d = []time.Duration{0}
				}
				slices.Sort(d)
				p50[i][k] = append(p50[i][k], d[len(d)/2])
			}
		}
	}
	us := func(d []time.Duration) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / 1e3
	}
	for i, r := range rows {
		var line strings.Builder
		fmt.Fprintf(&line, "%-40s", r.name)
		for k, name := range names {
			fmt.Fprintf(&line, " %s %5.1f", name, us(p50[i][k]))
		}
		total := us(p50[i][nPhases-1])
		fmt.Println(line.String())
		b.Run(r.name, func(b *testing.B) {
			b.ReportMetric(total*1e3, "ns/op")
			for k, name := range names[:nPhases-1] {
				b.ReportMetric(us(p50[i][k]), name+"-us")
			}
		})
	}
}

// phaseMarks are the moments of one request (BenchmarkGatewayPhases).
type phaseMarks struct {
	handlerStart, sent, head, bodyEnd, handlerEnd time.Time
	cpuStart, cpuSent                             time.Duration // the thread's CPU clock
	tidStart, tidSent                             int
}

func threadCPU() (time.Duration, int) {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano()), unix.Gettid()
}

type phaseHandler struct {
	m    *phaseMarks
	done chan<- struct{}
	h    http.Handler
}

func (p phaseHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.m.cpuStart, p.m.tidStart = threadCPU()
	p.m.handlerStart = time.Now()
	p.h.ServeHTTP(w, r)
	p.m.handlerEnd = time.Now()
	select {
	case p.done <- struct{}{}:
	default: // a request outside the timed loop (init)
	}
}

type phaseTransport struct {
	rt http.RoundTripper
	m  *phaseMarks
}

func (p phaseTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	p.m.cpuSent, p.m.tidSent = threadCPU()
	p.m.sent = time.Now()
	resp, err := p.rt.RoundTrip(r)
	p.m.head = time.Now()
	if resp != nil && resp.Body != nil {
		resp.Body = &phaseBody{ReadCloser: resp.Body, m: p.m}
	}
	return resp, err
}

// phaseBody marks the end of the answer's body (its first EOF).
type phaseBody struct {
	io.ReadCloser
	m *phaseMarks
}

func (p *phaseBody) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b)
	if err == io.EOF && p.m.bodyEnd.IsZero() {
		p.m.bodyEnd = time.Now()
	}
	return n, err
}
