package dockermcp_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/host/configfile"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/intercept"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/stategate/stategate/internal/dockermcp"
	"github.com/stategate/stategate/internal/testenv"
)

// End to end behind the real docker-mcp binary: the official Go SDK client over docker-mcp's
// stdio, docker-mcp without Docker Engine, the demo upstream on the official Go SDK, and the
// built TinyGo plugin on the project's host. The sample files of examples/docker-mcp are
// the ones used.

const (
	sampleConfig  = "../../examples/docker-mcp/stategate.yaml"
	sampleCatalog = "../../examples/docker-mcp/catalog.yaml"
	sampleURL     = "http://127.0.0.1:8080/mcp"
)

// upstream is the demo server, counting the tools/call requests that reach it by tool.
type upstream struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
}

func startUpstream(t *testing.T) *upstream {
	u := &upstream{calls: map[string]int{}}
	h := demo.Handler(demo.Options{SlowDelay: 1500 * time.Millisecond})
	u.Server = httptest.NewServer(testenv.OnToolCall(h, func(_ *http.Request, tool string) {
		u.mu.Lock()
		u.calls[tool]++
		u.mu.Unlock()
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) ran(tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[tool]
}

// pool is the built plugin with cfg.
func pool(t *testing.T, cfg []byte) *wasmrt.Pool {
	t.Helper()
	testenv.NeedFile(t, "../../build/stategate.wasm", "run `make build`")
	wasm, err := os.ReadFile("../../build/stategate.wasm")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt, err := wasmrt.New(ctx, wasm, wasmrt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	p, err := wasmrt.NewPool(ctx, rt, cfg, wasmrt.PoolOptions{Size: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(ctx) })
	return p
}

// readYAML reads a stategate configuration with the CLI's loader (host/configfile).
func readYAML(t *testing.T, path string) []byte {
	t.Helper()
	js, err := configfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// catalog is the sample catalog with its server's URL replaced by url.
func catalog(t *testing.T, url string) []byte {
	t.Helper()
	raw, err := os.ReadFile(sampleCatalog)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(sampleURL)) {
		t.Fatalf("%s does not name %s", sampleCatalog, sampleURL)
	}
	return bytes.ReplaceAll(raw, []byte(sampleURL), []byte(url))
}

func call(t *testing.T, ctx context.Context, s *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return res, strings.Join(text, "\n")
}

var cartID = regexp.MustCompile(`cart_[0-9a-f]{16}`)

// scenario is what both modes must show: a denied out-of-order call that never reaches the
// upstream, the invalidation block, and the workflow advancing to its final state.
func scenario(t *testing.T, ctx context.Context, s *mcp.ClientSession, up *upstream) {
	_, text := call(t, ctx, s, "cart.create", nil)
	id := cartID.FindString(text)
	if id == "" {
		t.Fatalf("cart.create gave no cart_id: %s", text)
	}

	res, text := call(t, ctx, s, "cart.pay", map[string]any{"cart_id": id})
	if !res.IsError || !strings.Contains(text, "Tool cart.pay is not available now") || !strings.Contains(text, "cart.add_item") {
		t.Errorf("cart.pay before checkout: isError %v, %q; want the gate's denial naming what is possible", res.IsError, text)
	}
	if n := up.ran("cart.pay"); n != 0 {
		t.Errorf("the denied cart.pay reached the upstream %d time(s)", n)
	}

	res, text = call(t, ctx, s, "cart.add_item", map[string]any{"cart_id": id, "sku": "tea"})
	if res.IsError || !strings.HasPrefix(text, "[System: Cache invalidated for cart.view — caused by cart.add_item]") {
		t.Errorf("cart.add_item: isError %v, %q; want the invalidation block first", res.IsError, text)
	}
	res, text = call(t, ctx, s, "tasks.update", map[string]any{"id": "T1", "status": "done"})
	if res.IsError || !strings.HasPrefix(text, "[System: Cache invalidated for tasks.*, sprints.* — caused by tasks.update]") {
		t.Errorf("tasks.update: isError %v, %q; want the invalidation block first", res.IsError, text)
	}

	// The workflow advances: checkout, then pay, are allowed in turn and run upstream.
	for _, tool := range []string{"cart.checkout", "cart.pay"} {
		if res, text = call(t, ctx, s, tool, map[string]any{"cart_id": id}); res.IsError {
			t.Fatalf("%s after its predecessor: %q", tool, text)
		}
	}
	if n := up.ran("cart.pay"); n != 1 {
		t.Errorf("cart.pay reached the upstream %d time(s), want 1", n)
	}
	// confirmed is final: the cart takes no more items.
	if res, text = call(t, ctx, s, "cart.add_item", map[string]any{"cart_id": id, "sku": "tea"}); !res.IsError || !strings.Contains(text, "confirmed") {
		t.Errorf("cart.add_item on a paid cart: isError %v, %q; want a denial in state confirmed", res.IsError, text)
	}
	// Another cart has a workflow of its own.
	_, text = call(t, ctx, s, "cart.create", nil)
	other := cartID.FindString(text)
	if res, text = call(t, ctx, s, "cart.checkout", map[string]any{"cart_id": other}); !res.IsError || !strings.Contains(text, "state empty") {
		t.Errorf("cart.checkout on a new cart: isError %v, %q; want a denial in state empty", res.IsError, text)
	}
}

func descriptions(t *testing.T, ctx context.Context, s *mcp.ClientSession) map[string]string {
	t.Helper()
	out := map[string]string{}
	for tool, err := range s.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		out[tool.Name] = tool.Description
	}
	return out
}

// TestFronting: stategate serve is the remote server in Docker's catalog.
func TestFronting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dockermcp.Binary(t)
	cfg := readYAML(t, sampleConfig)
	up := startUpstream(t)
	upURL, _ := url.Parse(up.URL + "/mcp")
	gw, err := gateway.New(gateway.Options{Upstream: upURL, Plugin: pool(t, cfg), Config: cfg, Store: store.NewMemory(store.Options{}),
		Origins: admission.OriginPolicy{Loopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(gw)
	t.Cleanup(front.Close) // after docker-mcp has ended (cleanups run last first)

	d := dockermcp.Start(t, ctx, dockermcp.Options{Catalog: catalog(t, front.URL+"/mcp"), Servers: []string{"stategate"}})
	tools := descriptions(t, ctx, d.Session)
	for tool, want := range map[string]string{
		"countries.list": "[Cache-Control: immutable]",
		"tasks.update":   "[Cache-Control: no-store]",
		"cart.pay":       "[Workflow checkout: available only in state payment]",
		"cart.checkout":  "[Workflow checkout: available only in state has_items]",
	} {
		if !strings.Contains(tools[tool], want) {
			t.Errorf("tools/list through docker-mcp: %s is %q, want %q in it", tool, tools[tool], want)
		}
	}
	scenario(t, ctx, d.Session, up)
	if gw.Stats.Get(stats.CountDenied) < 3 {
		t.Errorf("the gateway denied %d calls, want at least 3", gw.Stats.Get(stats.CountDenied))
	}
}

// TestIntercepting: stategate intercept is docker-mcp's before and after interceptor, and
// the upstream is docker-mcp's remote server itself.
func TestIntercepting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dockermcp.Binary(t)
	cfg := readYAML(t, sampleConfig)
	up := startUpstream(t)
	h, err := intercept.New(intercept.Options{Plugin: pool(t, cfg), Config: cfg, State: store.StateOf(store.NewMemory(store.Options{})),
		Origins: admission.OriginPolicy{Loopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	hooks := httptest.NewServer(h)
	t.Cleanup(hooks.Close)

	d := dockermcp.Start(t, ctx, dockermcp.Options{Catalog: catalog(t, up.URL+"/mcp"), Servers: []string{"stategate"},
		Interceptors: []string{"before:http:" + hooks.URL + "/e2e/before", "after:http:" + hooks.URL + "/e2e/after"}})
	// This mode cannot decorate tools/list: docker-mcp's hooks see tools/call only.
	tools := descriptions(t, ctx, d.Session)
	if tools["cart.pay"] == "" || strings.Contains(tools["cart.pay"], "[Workflow") || strings.Contains(tools["countries.list"], "[Cache-Control") {
		t.Errorf("tools/list: cart.pay %q, countries.list %q; want the upstream's descriptions, listed and undecorated", tools["cart.pay"], tools["countries.list"])
	}
	scenario(t, ctx, d.Session, up)
	if n := h.Stats.Faults(abi.FaultUnpaired); n != 0 {
		t.Errorf("%d results could not be paired with their call; one call at a time must always pair", n)
	}
	if n := h.InFlight("e2e"); n != 0 {
		t.Errorf("%d calls still in flight after every answer came", n)
	}
	if got := h.Stats.Get(stats.CountTransitions); got < 3 {
		t.Errorf("transitions stored: %d, want at least 3", got)
	}
}

// TestIntercepting_afterHookFirst: with the after-hook listed first (so it runs outside
// the before-hook and sees the core's own denials), pairing is unchanged.
func TestIntercepting_afterHookFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dockermcp.Binary(t)
	cfg := readYAML(t, sampleConfig)
	up := startUpstream(t)
	h, err := intercept.New(intercept.Options{Plugin: pool(t, cfg), Config: cfg, State: store.StateOf(store.NewMemory(store.Options{})),
		Origins: admission.OriginPolicy{Loopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	hooks := httptest.NewServer(h)
	t.Cleanup(hooks.Close)
	d := dockermcp.Start(t, ctx, dockermcp.Options{Catalog: catalog(t, up.URL+"/mcp"), Servers: []string{"stategate"},
		Interceptors: []string{"after:http:" + hooks.URL + "/after", "before:http:" + hooks.URL + "/before"}})
	scenario(t, ctx, d.Session, up)
	if n := h.Stats.Faults(abi.FaultUnpaired); n != 0 {
		t.Errorf("%d results unpaired", n)
	}
	if n := h.InFlight(intercept.DefaultChannel); n != 0 {
		t.Errorf("%d calls still in flight", n)
	}
}

// TestIntercepting_concurrentCalls: docker-mcp runs a client's calls concurrently. A result
// that could belong to calls of two tools passes unchanged rather than be guessed; a call
// that can move a workflow waits until it runs alone, and then pairs exactly.
func TestIntercepting_concurrentCalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dockermcp.Binary(t)
	cfg := readYAML(t, sampleConfig)
	up := startUpstream(t)
	h, err := intercept.New(intercept.Options{Plugin: pool(t, cfg), Config: cfg, State: store.StateOf(store.NewMemory(store.Options{})),
		Origins: admission.OriginPolicy{Loopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	hooks := httptest.NewServer(h)
	t.Cleanup(hooks.Close)
	d := dockermcp.Start(t, ctx, dockermcp.Options{Catalog: catalog(t, up.URL+"/mcp"), Servers: []string{"stategate"},
		Interceptors: []string{"before:http:" + hooks.URL + "/c1/before", "after:http:" + hooks.URL + "/c1/after"}})
	s := d.Session

	// slow.wait runs while another call starts and ends.
	slow := func() chan string {
		done := make(chan string, 1)
		go func() {
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "slow.wait"})
			switch {
			case err != nil:
				done <- "error: " + err.Error()
			case res.IsError:
				done <- "isError"
			default:
				done <- "ok"
			}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for h.InFlight("c1") == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if h.InFlight("c1") == 0 {
			t.Fatal("slow.wait never reached the before-hook")
		}
		return done
	}

	done := slow()
	res, text := call(t, ctx, s, "tasks.update", map[string]any{"id": "T2", "status": "done"})
	if res.IsError || strings.Contains(text, "[System:") {
		t.Errorf("tasks.update while slow.wait ran: isError %v, %q; want the upstream's result unchanged (ambiguous, not guessed)", res.IsError, text)
	}
	if got := <-done; got != "ok" {
		t.Fatalf("slow.wait: %s", got)
	}
	if n := h.Stats.Faults(abi.FaultUnpaired); n != 2 {
		t.Errorf("unpaired results: %d, want 2 (tasks.update's, then slow.wait's)", n)
	}
	if n := h.InFlight("c1"); n != 0 {
		t.Fatalf("in flight after both answers: %d", n)
	}

	// A moving call waits for slow.wait to end, then runs alone and pairs.
	_, text = call(t, ctx, s, "cart.create", nil)
	id := cartID.FindString(text)
	done = slow()
	start := time.Now()
	res, text = call(t, ctx, s, "cart.add_item", map[string]any{"cart_id": id, "sku": "tea"})
	if res.IsError || !strings.HasPrefix(text, "[System: Cache invalidated for cart.view") {
		t.Errorf("cart.add_item while slow.wait ran: isError %v, %q; want it to wait, run and get its block", res.IsError, text)
	}
	if got := <-done; got != "ok" {
		t.Fatalf("slow.wait: %s", got)
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Errorf("cart.add_item finished %v after it started: it did not wait for slow.wait", waited)
	}
	if res, text = call(t, ctx, s, "cart.checkout", map[string]any{"cart_id": id}); res.IsError {
		t.Errorf("cart.checkout after cart.add_item: %q (the workflow did not advance)", text)
	}
	if n := h.Stats.Faults(abi.FaultUnpaired); n != 2 {
		t.Errorf("unpaired results: %d, want still 2", n)
	}
}

// TestIntercepting_streamingTransport pins docker/mcp-gateway#358: with --transport
// streaming, docker-mcp cannot even marshal the before-hook's payload (its Extra holds a
// func), so every tools/call fails and nothing reaches the upstream. Intercepting is
// therefore stdio only; when this test fails, #358 is fixed and docs/docker-mcp.md's limit can go.
func TestIntercepting_streamingTransport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bin := dockermcp.Binary(t)
	cfg := readYAML(t, sampleConfig)
	up := startUpstream(t)
	h, err := intercept.New(intercept.Options{Plugin: pool(t, cfg), Config: cfg, State: store.StateOf(store.NewMemory(store.Options{})),
		Origins: admission.OriginPolicy{Loopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	hooks := httptest.NewServer(h)
	t.Cleanup(hooks.Close)
	home := t.TempDir()
	catalogs := filepath.Join(home, ".docker", "mcp", "catalogs")
	if err := os.MkdirAll(catalogs, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(catalogs, "c.yaml"), catalog(t, up.URL+"/mcp"), 0o644)
	os.WriteFile(filepath.Join(home, "s.env"), nil, 0o600)
	port := strconv.Itoa(testenv.FreePort(t))
	cmd := exec.CommandContext(ctx, bin, "gateway", "run", "--catalog", "c.yaml", "--servers", "stategate", "--secrets", filepath.Join(home, "s.env"),
		"--verify-signatures=false", "--watch=false", "--block-secrets=false", "--static", "--transport", "streaming", "--port", port,
		"--interceptor", "before:http:"+hooks.URL+"/before", "--interceptor", "after:http:"+hooks.URL+"/after")
	cmd.Dir = home
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "DOCKER_MCP_IN_CONTAINER=1", "DOCKER_MCP_ALLOW_INSECURE_REMOTE_URLS=1", "MCP_GATEWAY_AUTH_TOKEN=e2e"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	client := mcp.NewClient(&mcp.Implementation{Name: "stategate-docker-e2e", Version: "1.0.0"}, nil)
	var s *mcp.ClientSession
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		s, err = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://127.0.0.1:" + port + "/mcp",
			HTTPClient: &http.Client{Transport: bearer("e2e")}}, nil)
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("docker-mcp --transport streaming: %v", err)
	}
	defer s.Close()
	_, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "cart.create"})
	if err == nil || !strings.Contains(err.Error(), "marshalling request") {
		t.Fatalf("cart.create through streaming docker-mcp with hooks: %v; want docker/mcp-gateway#358's marshalling error (fixed? update docs/docker-mcp.md)", err)
	}
	if n := up.ran("cart.create"); n != 0 {
		t.Errorf("cart.create reached the upstream %d time(s)", n)
	}
	if n := h.Stats.Get(stats.CountRequests); n != 0 {
		t.Errorf("the before-hook was reached %d time(s); #358 fails before it", n)
	}
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestFronting_sessionKeyedToolsNeverOffered pins why the sample keys its workflow by a
// handle: docker-mcp lists tools once, at start-up, on a session of its own, so tools a
// session-keyed workflow hides there (the demo's own configuration) are never offered, even
// after the workflow reaches their state on the calling session.
func TestFronting_sessionKeyedToolsNeverOffered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dockermcp.Binary(t)
	cfg := demo.Config()
	up := startUpstream(t)
	upURL, _ := url.Parse(up.URL + "/mcp")
	gw, err := gateway.New(gateway.Options{Upstream: upURL, Plugin: pool(t, cfg), Config: cfg, Store: store.NewMemory(store.Options{}),
		Origins: admission.OriginPolicy{Loopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(gw)
	t.Cleanup(front.Close)
	d := dockermcp.Start(t, ctx, dockermcp.Options{Catalog: catalog(t, front.URL+"/mcp"), Servers: []string{"stategate"}})
	if res, text := call(t, ctx, d.Session, "cart.add_item", map[string]any{"sku": "tea"}); res.IsError {
		t.Fatalf("cart.add_item: %s", text)
	}
	tools := descriptions(t, ctx, d.Session)
	if _, ok := tools["cart.add_item"]; !ok {
		t.Fatal("cart.add_item not listed")
	}
	if _, ok := tools["cart.checkout"]; ok {
		t.Fatal("cart.checkout is listed: docker-mcp refreshed its tool list (update docs/docker-mcp.md and the sample)")
	}
	res, err := d.Session.CallTool(ctx, &mcp.CallToolParams{Name: "cart.checkout"})
	if err == nil && !res.IsError {
		t.Fatalf("cart.checkout in state has_items through docker-mcp ran; want it unknown to docker-mcp")
	}
	t.Logf("cart.checkout through docker-mcp: %v", err)
	if n := up.ran("cart.checkout"); n != 0 {
		t.Errorf("cart.checkout reached the upstream %d time(s)", n)
	}
}
