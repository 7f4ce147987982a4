package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/exchange/toollist"
	"github.com/stategate/stategate/host/cli"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/ops"
)

// TestAdminCLI_againstServe: the admin commands against a running `stategate serve`:
// events tails the stream (a tool call driven by the SDK client shows up), the health
// commands say health is not configured, and a wrong token is refused.
func TestAdminCLI_againstServe(t *testing.T) {
	s := startServe(t, demo.Options{})
	t.Setenv(ops.TokenEnv, s.token)
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := runCLI(t, "", "events", "--admin", s.adminURL, "--type", "tool_called", "--follow", "--stop-after", "2")
		done <- result{code, out, errOut}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for { // wait until the CLI is subscribed
		_, body := s.admin(t, "GET", "/admin/info", "")
		if strings.Contains(string(body), `"subscribers":1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the events command never subscribed: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cs := mcpClient(t, s.mcpURL)
	mustCall(t, cs, "cart.pay", nil)
	mustCall(t, cs, "cart.add_item", map[string]any{"sku": "tea"})
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("stategate events did not end after 2 events")
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.Contains(lines[0], `"tool":"cart.pay"`) || !strings.Contains(lines[1], `"outcome":"success"`) {
		t.Fatalf("events: exit %d\n%s\n%s", r.code, r.out, r.err)
	}
	// --count answers from history at once: the last call, with its id; --since from an id.
	code, out, errOut := runCLI(t, "", "events", "--admin", s.adminURL, "--type", "tool_called", "--count", "1")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"tool":"cart.add_item"`) || !strings.Contains(out, `"id":`) {
		t.Fatalf("events --count 1: exit %d\n%s\n%s", code, out, errOut)
	}
	// The refusal is an event with its code, found by tool and type from history.
	code, out, errOut = runCLI(t, "", "events", "--admin", s.adminURL, "--tool", "cart.pay", "--type", "call_refused", "--since", "0")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"code":"TOOL_NOT_AVAILABLE"`) {
		t.Fatalf("events --since 0 --tool cart.pay: exit %d\n%s\n%s", code, out, errOut)
	}
	// Without health, tools lists every listed tool with its workflow hint (calls, latency
	// and the last refusal count for tools a client listed: none did here).
	code, out, errOut = runCLI(t, "", "tools", "--admin", s.adminURL)
	if code != 0 || !strings.Contains(errOut, "tool health is not configured") || !regexp.MustCompile(`cart\.add_item +checkout: in empty, has_items → ADD_ITEM +0`).MatchString(out) ||
		!regexp.MustCompile(`\nusers\.get `).MatchString(out) {
		t.Errorf("tools without health: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, args := range [][]string{{"mode", "cart.*", "disabled"}, {"approve", "cart.*"}} {
		code, _, errOut := runCLI(t, "", append(args, "--admin", s.adminURL)...)
		if code != 1 || !strings.Contains(errOut, "not configured") {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
	}
	t.Setenv(ops.TokenEnv, "wrong")
	if code, _, errOut := runCLI(t, "", "tools", "--admin", s.adminURL); code != 1 || !strings.Contains(errOut, "HTTP 401") {
		t.Errorf("wrong token: exit %d: %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "", "mode", "only-one-arg", "--admin", s.adminURL); code != 2 {
		t.Errorf("mode with one argument: exit %d, want 2", code)
	}
}

// cliOperator is a unit-test fake of the health operator methods (issue 10 brings the
// real ones), so the CLI's happy path is tested now.
type cliOperator struct{}

func (cliOperator) Tools(context.Context) ([]health.ToolStatus, error) {
	return []health.ToolStatus{{Name: "cart.pay", Unit: "tool", Mode: "auto_disabled", Failures: 5, Fingerprint: "0123456789abcdef0123", LastError: "upstream 502"}}, nil
}
func (cliOperator) SetMode(_ context.Context, a health.Action, mode, _ string) ([]health.ModeChange, error) {
	all := []health.ModeChange{{Name: "cart.pay", From: "auto_disabled", To: mode, OK: true},
		{Name: "cart.view", From: "quarantined", To: mode, Error: "quarantined: approve first"}}
	return selected(a, all), nil
}
func (cliOperator) Approve(_ context.Context, a health.Action) ([]health.ModeChange, error) {
	return selected(a, []health.ModeChange{{Name: "cart.pay", From: "quarantined", To: "active", OK: true}}), nil
}

// selected keeps the changes of the tool a names, or all of them for a glob.
func selected(a health.Action, all []health.ModeChange) []health.ModeChange {
	if a.Tool == "" {
		return all
	}
	for _, c := range all {
		if c.Name == a.Tool {
			return []health.ModeChange{c}
		}
	}
	return nil
}

// operatorGateway is a gateway of an operator alone, for the admin handler: no state, no
// listing, no configuration.
type operatorGateway struct{ op ops.Operator }

func (g operatorGateway) Operator() ops.Operator { return g.op }
func (operatorGateway) State() exchange.State    { return nil }
func (operatorGateway) StateKey(string, string, string) (string, error) {
	return "", errors.New("no configuration")
}
func (operatorGateway) Stats() map[string]int64              { return nil }
func (operatorGateway) Listed() []string                     { return nil }
func (operatorGateway) ToolHint(string) string               { return "" }
func (operatorGateway) UnknownTools() []toollist.UnknownTool { return nil }
func (operatorGateway) Workflows() any                       { return []any{} }

// TestAdminCLI_healthFake is a unit test of the health commands' output over a fake
// operator behind the real admin handler.
func TestAdminCLI_healthFake(t *testing.T) {
	a := ops.NewAdmin(ops.AdminOptions{Token: "tok", App: ops.NewApp(nil, nil), Bus: ops.NewBus(),
		Gateway: operatorGateway{cliOperator{}}})
	srv := httptest.NewServer(a)
	defer srv.Close()
	t.Setenv(ops.TokenEnv, "tok")
	code, out, _ := runCLI(t, "", "tools", "--admin", srv.URL)
	if code != 0 || !strings.Contains(out, "cart.pay") || !strings.Contains(out, "auto_disabled") || !strings.Contains(out, "0123456789ab ") || !strings.Contains(out, "upstream 502") {
		t.Fatalf("tools: exit %d\n%s", code, out)
	}
	code, out, errOut := runCLI(t, "", "mode", "cart.*", "active", "--reason", "fixed", "--yes", "--admin", srv.URL)
	if code != 1 || !strings.Contains(out, "cart.pay: auto_disabled -> active") || !strings.Contains(out, "cart.view: quarantined -> active refused: quarantined: approve first") || !strings.Contains(errOut, "1 of 2") {
		t.Fatalf("mode: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, "", "approve", "cart.pay", "--admin", srv.URL); code != 0 || strings.TrimSpace(out) != "cart.pay: quarantined -> active" {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
}

// TestAdminCLI_globAsksFirst: mode, approve and purge with a glob first say how many tools
// it matches and which; not at a terminal they act only with --yes; at a terminal they
// ask, and anything but "y" changes nothing. A name without '*' (or --tool NAME) acts on
// that tool alone without asking (issue 25).
func TestAdminCLI_globAsksFirst(t *testing.T) {
	op := &recordingOperator{}
	a := ops.NewAdmin(ops.AdminOptions{Token: "tok", App: ops.NewApp(nil, nil), Bus: ops.NewBus(),
		Gateway: operatorGateway{op}})
	srv := httptest.NewServer(a)
	defer srv.Close()
	t.Setenv(ops.TokenEnv, "tok")

	code, out, errOut := runCLI(t, "", "approve", "**", "--admin", srv.URL)
	if code != 2 || out != "" || !strings.Contains(errOut, "** matches 3 tool(s); it would change:\n  ** (quarantined -> active) [pending: ** sha256:fp-of-**-012]\n  a.* (quarantined -> active) [pending: a.* sha256:fp-of-a.*-01]\n  a.b (quarantined -> active) [pending: a.b sha256:fp-of-a.b-01]\n") ||
		!strings.Contains(errOut, "pass --yes") {
		t.Fatalf("approve ** not at a terminal: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := op.acted(); len(got) != 0 {
		t.Fatalf("a glob acted without confirmation: %q", got)
	}
	defer func(f func(io.Reader) bool) { cli.IsTerminal = f }(cli.IsTerminal)
	cli.IsTerminal = func(io.Reader) bool { return true }
	for _, answer := range []string{"", "n\n", "no\n", "yess\n"} {
		if code, _, errOut := runCLI(t, answer, "mode", "a.*", "disabled", "--admin", srv.URL); code != 1 || !strings.Contains(errOut, "Proceed with these 2 tool(s)? [y/N]") || !strings.Contains(errOut, "cancelled") {
			t.Fatalf("answer %q: exit %d\n%s", answer, code, errOut)
		}
	}
	if got := op.acted(); len(got) != 0 {
		t.Fatalf("a refused confirmation acted: %q", got)
	}
	code, out, errOut = runCLI(t, "y\n", "mode", "a.*", "disabled", "--admin", srv.URL)
	if code != 0 || out != "a.*: quarantined -> disabled\na.b: quarantined -> disabled\n" {
		t.Fatalf("confirmed: exit %d\n%s\n%s", code, out, errOut)
	}
	// The confirmed glob acts on each previewed tool by its exact name.
	if got, want := strings.Join(op.acted(), "|"), "mode tool=a.*|mode tool=a.b"; got != want {
		t.Fatalf("acted %q, want %q", got, want)
	}
	cli.IsTerminal = func(io.Reader) bool { return false }
	if code, out, errOut := runCLI(t, "", "approve", "--tool", "**", "--admin", srv.URL); code != 0 || out != "**: quarantined -> active\n" {
		t.Fatalf("approve --tool **: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "", "approve", "a.b", "--admin", srv.URL); code != 0 || out != "a.b: quarantined -> active\n" {
		t.Fatalf("approve a.b: exit %d\n%s\n%s", code, out, errOut)
	}
	// An approval, by name too, sends the definitions its preview showed.
	if got, want := strings.Join(op.acted()[2:], "|"), "approve tool=** pending=map[**:fp-of-**-0123456789]|approve tool=a.b pending=map[a.b:fp-of-a.b-0123456789]"; got != want {
		t.Fatalf("acted %q, want %q", got, want)
	}
	if code, _, _ := runCLI(t, "", "approve", "--tool", "**", "a.b", "--admin", srv.URL); code != 2 {
		t.Errorf("approve with --tool and a positional: exit %d, want 2", code)
	}
}

// recordingOperator is a fake health operator over the tools "**", "a.*" and "a.b", all
// quarantined, that records every action which is not a dry run. It matches globs the
// engine's way closely enough for the test: "**" matches all, "a.*" the two under "a".
type recordingOperator struct {
	mu   sync.Mutex
	acts []string
}

func (o *recordingOperator) acted() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.acts...)
}

func (o *recordingOperator) Tools(context.Context) ([]health.ToolStatus, error) { return nil, nil }

func (o *recordingOperator) changes(op string, a health.Action, to string) []health.ModeChange {
	var out []health.ModeChange
	for _, name := range []string{"**", "a.*", "a.b"} {
		if name == a.Tool || a.Match == "**" || (a.Match == "a.*" && strings.HasPrefix(name, "a.")) {
			mc := health.ModeChange{Name: name, From: "quarantined", To: to, OK: true}
			if op == "approve" {
				mc.Pending = map[string]string{name: "fp-of-" + name + "-0123456789"}
			}
			out = append(out, mc)
		}
	}
	if !a.DryRun {
		act := op + " tool=" + a.Tool + a.Match
		if a.Pending != nil {
			act += fmt.Sprintf(" pending=%v", a.Pending)
		}
		o.mu.Lock()
		o.acts = append(o.acts, act)
		o.mu.Unlock()
	}
	return out
}

func (o *recordingOperator) SetMode(_ context.Context, a health.Action, mode, _ string) ([]health.ModeChange, error) {
	return o.changes("mode", a, mode), nil
}

func (o *recordingOperator) Approve(_ context.Context, a health.Action) ([]health.ModeChange, error) {
	return o.changes("approve", a, "active"), nil
}

// TestAdminCLI_purge: `stategate purge` against a running serve: refused while the
// configuration has no response cache, then, after a reload that caches users.get,
// purges it and lists it.
func TestAdminCLI_purge(t *testing.T) {
	s := startServe(t, demo.Options{})
	t.Setenv(ops.TokenEnv, s.token)
	if code, _, errOut := runCLI(t, "", "purge", "users.*", "--admin", s.adminURL); code != 1 || !strings.Contains(errOut, "HTTP 409") {
		t.Fatalf("purge without a cache: exit %d: %s", code, errOut)
	}
	cached := strings.Replace(string(demo.Config()), `"policies": [`, `"policies": [{"match": "users.get", "cacheControl": "immutable"},`, 1)
	cached = strings.Replace(cached, `"version": 1,`, `"version": 1, "cache": {},`, 1)
	if cached == string(demo.Config()) {
		t.Fatal("the demo configuration changed shape: the cache could not be turned on")
	}
	if err := os.WriteFile(s.cfgPath, []byte(cached), 0o644); err != nil {
		t.Fatal(err)
	}
	if status, body := s.admin(t, "POST", "/admin/reload", "{}"); status != 200 || !strings.Contains(string(body), `"ok":true`) {
		t.Fatalf("reload: %d %s", status, body)
	}
	cs := mcpClient(t, s.mcpURL)
	// The counters are counted as the call ends, which may be just after its answer
	// reached the client, and on a loaded machine a call may still meet the generation
	// before the reload: call again until a hit shows (the point here is what purge does
	// with a cached tool), then both counters must have counted.
	counted := func() bool {
		mustCall(t, cs, "users.get", map[string]any{"id": "u1"})
		fams := s.metrics(t)
		for _, r := range []string{"result=miss", "result=hit"} {
			if v, ok := value(fams, "stategate_cache_requests_total", r); !ok || v < 1 {
				return false
			}
		}
		return true
	}
	waitFor(t, "stategate_cache_requests_total{result=miss} and {result=hit} at least 1", counted)
	code, out, errOut := runCLI(t, "", "purge", "users.*", "--admin", s.adminURL)
	if code != 2 || out != "" || !strings.Contains(errOut, "users.* matches 1 tool(s); it would purge:\n  users.get\n") || !strings.Contains(errOut, "--yes") {
		t.Fatalf("purge of a glob without --yes, not at a terminal: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", "purge", "users.*", "--yes", "--admin", s.adminURL)
	if code != 0 || !strings.Contains(out, "users.get\n") || !strings.Contains(out, "1 cached tool(s) purged") {
		t.Fatalf("purge: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", "purge", "users.get", "--admin", s.adminURL)
	if code != 0 || out != "users.get\n1 cached tool(s) purged\n" {
		t.Fatalf("purge by name: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", "purge", "--tool", "users.ge", "--admin", s.adminURL)
	if code != 0 || out != "0 cached tool(s) purged\n" {
		t.Fatalf("purge of a name no cached tool has: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, _ := runCLI(t, "", "purge", "--admin", s.adminURL); code != 2 {
		t.Errorf("purge without a glob: exit %d, want 2", code)
	}
}

// TestAdminCLI_reset: stategate reset puts a session's checkout back in its initial state
// or in a named state (stored, so the gate sees it), says from and to, is an event with
// the session's digest (never its id), and names what is wrong for an unknown workflow,
// state or session.
func TestAdminCLI_reset(t *testing.T) {
	s := startServe(t, demo.Options{})
	t.Setenv(ops.TokenEnv, s.token)
	cs := mcpClient(t, s.mcpURL)
	mustCall(t, cs, "cart.add_item", map[string]any{"sku": "tea"})
	sid := cs.ID()
	code, out, errOut := runCLI(t, "", "reset", "checkout", "--session", sid, "--reason", "stuck", "--admin", s.adminURL)
	if code != 0 || strings.TrimSpace(out) != "checkout: has_items -> empty" {
		t.Fatalf("reset: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut = runCLI(t, "", "reset", "checkout", "--session", sid, "--to", "payment", "--admin", s.adminURL); code != 0 || strings.TrimSpace(out) != "checkout: empty -> payment" {
		t.Fatalf("reset --to payment: exit %d\n%s\n%s", code, out, errOut)
	}
	mustCall(t, cs, "cart.pay", nil) // allowed only in payment: the gate read the reset state
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"nope", "--session", sid}, "no workflow of that name"},
		{[]string{"checkout", "--session", sid, "--to", "limbo"}, "has no state limbo"},
		{[]string{"checkout", "--session", "never-seen"}, "nothing is stored for that session"},
	} {
		code, _, errOut := runCLI(t, "", append(append([]string{"reset"}, c.args...), "--admin", s.adminURL)...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("reset %v: exit %d: %s", c.args, code, errOut)
		}
	}
	if code, _, _ := runCLI(t, "", "reset", "checkout", "--admin", s.adminURL); code != 2 {
		t.Errorf("reset without --session or --handle: exit %d, want 2", code)
	}
	code, out, _ = runCLI(t, "", "events", "--type", "workflow_reset", "--admin", s.adminURL)
	if code != 0 || strings.Count(out, "\n") != 2 || strings.Contains(out, sid) || !strings.Contains(out, events.SessionDigest(sid)) ||
		!strings.Contains(out, `"reason":"stuck"`) || !strings.Contains(out, `"via":"cli"`) {
		t.Fatalf("workflow_reset events:\n%s", out)
	}
}

// TestServe_historySurvivesARestart: with a bolt store, the event history is in the store
// file: after `stategate serve` stops and starts again on the same file, `events` still
// answers the refusal from before the restart, and new events get higher ids.
func TestServe_historySurvivesARestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "gw.db")
	s := startServe(t, demo.Options{}, "--store", "bolt:"+db)
	t.Setenv(ops.TokenEnv, s.token)
	cs := mcpClient(t, s.mcpURL)
	mustCall(t, cs, "cart.pay", nil) // refused
	_, before, _ := runCLI(t, "", "events", "--type", "call_refused", "--count", "1", "--admin", s.adminURL)
	s.stop()
	if err := <-s.done; err != nil {
		t.Fatal(err)
	}
	s.done <- nil // for the first server's cleanup

	s2 := startServe(t, demo.Options{}, "--store", "bolt:"+db)
	t.Setenv(ops.TokenEnv, s2.token)
	code, after, errOut := runCLI(t, "", "events", "--type", "call_refused", "--count", "5", "--admin", s2.adminURL)
	if code != 0 || strings.TrimSpace(after) != strings.TrimSpace(before) || !strings.Contains(after, "TOOL_NOT_AVAILABLE") {
		t.Fatalf("after the restart: exit %d\n%s\nbefore:\n%s\n%s", code, after, before, errOut)
	}
	var old, fresh struct{ ID uint64 }
	json.Unmarshal([]byte(before), &old)
	_, last, _ := runCLI(t, "", "events", "--count", "1", "--admin", s2.adminURL)
	json.Unmarshal([]byte(last), &fresh)
	if fresh.ID <= old.ID {
		t.Fatalf("an event after the restart has id %d, not above %d", fresh.ID, old.ID)
	}
}
