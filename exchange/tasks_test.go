package exchange

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/tidwall/gjson"
)

// Unit tests of MCP tasks in the core, with the native engine and an in-memory State with
// leases (hookConfig: the checkout workflow, per session).

const (
	taskCreate = `{"task":{"taskId":"T","status":"working","createdAt":"2026-11-25T10:00:00Z","ttl":60000}}`
	taskCall   = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"a"},"task":{"ttl":60000}}}`
)

// startTask admits a task-augmented cart.add_item in session s1 and answers it with a
// CreateTaskResult; the exchange is closed as a host would close it.
func startTask(t *testing.T, c *Core) {
	t.Helper()
	ctx := context.Background()
	ex := c.Admit(ctx, headers("s1"), []byte(taskCall))
	if ex.Verdict != Forward {
		t.Fatalf("task call not forwarded: %s", ex.Body)
	}
	answer := `{"jsonrpc":"2.0","id":1,"result":` + taskCreate + `}`
	out, before := ex.RewriteJSON(ctx, []byte(answer))
	if string(out) != answer || len(before) != 0 {
		t.Fatalf("the CreateTaskResult did not pass untouched: %s %q", out, before)
	}
	ex.Close()
}

// stateOf returns the checkout workflow's state in session s1.
func stateOf(t *testing.T, st *testState) string {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	for k, v := range st.vals {
		if strings.HasPrefix(k, "stategate/v1/checkout/session/") {
			return gjson.GetBytes(v, "state").Str
		}
	}
	return "empty"
}

// TestTask_settledOnceWhateverSeesItFirst: tasks/result, tasks/get and the status
// notification racing to report the same completed task move the workflow exactly once,
// and the lease the task kept is released by that settlement.
func TestTask_settledOnceWhateverSeesItFirst(t *testing.T) {
	for round := range 20 {
		c, st := newHookCore(t, 50*time.Millisecond)
		startTask(t, c)
		if got := stateOf(t, st); got != "empty" {
			t.Fatalf("the workflow moved when the task was created: %s", got)
		}
		if !st.leased() {
			t.Fatal("the moving task's lease was not kept while it runs")
		}
		ctx := context.Background()
		var wg sync.WaitGroup
		for i, req := range []string{
			`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"T"}}`,
			`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"T"}}`,
			"",
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if req == "" {
					c.Observe(ctx, headers("s1"), []byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"T","status":"completed"}}`))
					return
				}
				ex := c.Admit(ctx, headers("s1"), []byte(req))
				id := gjson.Get(req, "id").Raw
				answer := `{"jsonrpc":"2.0","id":` + id + `,"result":{"taskId":"T","status":"completed"}}`
				if i == 0 {
					answer = `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"added"}]}}`
				}
				out, _ := ex.RewriteJSON(ctx, []byte(answer))
				if i == 0 && !strings.Contains(string(out), `"text":"added"`) {
					t.Errorf("round %d: tasks/result lost its result: %s", round, out)
				}
				ex.Close()
			}()
		}
		wg.Wait()
		if got := c.Stats.Get(CountTasksSettled); got != 1 {
			t.Fatalf("round %d: settled %d times, want once", round, got)
		}
		if got := c.Stats.Get(CountTransitions); got != 1 {
			t.Fatalf("round %d: %d snapshots stored, want one move", round, got)
		}
		if got := stateOf(t, st); got != "has_items" {
			t.Fatalf("round %d: state %s after the task completed", round, got)
		}
		if st.leased() {
			t.Fatalf("round %d: the lease outlived the settlement", round)
		}
	}
}

// TestTask_resultGetsTheBlock: the result fetched with tasks/result is decorated like a
// plain call's, every time it is fetched, and only a successful one gets the block.
func TestTask_resultGetsTheBlock(t *testing.T) {
	c, _ := newHookCore(t, 50*time.Millisecond)
	ctx := context.Background()
	ex := c.Admit(ctx, headers("s1"), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tasks.update","arguments":{},"task":{}}}`))
	ex.RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":`+taskCreate+`}`))
	ex.Close()
	for i, res := range []string{`{"content":[{"type":"text","text":"ok"}]}`, `{"content":[{"type":"text","text":"ok"}]}`, `{"content":[],"isError":true}`} {
		ex := c.Admit(ctx, headers("s1"), []byte(`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"T"}}`))
		out, _ := ex.RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":2,"result":`+res+`}`))
		ex.Close()
		block := gjson.GetBytes(out, "result.content.0.text").Str == "[System: Cache invalidated for tasks.* — caused by tasks.update]"
		if block != (i < 2) {
			t.Fatalf("fetch %d: block %v: %s", i, block, out)
		}
	}
}

// TestTask_endsWithoutMoving: failed, cancelled and isError ends settle the task without
// moving the workflow, and release its lease.
func TestTask_endsWithoutMoving(t *testing.T) {
	ctx := context.Background()
	for _, end := range []struct{ name, req, answer string }{
		{"failed", `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"T"}}`, `{"jsonrpc":"2.0","id":2,"result":{"taskId":"T","status":"failed"}}`},
		{"cancelled", `{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{"taskId":"T"}}`, `{"jsonrpc":"2.0","id":2,"result":{"taskId":"T","status":"cancelled"}}`},
		{"isError", `{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"T"}}`, `{"jsonrpc":"2.0","id":2,"result":{"content":[],"isError":true}}`},
	} {
		t.Run(end.name, func(t *testing.T) {
			c, st := newHookCore(t, 50*time.Millisecond)
			startTask(t, c)
			ex := c.Admit(ctx, headers("s1"), []byte(end.req))
			if ex.Verdict != Forward {
				t.Fatalf("%s not forwarded", end.req)
			}
			out, before := ex.RewriteJSON(ctx, []byte(end.answer))
			ex.Close()
			if gjson.GetBytes(out, "result.status").Str != gjson.Get(end.answer, "result.status").Str ||
				strings.Contains(string(out), "System:") || len(before) != 0 {
				t.Fatalf("answer: %s %q", out, before)
			}
			if got := stateOf(t, st); got != "empty" || c.Stats.Get(CountTransitions) != 0 {
				t.Fatalf("a task that ended %s moved the workflow to %s", end.name, got)
			}
			if st.leased() {
				t.Fatal("the lease outlived the settlement")
			}
			if got := c.Stats.Get(CountTasksSettled); got != 1 {
				t.Fatalf("settled %d times", got)
			}
		})
	}
}

// TestTask_secondRunRefusedWhileLeased: while a moving task runs (its lease kept), a second
// task-augmented call of the step waits and is refused busy, as a JSON-RPC error; once the
// lease's lifetime passes with the task still running, the task_lease fault is reported and
// the lease let go.
func TestTask_secondRunRefusedWhileLeased(t *testing.T) {
	c, st := newHookCore(t, 30*time.Millisecond)
	c.facts.leaseTTL = 300 * time.Millisecond
	startTask(t, c)
	ex := c.Admit(context.Background(), headers("s1"), []byte(strings.Replace(taskCall, `"id":1`, `"id":7`, 1)))
	if ex.Verdict != Reply {
		t.Fatalf("a second run of a leased step was forwarded")
	}
	var msg struct {
		ID    int `json:"id"`
		Error struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(ex.Body, &msg); err != nil || msg.ID != 7 || msg.Error.Code != CodeToolRefused ||
		msg.Error.Message != abi.GateBusyText || !strings.Contains(string(msg.Error.Data), abi.DenyGateUnavailable) {
		t.Fatalf("refusal of a task call: %s (%v)", ex.Body, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats.Faults(abi.FaultTaskLease) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if c.Stats.Faults(abi.FaultTaskLease) != 1 || st.leased() {
		t.Fatalf("task_lease faults %d, leased %v after the lease's lifetime", c.Stats.Faults(abi.FaultTaskLease), st.leased())
	}
}

// TestTask_otherSessionsCannotSettle: a task id named from another session settles nothing
// (the record is keyed by session, principal and id).
func TestTask_otherSessionsCannotSettle(t *testing.T) {
	c, st := newHookCore(t, 50*time.Millisecond)
	startTask(t, c)
	ctx := context.Background()
	ex := c.Admit(ctx, headers("s2"), []byte(`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"T"}}`))
	ex.RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":2,"result":{"taskId":"T","status":"completed"}}`))
	ex.Close()
	c.Observe(ctx, headers("s3"), []byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"T","status":"completed"}}`))
	if c.Stats.Get(CountTasksSettled) != 0 || stateOf(t, st) != "empty" {
		t.Fatalf("another session settled s1's task")
	}
}

// FuzzTaskAnswers: whatever the upstream answers to a task call and to the tasks/* requests
// after it, rewriting never panics, a JSON answer stays JSON, and the workflow moves at most
// once.
func FuzzTaskAnswers(f *testing.F) {
	for _, s := range [][2]string{
		{taskCreate, `{"taskId":"T","status":"completed"}`},
		{taskCreate, `{"content":[{"type":"text","text":"x"}]}`},
		{`{"resultType":"task","taskId":"T","status":"working"}`, `{"taskId":"T","status":"completed","result":{"content":[]}}`},
		{`{"task":{"taskId":7}}`, `{"taskId":"T","status":"failed","result":[]}`},
		{`{"task":"T","resultType":"task","taskId":""}`, `{"status":"completed","result":{"isError":true}}`},
	} {
		f.Add(s[0], s[1], uint8(0))
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, created, later string, method uint8) {
		c, _ := newHookCore(t, time.Millisecond)
		ex := c.Admit(ctx, headers("s1"), []byte(taskCall))
		answer := `{"jsonrpc":"2.0","id":1,"result":` + created + `}`
		if out, _ := ex.RewriteJSON(ctx, []byte(answer)); json.Valid([]byte(answer)) && !json.Valid(out) {
			t.Fatalf("a JSON answer became invalid: %s", out)
		}
		ex.Close()
		methods := []string{MethodTasksGet, MethodTasksResult, MethodTasksCancel}
		for i := range 2 {
			m := methods[(int(method)+i)%len(methods)]
			req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"taskId":"T"}}`, i+2, m)
			ex := c.Admit(ctx, headers("s1"), []byte(req))
			answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":%s}`, i+2, later)
			if out, _ := ex.RewriteJSON(ctx, []byte(answer)); json.Valid([]byte(answer)) && !json.Valid(out) {
				t.Fatalf("a JSON answer became invalid: %s", out)
			}
			ex.Close()
			c.Observe(ctx, headers("s1"), []byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":`+later+`}`))
		}
		if n := c.Stats.Get(CountTransitions); n > 1 {
			t.Fatalf("the workflow moved %d times", n)
		}
	})
}
