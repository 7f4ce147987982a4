package testharness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/stategate/stategate/internal/testenv"
	"github.com/stategate/stategate/plugin/engine"
)

const xstateDir = "xstate"

// xsCase is one workflow and the calls made to it.
type xsCase struct {
	Workflow map[string]any `json:"workflow"`
	Calls    []xsCall       `json:"calls"`
}

type xsCall struct {
	Tool      string         `json:"tool"`
	Success   bool           `json:"success"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Result    map[string]any `json:"result,omitempty"`
}

type xsResult struct {
	Error   string            `json:"error"`
	Initial json.RawMessage   `json:"initial"`
	Steps   []json.RawMessage `json:"steps"`
}

type xsStep struct {
	Allowed bool            `json:"allowed"`
	Value   json.RawMessage `json:"value"`
	Status  string          `json:"status"`
}

// runXState runs cases through the real xstate package (testharness/xstate/run.mjs).
func runXState(t *testing.T, cases []xsCase) []xsResult {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Missing(t, fmt.Errorf("node is not on PATH: %w", err))
		return nil
	}
	if _, err := os.Stat(filepath.Join(xstateDir, "node_modules", "xstate")); err != nil {
		testenv.Missing(t, fmt.Errorf("%s/node_modules/xstate is missing: run `make node`", xstateDir))
		return nil
	}
	in, err := json.Marshal(map[string]any{"cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "run.mjs")
	cmd.Dir = xstateDir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xstate: %v\n%s", err, stderr.String())
	}
	var res struct {
		Results []xsResult `json:"results"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("xstate output: %v", err)
	}
	if len(res.Results) != len(cases) {
		t.Fatalf("xstate answered %d cases, want %d", len(res.Results), len(cases))
	}
	return res.Results
}

// caller runs one export on one configuration.
type caller func(fn abi.Function, input []byte) ([]byte, error)

// chartEngines returns the engines the differential test drives: native Go, and the
// built module on the project's wazero host (required under STATEGATE_REQUIRE_ALL=1).
func chartEngines(t *testing.T, ctx context.Context) map[string]func(cfg []byte) (caller, error) {
	es := map[string]func(cfg []byte) (caller, error){
		"native": func(cfg []byte) (caller, error) {
			e, err := engine.New(cfg)
			if err != nil {
				return nil, err
			}
			return func(fn abi.Function, in []byte) ([]byte, error) { return e.Call(fn, in), nil }, nil
		},
	}
	wasm, err := os.ReadFile(tinyGoWasm)
	if err != nil {
		if testenv.RequireAll() {
			t.Fatalf("%s is missing: run `make build`", tinyGoWasm)
		}
		t.Logf("skipping tinygo/raw: %v", err)
		return es
	}
	rt, err := wasmrt.New(ctx, wasm, wasmrt.Options{Name: "stategate.wasm"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	es["tinygo/raw"] = func(cfg []byte) (caller, error) {
		in, err := rt.Instantiate(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return func(fn abi.Function, input []byte) ([]byte, error) { return in.Call(ctx, fn, input) }, nil
	}
	return es
}

// drive answers an engine's needState from store and returns its answer.
func drive(call caller, fn abi.Function, input map[string]any, store map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	states := map[string]json.RawMessage{}
	for attempt := 0; attempt < 3; attempt++ {
		input["states"] = states
		in, _ := json.Marshal(input)
		out, err := call(fn, in)
		if err != nil {
			return nil, err
		}
		var ans map[string]json.RawMessage
		if err := json.Unmarshal(out, &ans); err != nil {
			return nil, fmt.Errorf("%s: %v: %s", fn.Name(), err, out)
		}
		if need, ok := ans["needState"]; ok {
			var keys []string
			json.Unmarshal(need, &keys)
			for _, k := range keys {
				if v, ok := store[k]; ok {
					states[k] = v
				} else {
					states[k] = json.RawMessage("null")
				}
			}
			continue
		}
		if _, ok := ans["error"]; ok {
			return nil, fmt.Errorf("%s: %s", fn.Name(), out)
		}
		return ans, nil
	}
	return nil, fmt.Errorf("%s: still needs state", fn.Name())
}

// sameValue compares state values as JSON values (member order aside).
func sameValue(a, b json.RawMessage) bool {
	ok, err := SameJSON(a, b)
	return err == nil && ok
}

// replay runs c on one engine and compares every decision and state value with want.
func replay(t *testing.T, name string, newCaller func([]byte) (caller, error), c xsCase, want xsResult) (steps int) {
	t.Helper()
	cfg, _ := json.Marshal(map[string]any{"version": 1, "workflows": []any{c.Workflow}})
	call, err := newCaller(cfg)
	if err != nil {
		t.Fatalf("%s: configuration refused: %v\n%s", name, err, cfg)
	}
	store := map[string]json.RawMessage{}
	prev := want.Initial
	if len(c.Calls) > 0 {
		// The initial state value, from a refusal's details or a transition's from.
		if v := engineInitial(call, c); v != nil && !sameValue(v, prev) {
			t.Fatalf("%s: engine starts in %s, xstate in %s\nconfig: %s", name, v, prev, cfg)
		}
	}
	for i, cl := range c.Calls {
		var ws xsStep
		if err := json.Unmarshal(want.Steps[i], &ws); err != nil {
			t.Fatal(err)
		}
		fail := func(format string, args ...any) {
			t.Fatalf("%s: call %d (%s, success %v, arguments %v, result %v): %s\nconfig: %s", name, i, cl.Tool, cl.Success, cl.Arguments, cl.Result, fmt.Sprintf(format, args...), cfg)
		}
		in := map[string]any{"tool": cl.Tool, "session": "s1"}
		if cl.Arguments != nil {
			in["arguments"] = cl.Arguments
		}
		ans, err := drive(call, abi.FuncCheckLimits, in, store)
		if err != nil {
			fail("%v", err)
		}
		allowed := string(ans["allow"]) == "true"
		if allowed != ws.Allowed {
			fail("engine allows %v, xstate %v (state %s)", allowed, ws.Allowed, prev)
		}
		if allowed {
			in := map[string]any{"tool": cl.Tool, "session": "s1", "isError": !cl.Success}
			if cl.Arguments != nil {
				in["arguments"] = cl.Arguments
			}
			if cl.Result != nil {
				in["result"] = cl.Result
			}
			ans, err := drive(call, abi.FuncTransition, in, store)
			if err != nil {
				fail("%v", err)
			}
			var events []struct {
				From, To json.RawMessage
			}
			json.Unmarshal(ans["events"], &events)
			if len(events) == 1 {
				if !sameValue(events[0].From, prev) {
					fail("engine moves from %s, xstate was in %s", events[0].From, prev)
				}
				if !sameValue(events[0].To, ws.Value) {
					fail("engine moves to %s, xstate to %s", events[0].To, ws.Value)
				}
			} else if cl.Success && c.Workflow["tools"].(map[string]any)[cl.Tool].(map[string]any)["event"] != nil {
				fail("engine reports %d events", len(events))
			}
			var writes map[string]json.RawMessage
			json.Unmarshal(ans["states"], &writes)
			for k, v := range writes {
				store[k] = v
				var snap struct{ State json.RawMessage }
				json.Unmarshal(v, &snap)
				if !sameValue(snap.State, ws.Value) {
					fail("engine stores %s, xstate is in %s", snap.State, ws.Value)
				}
			}
		} else if !sameValue(prev, ws.Value) {
			fail("xstate moved on a refused call")
		}
		prev = ws.Value
		steps++
	}
	return steps
}

// TestXState_differential draws random statecharts and random calls, runs them through
// the real xstate package (5.33.x) and through every engine (the built module included),
// and requires the same decision on every call and the same state value after it.
// STATEGATE_XSTATE_CHARTS and STATEGATE_XSTATE_SEED draw more, or other, charts.
func TestXState_differential(t *testing.T) {
	charts, calls := 300, 40
	if testing.Short() {
		charts = 40
	}
	if s := os.Getenv("STATEGATE_XSTATE_CHARTS"); s != "" {
		charts, _ = strconv.Atoi(s)
	}
	seed := int64(30)
	if s := os.Getenv("STATEGATE_XSTATE_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	g := &chartGen{rng: rand.New(rand.NewSource(seed))}
	cases := make([]xsCase, charts)
	for i := range cases {
		c := xsCase{Workflow: g.workflow(i)}
		tools := []string{}
		for name := range c.Workflow["tools"].(map[string]any) {
			tools = append(tools, name)
		}
		sortStrings(tools)
		for k := 0; k < calls; k++ {
			tool := tools[g.rng.Intn(len(tools))]
			if g.rng.Intn(2) == 0 && strings.HasPrefix(tools[0], "any_") {
				tool = tools[g.rng.Intn(len(tools))]
				for !strings.HasPrefix(tool, "any_") {
					tool = tools[g.rng.Intn(len(tools))]
				}
			}
			cl := xsCall{Tool: tool, Success: g.rng.Intn(8) != 0}
			if g.rng.Intn(6) != 0 {
				cl.Arguments = g.object()
			}
			if g.rng.Intn(3) != 0 {
				cl.Result = g.object()
			}
			c.Calls = append(c.Calls, cl)
		}
		cases[i] = c
	}
	want := runXState(t, cases)
	if want == nil {
		return
	}
	ctx := context.Background()
	looping := 0
	for i := range want {
		if strings.HasPrefix(want[i].Error, "Infinite loop detected") {
			looping++
		} else if want[i].Error != "" {
			t.Fatalf("xstate refused case %d: %s", i, want[i].Error)
		}
	}
	t.Logf("%d of %d charts loop forever in XState on some call: left out", looping, len(cases))
	for name, newCaller := range chartEngines(t, ctx) {
		steps, moved := 0, 0
		for i, c := range cases {
			if want[i].Error != "" {
				continue
			}
			steps += replay(t, name+"/chart"+strconv.Itoa(i), newCaller, c, want[i])
			prev := want[i].Initial
			for _, s := range want[i].Steps {
				var ws xsStep
				json.Unmarshal(s, &ws)
				if !sameValue(prev, ws.Value) {
					moved++
				}
				prev = ws.Value
			}
		}
		t.Logf("%s: %d charts, %d calls, %d state changes agree with xstate", name, len(cases), steps, moved)
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// TestXState_named runs named call sequences on abi/testdata/config/statechart.json
// through xstate and every engine, each a behaviour the statechart language promises.
func TestXState_named(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(vectorsDir, "config", "statechart.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Workflows []map[string]any `json:"workflows"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	call := func(tool string, args, result map[string]any) xsCall {
		return xsCall{Tool: tool, Success: true, Arguments: args, Result: result}
	}
	ok := map[string]any{"status": "ok"}
	toFulfilment := []xsCall{call("cart.checkout", nil, nil), call("order.verify", nil, ok), call("order.fulfil", nil, nil)}
	// end is the state value after the calls, and allowed how many of them the gate let run.
	named := []struct {
		name    string
		calls   []xsCall
		end     string
		allowed int
	}{
		{"both regions must finish before onDone", append(append([]xsCall{}, toFulfilment...),
			call("order.ship", nil, nil), call("order.status", nil, nil), call("order.invoice", nil, nil), call("order.status", nil, nil)),
			`"closed"`, 6},
		{"a guarded array picks its branch by argument", []xsCall{call("cart.checkout", nil, nil),
			call("cart.refund", map[string]any{"amount": 500}, nil), call("cart.refund", map[string]any{"amount": "50"}, nil),
			call("cart.refund", map[string]any{"amount": 100}, nil)},
			`"refunded"`, 4},
		{"a result guard", []xsCall{call("cart.checkout", nil, nil), call("order.verify", nil, map[string]any{"status": "bad"}),
			call("order.retry_check", nil, nil), call("order.verify", nil, nil), call("order.retry_check", nil, nil),
			call("order.verify", nil, ok), call("order.fulfil", nil, nil)},
			`{"fulfilment":{"shipping":"packing","invoicing":"draft"}}`, 7},
		{"a parent path allows any child", append(append([]xsCall{}, toFulfilment...),
			call("order.invoice", nil, nil), call("order.status", nil, nil), call("order.pack", nil, nil), call("order.status", nil, nil),
			call("order.skip_invoice", nil, nil), call("order.status", nil, nil), call("order.expedite", nil, nil), call("order.status", nil, nil)),
			`"closed"`, 10},
		{"events bubble and self-targets restart", []xsCall{call("cart.checkout", nil, nil), call("cart.request_approval", nil, nil),
			call("cart.approve", nil, nil), call("cart.restart_approval", nil, nil), call("cart.approve", nil, nil),
			call("cart.cancel_approval", nil, nil), call("cart.request_approval", nil, nil), call("cart.approve", nil, nil),
			call("cart.refund", map[string]any{"amount": 1000}, nil), call("cart.checkout", nil, nil)},
			`"refunded"`, 9},
	}
	cases := make([]xsCase, len(named))
	for i, n := range named {
		cases[i] = xsCase{Workflow: doc.Workflows[0], Calls: n.calls}
	}
	want := runXState(t, cases)
	if want == nil {
		return
	}
	for i, n := range named {
		allowed := 0
		var last xsStep
		for _, s := range want[i].Steps {
			json.Unmarshal(s, &last)
			if last.Allowed {
				allowed++
			}
		}
		if want[i].Error != "" || !sameValue(last.Value, json.RawMessage(n.end)) || allowed != n.allowed {
			t.Fatalf("%s: xstate ends in %s with %d calls allowed (error %q), want %s and %d", n.name, last.Value, allowed, want[i].Error, n.end, n.allowed)
		}
	}
	for name, newCaller := range chartEngines(t, context.Background()) {
		for i, n := range named {
			replay(t, name+"/"+n.name, newCaller, cases[i], want[i])
		}
	}
}

// engineInitial reads the state value an engine starts in: the "from" of a transition of
// the first tool with an event, run on an empty store and thrown away (nil when no tool
// has an event).
func engineInitial(call caller, c xsCase) json.RawMessage {
	tools := c.Workflow["tools"].(map[string]any)
	for name, b := range tools {
		if b.(map[string]any)["event"] == nil {
			continue
		}
		ans, err := drive(call, abi.FuncTransition, map[string]any{"tool": name, "session": "s1"}, map[string]json.RawMessage{})
		if err != nil {
			return nil
		}
		var events []struct{ From json.RawMessage }
		json.Unmarshal(ans["events"], &events)
		if len(events) == 1 {
			return events[0].From
		}
	}
	return nil
}
