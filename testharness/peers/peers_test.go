package peers_test

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkPeers puts every row of rows() in front of one upstream (children_test.go: 83
// tools, a tools/list of about 20 KB) and measures each with one load generator
// (client_test.go), in rounds that go through every row in turn so that a change in the
// machine's load falls on all of them alike. It prints a markdown table of ratios to the
// plain reverse proxy of the same run and one of the raw figures, with the load average at
// the start and the end. It runs once whatever b.N is:
//
//	make bench.peers
//	go test ./testharness/peers -run '^$' -bench Peers -benchtime 1x -timeout 60m
//
// Counts (per row, over all rounds): STATEGATE_PEERS_CALLS (tools/call at concurrency 1,
// default 1000), STATEGATE_PEERS_LISTS (tools/list at concurrency 1, 1000),
// STATEGATE_PEERS_PARALLEL (tools/call at concurrency 8, 2000), STATEGATE_PEERS_ROUNDS (4).
// STATEGATE_PEERS_ROWS, a comma-separated list of words, keeps only the rows whose name
// holds one of them (and the baseline). DOCKER_MCP, THV and NPM_PEERS_DIR name prebuilt peers instead of the install scripts'.
func BenchmarkPeers(b *testing.B) {
	if ran.Swap(true) {
		return
	}
	cfg := config{
		calls:    envInt("STATEGATE_PEERS_CALLS", 1000),
		lists:    envInt("STATEGATE_PEERS_LISTS", 1000),
		parallel: envInt("STATEGATE_PEERS_PARALLEL", 2000),
		rounds:   envInt("STATEGATE_PEERS_ROUNDS", 4),
		warm:     envInt("STATEGATE_PEERS_WARM", 100),
	}
	loadStart := loadavg()
	started := time.Now()

	up, err := startChild(b, "upstream", "")
	if err != nil {
		b.Fatal(err)
	}
	ref, listBytes, err := fetchReference(up)
	if err != nil {
		b.Fatalf("the upstream: %v", err)
	}

	results := []*measured{{name: "upstream, direct (no proxy)", url: up}}
	for _, r := range rows() {
		if !selected(r.name) {
			continue
		}
		m := &measured{name: r.name, hidden: map[string]bool{}, stream: r.stream}
		for _, h := range r.hidden {
			m.hidden[h] = true
		}
		t0 := time.Now()
		m.url, m.notRun = r.start(b, up)
		if m.notRun == nil {
			fmt.Fprintf(os.Stderr, "peers: %s ready in %.1f s at %s\n", r.name, time.Since(t0).Seconds(), m.url)
		} else {
			fmt.Fprintf(os.Stderr, "peers: %s not run: %v\n", r.name, m.notRun)
		}
		results = append(results, m)
	}

	// Sessions: one per row for the measures at concurrency 1, one more per row shared by
	// the 8 workers (one client with 8 calls in flight); then each row is warmed up.
	for _, m := range results {
		if m.notRun != nil {
			continue
		}
		if m.one, m.notRun = open(m.url); m.notRun != nil {
			continue
		}
		if m.eight, m.notRun = open(m.url); m.notRun != nil {
			continue
		}
		m.one.role, m.eight.role = "concurrency 1", "concurrency 8"
		if m.stream {
			if m.notRun = m.one.holdStream(b); m.notRun == nil {
				m.notRun = m.eight.holdStream(b)
			}
			if m.notRun != nil {
				continue
			}
		}
		m.warmUp(cfg.warm, ref)
	}

	for round := 0; round < cfg.rounds; round++ {
		for _, m := range results {
			if m.runnable() {
				m.round(cfg, ref)
			}
		}
		fmt.Fprintf(os.Stderr, "peers: round %d of %d done (%.0f s)\n", round+1, cfg.rounds, time.Since(started).Seconds())
	}
	loadEnd := loadavg()
	report(os.Stdout, results, cfg, loadStart, loadEnd, listBytes, len(ref.tools), time.Since(started))
}

var ran atomic.Bool

func selected(name string) bool {
	only := os.Getenv("STATEGATE_PEERS_ROWS")
	if only == "" || strings.HasPrefix(name, "plain reverse proxy") {
		return true
	}
	for _, w := range strings.Split(only, ",") {
		if w = strings.TrimSpace(w); w != "" && strings.Contains(strings.ToLower(name), strings.ToLower(w)) {
			return true
		}
	}
	return false
}

type config struct{ calls, lists, parallel, rounds, warm int }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// measured is one row's figures.
type measured struct {
	name   string
	url    string
	notRun error
	hidden map[string]bool
	stream bool // its sessions hold their GET streams (row.stream)

	one, eight *session
	nextID     atomic.Int64 // the JSON-RPC id sequence, the same for every row

	calls, lists []time.Duration
	parCount     int
	parTime      time.Duration
	toolsListed  int

	mu       sync.Mutex
	answers  int
	invalid  int
	firstBad error
}

func (m *measured) id() int64 { return m.nextID.Add(1) + 10 } // 1 and 2 are the reference's

// runnable: started, and not failing more than a few answers (a failing row is not measured
// on; it is reported as failing).
func (m *measured) runnable() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.notRun == nil && m.invalid < 10
}

func (m *measured) outcome(err error) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answers++
	if err != nil {
		m.invalid++
		if m.firstBad == nil {
			m.firstBad = err
		}
		return false
	}
	return true
}

func (m *measured) call(s *session, ref *reference) (time.Duration, bool) {
	id := m.id()
	d, res, err := s.timed(callBody(id), id)
	if err == nil {
		err = ref.checkCall(res)
	}
	if err != nil {
		err = fmt.Errorf("tools/call %d (%s session): %w", idBase+id, s.role, err)
	}
	return d, m.outcome(err)
}

func (m *measured) list(s *session, ref *reference) (time.Duration, bool) {
	id := m.id()
	d, res, err := s.timed(listBody(id), id)
	if err == nil {
		var n int
		n, err = ref.checkList(res, m.hidden)
		m.mu.Lock()
		m.toolsListed = n
		m.mu.Unlock()
	}
	if err != nil {
		err = fmt.Errorf("tools/list %d: %w", idBase+id, err)
	}
	return d, m.outcome(err)
}

func (m *measured) warmUp(n int, ref *reference) {
	for i := 0; i < n && m.runnable(); i++ {
		m.call(m.one, ref)
		m.list(m.one, ref)
	}
	m.parallelCalls(8*n/4, ref)
}

// parallelCalls makes n tools/call with 8 in flight on the shared session and returns how
// long they took.
func (m *measured) parallelCalls(n int, ref *reference) time.Duration {
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 && m.runnable() {
				m.call(m.eight, ref)
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

func (m *measured) round(cfg config, ref *reference) {
	for i := 0; i < cfg.calls/cfg.rounds && m.runnable(); i++ {
		if d, ok := m.call(m.one, ref); ok {
			m.calls = append(m.calls, d)
		}
	}
	for i := 0; i < cfg.lists/cfg.rounds && m.runnable(); i++ {
		if d, ok := m.list(m.one, ref); ok {
			m.lists = append(m.lists, d)
		}
	}
	n := cfg.parallel / cfg.rounds
	d := m.parallelCalls(n, ref)
	if m.runnable() {
		m.parCount += n
		m.parTime += d
	}
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

type figures struct{ callP50, callP99, listP50, listP99, rps float64 }

func (m *measured) figures() figures {
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	f := figures{callP50: us(pct(m.calls, 50)), callP99: us(pct(m.calls, 99)), listP50: us(pct(m.lists, 50)), listP99: us(pct(m.lists, 99))}
	if m.parTime > 0 {
		f.rps = float64(m.parCount) / m.parTime.Seconds()
	}
	return f
}

// state is "" for a row measured with every answer valid, else what to print instead.
func (m *measured) state() string {
	if m.notRun != nil {
		return "not run: " + oneLine(m.notRun.Error())
	}
	if m.invalid > 0 {
		return fmt.Sprintf("failing: %d of %d answers invalid (first: %s)", m.invalid, m.answers, oneLine(m.firstBad.Error()))
	}
	return ""
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

func report(w io.Writer, results []*measured, cfg config, loadStart, loadEnd string, listBytes, tools int, took time.Duration) {
	host, _ := os.Hostname()
	fmt.Fprintf(w, "\n### MCP gateways side by side (%s)\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "One upstream (official Go SDK, Streamable HTTP, %d tools, a %d-byte tools/list), one load generator, protocol %s; "+
		"per row %d tools/call and %d tools/list at concurrency 1, %d tools/call at concurrency 8 on one session, in %d rounds over the rows; %d nproc on %s; took %.0f s.\n\n",
		tools, listBytes, protocolVersion, cfg.calls, cfg.lists, cfg.parallel, cfg.rounds, runtime.NumCPU(), host, took.Seconds())
	fmt.Fprintf(w, "Load average (1, 5, 15 min): %s at the start, %s at the end.\n\n", loadStart, loadEnd)

	// The baseline's figures are those of its valid answers; should some of its answers
	// have failed, it is said under the table (a peer with failed answers gets no ratios).
	var base *figures
	baseNote := ""
	for _, m := range results {
		if strings.HasPrefix(m.name, "plain reverse proxy") && m.notRun == nil && len(m.calls) > 0 && len(m.lists) > 0 && m.parTime > 0 {
			f := m.figures()
			base = &f
			if st := m.state(); st != "" {
				baseNote = "The baseline's ratios are of its valid answers; it was " + st + "."
			}
		}
	}
	fmt.Fprintln(w, "Ratios to the plain reverse proxy (latency: lower is better; rps: higher is better):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| | call p50 | call p99 | list p50 | list p99 | rps at concurrency 8 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, m := range results {
		if st := m.state(); st != "" && !(base != nil && strings.HasPrefix(m.name, "plain reverse proxy")) {
			fmt.Fprintf(w, "| %s | %s | | | | |\n", m.name, st)
			continue
		}
		if base == nil {
			fmt.Fprintf(w, "| %s | no baseline | | | | |\n", m.name)
			continue
		}
		f := m.figures()
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", m.name,
			f.callP50/base.callP50, f.callP99/base.callP99, f.listP50/base.listP50, f.listP99/base.listP99, f.rps/base.rps)
	}
	if baseNote != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, baseNote)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Raw figures (µs; requests per second):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| | call p50 | call p99 | list p50 | list p99 | rps at concurrency 8 | tools listed | answers checked |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, m := range results {
		if m.notRun != nil {
			fmt.Fprintf(w, "| %s | %s | | | | | | |\n", m.name, m.state())
			continue
		}
		f := m.figures()
		note := ""
		if m.invalid > 0 {
			note = fmt.Sprintf(" (%d invalid)", m.invalid)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %d | %d%s |\n", m.name,
			f.callP50, f.callP99, f.listP50, f.listP99, f.rps, m.toolsListed, m.answers, note)
	}
	fmt.Fprintln(w)
}

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		serveChild(role)
		return
	}
	os.Exit(m.Run())
}
