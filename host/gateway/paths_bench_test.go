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
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/store/storetest"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/stategate/stategate/internal/testenv"
)

// BenchmarkGatewayPaths measures the gateway's paths against a plain httputil.ReverseProxy
// in one run, interleaved: in each of several rounds every row sends its requests (one at
// a time) in turn, the rows in an order that rotates from round to round, so a slow spell
// of the machine falls on every row alike. Each row reports the median over rounds of its
// per-round p50 (p50-us, and as ns/op) and p99 (p99-us), and its ratio to its baseline
// row (x-proxy: the median over rounds of the row's p50 over the baseline's p50 in the
// same round); the per-round p50s and ratios are printed.
//
// Rows (tools/call on an MCP server built on the official SDK, JSON answers):
//
//	tools_call/proxy               the reverse proxy (baseline of the tools_call rows)
//	tools_call/gateway_ungated     a tool no workflow binds: no state touched
//	tools_call/gateway_gated_memory  a tool that moves a workflow (a <-> b) on every call:
//	                               a state read and a lease, then a transition written;
//	                               memory store
//	tools_call/gateway_gated_redis the same on a real redis-server
//	tools_call/gateway_gated_readonly_redis  a tool bound to the workflow's states whose
//	                               success moves nothing (records.op3): its state read
//	                               from the near cache, warm (0 round trips, checked)
//	tools_call/floor_rt_*          the memory row plus one bare round trip per call, to
//	                               redis-server (awaited, overlapped with the upstream
//	                               call, or not awaited) or to a server in this process:
//	                               what a round trip alone costs in the same run
//	                               (floor_bench_test.go)
//
// Rows (the same calls to the same server in a process of its own, as an MCP server is
// deployed; its baseline pays for waking another process too):
//
//	tools_call_remote/proxy        the reverse proxy (baseline of the tools_call_remote rows)
//	tools_call_remote/gateway_ungated, tools_call_remote/gateway_gated_memory,
//	tools_call_remote/gateway_gated_redis
//	                               the rows of the same names above
//
// Rows (tools/list, 1000 tools, from an upstream whose list changes on every request, so
// the gateway's memo of decorated lists never hits):
//
//	tools_list_uncached/proxy      the reverse proxy (baseline of the tools_list rows)
//	tools_list_uncached/gateway    the gateway, decorating every list anew
//
// Rows (tools/list, 1000 tools, from an upstream whose list changes on every request by one
// tool's description, the usual change of a list):
//
//	tools_list_one_changed/proxy   the reverse proxy (baseline)
//	tools_list_one_changed/gateway the gateway (its memo of decorated tools decorates the
//	                               changed tool alone)
//
// STATEGATE_PATHS_ROUNDS and STATEGATE_PATHS_N set the rounds (default 5) and the requests
// per row per round (default 400); -benchtime does not change them. STATEGATE_PATHS_ROWS
// (a regular expression) keeps the matching rows and their baselines, for profiling one
// path.
//
//	go test ./host/gateway -run '^$' -bench GatewayPaths -benchtime 1x
func BenchmarkGatewayPaths(b *testing.B) {
	rounds, n := envInt("STATEGATE_PATHS_ROUNDS", 5), envInt("STATEGATE_PATHS_N", 400)
	rows := pathRows(b)
	if re := os.Getenv("STATEGATE_PATHS_ROWS"); re != "" { // for profiling one path
		rx := regexp.MustCompile(re)
		keep := map[int]bool{}
		for i, r := range rows {
			if rx.MatchString(r.name) {
				keep[i], keep[r.base] = true, true
			}
		}
		var kept []*pathRow
		moved := map[int]int{}
		for i, r := range rows {
			if keep[i] {
				moved[i] = len(kept)
				r.base = moved[r.base] // a baseline comes before its rows
				kept = append(kept, r)
			}
		}
		rows = kept
	}
	for _, r := range rows {
		r.init(b)
	}
	p50 := make([][]time.Duration, len(rows))
	p99 := make([][]time.Duration, len(rows))
	lat := make([]time.Duration, n)
	for round := 0; round < rounds; round++ {
		for j := range rows {
			i := (j + round) % len(rows)
			r := rows[i]
			for k := 0; k < n; k++ {
				start := time.Now()
				r.do(b)
				lat[k] = time.Since(start)
			}
			slices.Sort(lat)
			p50[i] = append(p50[i], lat[n/2])
			p99[i] = append(p99[i], lat[n*99/100])
		}
	}
	for _, r := range rows {
		if r.check != nil {
			r.check(b, rounds*n)
		}
	}
	med := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	for i, r := range rows {
		m, m99 := med(p50[i]), med(p99[i])
		// The ratio is taken round by round (a row against its baseline in the same
		// round, when the machine was as busy for both), then its median over rounds.
		var per []string
		ratios := make([]float64, rounds)
		for k, d := range p50[i] {
			ratios[k] = float64(d) / float64(p50[r.base][k])
			per = append(per, fmt.Sprintf("%.0f (%.2fx)", us(d), ratios[k]))
		}
		slices.Sort(ratios)
		x := ratios[rounds/2]
		fmt.Printf("%-32s p50 %6.0f us  p99 %6.0f us  %5.2fx %-26s rounds: %s\n", r.name, us(m), us(m99),
			x, rows[r.base].name, strings.Join(per, " "))
		b.Run(r.name, func(b *testing.B) {
			b.ReportMetric(float64(m.Nanoseconds()), "ns/op")
			b.ReportMetric(us(m), "p50-us")
			b.ReportMetric(us(m99), "p99-us")
			b.ReportMetric(x, "x-proxy")
		})
	}
}

// pathRow is one row of BenchmarkGatewayPaths: init opens a session, do sends one request,
// check (when set) verifies after the run that every request did what the row claims.
type pathRow struct {
	name  string
	base  int // index of the baseline row
	url   string
	body  string
	sid   string
	warm  []string // requests sent once after initialize
	ready func()   // called once init is done (nil: nothing)
	check func(b *testing.B, requests int)
}

func (r *pathRow) init(b *testing.B) {
	r.sid = benchSession(b, r.url)
	for _, w := range r.warm {
		post(b, r.url, r.sid, w)
	}
	post(b, r.url, r.sid, r.body)
	if r.ready != nil {
		r.ready()
	}
}

func (r *pathRow) do(b *testing.B) { post(b, r.url, r.sid, r.body) }

// pathsConfig: "flip" (per session) moves a <-> b on every successful records.op1, so each
// such call reads its state, leases it, and writes a transition; records.op2 is unbound.
var pathsConfig = []byte(`{"version":1,"workflows":[
 {"id":"flip","initial":"a","key":"session","states":{"a":{"on":{"NEXT":"b"}},"b":{"on":{"NEXT":"a"}}},
  "tools":{"records.op1":{"states":["a","b"],"event":"NEXT"},"records.op3":{"states":["a","b"]}}}]}`)

const (
	gatedCallBody    = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"records.op1","arguments":{"id":"r1"}}}`
	ungatedCallBody  = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"records.op2","arguments":{"id":"r1"}}}`
	readonlyCallBody = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"records.op3","arguments":{"id":"r1"}}}`
)

func pathRows(b *testing.B) []*pathRow {
	ctx := context.Background()
	rt := pluginRuntime(b)
	proxy := func(up string) string {
		u, _ := url.Parse(up)
		rp := httptest.NewServer(&httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(&url.URL{Scheme: "http", Host: u.Host})
				pr.Out.Host = ""
			},
			FlushInterval: -1,
			ErrorLog:      log.New(io.Discard, "", 0), // closing servers at the end is no error
		})
		b.Cleanup(rp.Close)
		return rp.URL + "/mcp"
	}
	gw := func(up string, st store.Store) (string, *gateway.Gateway) {
		u, _ := url.Parse(up)
		pool, err := wasmrt.NewPool(ctx, rt, pathsConfig, wasmrt.PoolOptions{Size: 4})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { pool.Close(ctx) })
		g, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: pathsConfig, Store: st})
		if err != nil {
			b.Fatal(err)
		}
		s := httptest.NewServer(g)
		b.Cleanup(s.Close)
		return s.URL + "/mcp", g
	}
	// transitions checks that every gated call of a row stored a transition.
	transitions := func(g *gateway.Gateway) func(*testing.B, int) {
		before := g.Stats.Get(stats.CountTransitions)
		return func(b *testing.B, requests int) {
			if got := g.Stats.Get(stats.CountTransitions) - before; got < int64(requests) {
				b.Fatalf("%d transitions stored for %d gated calls", got, requests)
			}
		}
	}

	callUp := httptest.NewServer(bigUpstream(10))
	b.Cleanup(callUp.Close)
	listUp := newChangingList(1000, false)
	listSrv := httptest.NewServer(listUp)
	b.Cleanup(listSrv.Close)
	oneUp := newChangingList(1000, true)
	oneSrv := httptest.NewServer(oneUp)
	b.Cleanup(oneSrv.Close)

	memURL, memGW := gw(callUp.URL+"/mcp", store.NewMemory(store.Options{}))
	warm := []string{listBody} // the client lists the tools before it calls them
	rows := []*pathRow{
		{name: "tools_call/proxy", base: 0, url: proxy(callUp.URL), body: gatedCallBody, warm: warm},
		{name: "tools_call/gateway_ungated", base: 0, url: memURL, body: ungatedCallBody, warm: warm},
		{name: "tools_call/gateway_gated_memory", base: 0, url: memURL, body: gatedCallBody, warm: warm},
	}
	if redisURL := benchRedis(b); redisURL != "" {
		st, err := store.NewRedis(ctx, redisURL, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		u, g := gw(callUp.URL+"/mcp", st)
		rows = append(rows, &pathRow{name: "tools_call/gateway_gated_redis", base: 0, url: u, body: gatedCallBody, warm: warm, check: transitions(g)})
		// The read-only row has a gateway and store of its own (the moving row's round
		// trips would count on a shared one) and checks it made no round trip once warm:
		// init sends the call twice (a miss fills the cache), so every timed call is a hit.
		// Nothing else reaches the tracking connection while the row runs: its key is not
		// written, its idle TTL is far off, and the near cache sends no keep-alive PING
		// (whose reply, met in the socket, once sent a warm read to the server; see
		// TestRedisNear_warmReadsStayWarm). A round trip here is a bug, not noise.
		st2, err := store.NewRedis(ctx, redisURL+"?near_cache=on", store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st2.Close() })
		u2, _ := gw(callUp.URL+"/mcp", st2)
		ro := &pathRow{name: "tools_call/gateway_gated_readonly_redis", base: 0, url: u2, body: readonlyCallBody, warm: append(warm, readonlyCallBody)}
		var trips uint64
		ro.ready = func() { trips = st2.RoundTrips() }
		ro.check = func(b *testing.B, requests int) {
			if n := st2.RoundTrips() - trips; n != 0 {
				b.Fatalf("%s: %d Redis round trips for %d warm calls, want 0", ro.name, n, requests)
			}
		}
		rows = append(rows, ro)
		ru, err := url.Parse(redisURL)
		if err != nil {
			b.Fatal(err)
		}
		addr := ru.Host
		for _, f := range []struct {
			name string
			mode floorMode
		}{{"tools_call/floor_rt_redis", floorAwaited}, {"tools_call/floor_rt_redis_overlap", floorOverlap}, {"tools_call/floor_rt_redis_unawaited", floorUnawaited}} {
			rows = append(rows, floorRow(b, gw, f.name, newPinger(b, addr), f.mode, warm))
		}
	}
	rows = append(rows, floorRow(b, gw, "tools_call/floor_rt_loopback", newPinger(b, echoServer(b)), floorAwaited, warm))
	rows[2].check = transitions(memGW)
	// The remote rows: the same calls to an upstream in a process of its own, as an MCP
	// server is deployed, so that the baseline pays for waking another process too.
	remote := upstreamChild(b)
	rb := len(rows)
	remURL, remGW := gw(remote+"/mcp", store.NewMemory(store.Options{}))
	rows = append(rows,
		&pathRow{name: "tools_call_remote/proxy", base: rb, url: proxy(remote), body: gatedCallBody, warm: warm},
		&pathRow{name: "tools_call_remote/gateway_ungated", base: rb, url: remURL, body: ungatedCallBody, warm: warm},
		&pathRow{name: "tools_call_remote/gateway_gated_memory", base: rb, url: remURL, body: gatedCallBody, warm: warm, check: transitions(remGW)})
	if redisURL := benchRedis(b); redisURL != "" {
		st, err := store.NewRedis(ctx, redisURL, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		u, g := gw(remote+"/mcp", st)
		rows = append(rows, &pathRow{name: "tools_call_remote/gateway_gated_redis", base: rb, url: u, body: gatedCallBody, warm: warm, check: transitions(g)})
	}
	listURL, _ := gw(listSrv.URL+"/mcp", store.NewMemory(store.Options{}))
	lb := len(rows)
	rows = append(rows,
		&pathRow{name: "tools_list_uncached/proxy", base: lb, url: proxy(listSrv.URL), body: listBody},
		&pathRow{name: "tools_list_uncached/gateway", base: lb, url: listURL, body: listBody})
	oneURL, _ := gw(oneSrv.URL+"/mcp", store.NewMemory(store.Options{}))
	ob := len(rows)
	rows = append(rows,
		&pathRow{name: "tools_list_one_changed/proxy", base: ob, url: proxy(oneSrv.URL), body: listBody},
		&pathRow{name: "tools_list_one_changed/gateway", base: ob, url: oneURL, body: listBody})
	// The list rows must get a fresh list on every request, and the gateway's must be
	// decorated (the gated tool hidden or shown by its state is in it).
	for i, r := range rows[lb:] {
		up := listUp
		if lb+i >= ob {
			up = oneUp
		}
		sid := benchSession(b, r.url)
		before := up.lists.Load()
		a, c := postBody(b, r.url, sid, listBody), postBody(b, r.url, sid, listBody)
		if up.lists.Load()-before != 2 || a == c || !strings.Contains(c, fmt.Sprintf("(rev %d)", before+2)) {
			b.Fatalf("%s: the upstream's list did not change between two requests", r.name)
		}
	}
	return rows
}

// floorRow is a floor row (floor_bench_test.go): the memory row's moving call through a
// gateway of its own whose upstream makes one round trip with p per request, as mode says.
func floorRow(b *testing.B, gw func(string, store.Store) (string, *gateway.Gateway), name string, p *pinger, mode floorMode, warm []string) *pathRow {
	up := httptest.NewServer(floorUpstream(bigUpstream(10), p, mode))
	b.Cleanup(up.Close)
	u, g := gw(up.URL+"/mcp", store.NewMemory(store.Options{}))
	before := g.Stats.Get(stats.CountTransitions)
	return &pathRow{name: name, base: 0, url: u, body: gatedCallBody, warm: warm, check: func(b *testing.B, requests int) {
		if got := g.Stats.Get(stats.CountTransitions) - before; got < int64(requests) {
			b.Fatalf("%s: %d transitions stored for %d gated calls", name, got, requests)
		}
		p.check(b, name, requests)
	}}
}

// benchRedis returns a real redis-server's URL, or "" (the row is left out) when
// redis-server is not installed, unless every prerequisite is required
// (STATEGATE_REQUIRE_ALL=1, testenv), in which case storetest installs it or fails.
func benchRedis(b *testing.B) string {
	if _, err := exec.LookPath("redis-server"); err != nil && !testenv.RequireAll() {
		b.Logf("tools_call/gateway_gated_redis left out: redis-server not installed (%s=1 makes this a failure)", testenv.RequireAllEnv)
		return ""
	}
	return storetest.Redis(b)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// changingList is a minimal Streamable HTTP MCP server (JSON answers) whose tools/list
// answer changes on every request: each of its n tools' descriptions carries the list's
// revision (with one, only the description of the tool in the middle of the list). It
// answers initialize (with a session id), notifications (202) and tools/call.
type changingList struct {
	lists atomic.Int64
	sids  atomic.Int64
	parts [][]byte // the list split where the revision goes
}

func (c *changingList) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	id := "null"
	if i := strings.Index(string(body), `"id":`); i >= 0 {
		rest := string(body[i+5:])
		if j := strings.IndexAny(rest, ",}"); j > 0 {
			id = rest[:j]
		}
	}
	method := ""
	if i := strings.Index(string(body), `"method":"`); i >= 0 {
		rest := string(body[i+10:])
		method = rest[:strings.IndexByte(rest, '"')]
	}
	h := w.Header()
	switch method {
	case "initialize":
		h.Set("Mcp-Session-Id", "s"+strconv.FormatInt(c.sids.Add(1), 10))
		writeResult(w, id, `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"changing","version":"1"}}`)
	case "tools/list":
		writeResult(w, id, string(c.list(c.lists.Add(1))))
	case "tools/call":
		writeResult(w, id, `{"content":[{"type":"text","text":"ok"}]}`)
	default:
		if !strings.Contains(string(body), `"id":`) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		writeResult(w, id, `{}`)
	}
}

func writeResult(w http.ResponseWriter, id, result string) {
	out := `{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	io.WriteString(w, out)
}

func newChangingList(n int, one bool) *changingList {
	c := &changingList{}
	var s strings.Builder
	s.WriteString(`{"tools":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			s.WriteByte(',')
		}
		rev := " (rev @REV@)"
		if one && i != n/2 {
			rev = ""
		}
		fmt.Fprintf(&s, `{"name":"records.op%d","description":"Operation %d on records. Returns the affected records.%s","inputSchema":{"type":"object","properties":{"id":{"type":"string","description":"record id"}},"required":["id"]}}`, i, i, rev)
	}
	s.WriteString(`]}`)
	for _, p := range strings.Split(s.String(), "@REV@") {
		c.parts = append(c.parts, []byte(p))
	}
	return c
}

// list returns the tools/list result of revision rev.
func (c *changingList) list(rev int64) []byte {
	r := strconv.AppendInt(nil, rev, 10)
	out := make([]byte, 0, len(c.parts[0])*len(c.parts)+len(r)*len(c.parts))
	for i, p := range c.parts {
		if i > 0 {
			out = append(out, r...)
		}
		out = append(out, p...)
	}
	return out
}
