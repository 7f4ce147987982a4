package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stategate/stategate/host/demo"
)

// TestServe_reloadUnderLoad: eight official SDK clients call tools without a pause while
// the configuration is reloaded again and again (admin API and SIGHUP, each a new plugin
// pool and exchange core): no request fails, and workflows keep their state across the
// swaps. An invalid file is refused with every error and the old configuration keeps
// serving.
func TestServe_reloadUnderLoad(t *testing.T) {
	s := startServe(t, demo.Options{JSONResponse: true})
	events := s.subscribeSSE(t, "?type=config_reloaded")
	failedEvents := s.subscribeSSE(t, "?type=config_reload_failed")
	valid := demo.Config()
	// A second valid configuration: slow.wait gets a longer timeout.
	other := []byte(strings.Replace(string(valid), `"timeoutMs": 1000`, `"timeoutMs": 1500`, 1))
	if string(other) == string(valid) {
		t.Fatal("the demo configuration changed: adjust the test's edit")
	}

	const clients = 8
	var calls, failures atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		cs := mcpClient(t, s.mcpURL)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				var bad bool
				switch n % 3 {
				case 0:
					_, err = cs.ListTools(context.Background(), nil)
				case 1:
					res, e := callTool(cs, "countries.list", nil)
					err, bad = e, e == nil && res.IsError
				case 2:
					res, e := callTool(cs, "cart.add_item", map[string]any{"sku": "tea"})
					err, bad = e, e == nil && res.IsError
				}
				calls.Add(1)
				if err != nil || bad {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("client %d call %d: %v (isError %v)", i, n, err, bad))
				}
			}
		}()
	}

	const reloads = 10
	for r := range reloads {
		cfg := valid
		if r%2 == 0 {
			cfg = other
		}
		if err := os.WriteFile(s.cfgPath, cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		if r == reloads-1 {
			syscall.Kill(os.Getpid(), syscall.SIGHUP) // serve catches SIGHUP while it runs
		} else if status, body := s.admin(t, "POST", "/admin/reload", "{}"); status != 200 || !strings.Contains(string(body), `"ok":true`) {
			t.Fatalf("reload %d: %d %s", r, status, body)
		}
		if e := next(t, events.events); e["type"] != "config_reloaded" {
			t.Fatalf("reload %d: event %v", r, e)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// An invalid configuration: refused with every error; the old one keeps serving.
	invalid, err := os.ReadFile("../../../abi/testdata/config/invalid.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(s.cfgPath, invalid, 0o644)
	status, body := s.admin(t, "POST", "/admin/reload", "{}")
	var res struct {
		OK     bool
		Errors []string
	}
	json.Unmarshal(body, &res)
	if status != 422 || res.OK || len(res.Errors) != 11 || !strings.Contains(strings.Join(res.Errors, "\n"), "workflows[0].initial: unknown state") {
		t.Fatalf("invalid reload: %d %s", status, body)
	}
	if e := next(t, failedEvents.events); len(e["data"].(map[string]any)["errors"].([]any)) != 11 {
		t.Fatalf("config_reload_failed event %v", e)
	}
	os.WriteFile(s.cfgPath, []byte(`{"version":`), 0o644)
	if status, body := s.admin(t, "POST", "/admin/reload", "{}"); status != 422 || !strings.Contains(string(body), "errors") {
		t.Fatalf("malformed reload: %d %s", status, body)
	}
	time.Sleep(200 * time.Millisecond) // traffic after the refusals
	close(stop)
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		t.Fatalf("clients still blocked 30s after the last reload (%d calls so far)", calls.Load())
	}

	if f := failures.Load(); f != 0 {
		t.Fatalf("%d of %d requests failed during %d reloads; first: %v", f, calls.Load(), reloads, firstErr.Load())
	}
	if calls.Load() < 3*clients {
		t.Fatalf("only %d calls ran", calls.Load())
	}
	fams := s.metrics(t)
	if v, _ := value(fams, "stategate_config_reloads_total", "result=ok"); v != reloads {
		t.Errorf("config_reloads_total{ok} = %v, want %d", v, reloads)
	}
	if v, _ := value(fams, "stategate_config_reloads_total", "result=failed"); v != 2 {
		t.Errorf("config_reloads_total{failed} = %v, want 2", v)
	}
	// The old configuration still serves, and a workflow kept its state: checkout and pay.
	cs := mcpClient(t, s.mcpURL)
	mustCall(t, cs, "cart.add_item", map[string]any{"sku": "tea"})
	mustCall(t, cs, "cart.checkout", nil)
	if res := mustCall(t, cs, "cart.pay", nil); res.IsError {
		t.Fatalf("cart.pay after the reloads: %+v", res.Content)
	}
	t.Logf("%d requests from %d clients across %d reloads, none failed", calls.Load(), clients, reloads)
}
