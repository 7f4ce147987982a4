package exchange

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/exchange/tasks"
	"github.com/stategate/stategate/plugin/engine"
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
	out, before := ex.Answer().RewriteJSON(ctx, []byte(answer))
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
				out, _ := ex.Answer().RewriteJSON(ctx, []byte(answer))
				if i == 0 && !strings.Contains(string(out), `"text":"added"`) {
					t.Errorf("round %d: tasks/result lost its result: %s", round, out)
				}
				ex.Close()
			}()
		}
		wg.Wait()
		if got := c.Stats.Get(stats.CountTasksSettled); got != 1 {
			t.Fatalf("round %d: settled %d times, want once", round, got)
		}
		if got := c.Stats.Get(stats.CountTransitions); got != 1 {
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
	ex.Answer().RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":`+taskCreate+`}`))
	ex.Close()
	for i, res := range []string{`{"content":[{"type":"text","text":"ok"}]}`, `{"content":[{"type":"text","text":"ok"}]}`, `{"content":[],"isError":true}`} {
		ex := c.Admit(ctx, headers("s1"), []byte(`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"T"}}`))
		out, _ := ex.Answer().RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":2,"result":`+res+`}`))
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
			out, before := ex.Answer().RewriteJSON(ctx, []byte(end.answer))
			ex.Close()
			if gjson.GetBytes(out, "result.status").Str != gjson.Get(end.answer, "result.status").Str ||
				strings.Contains(string(out), "System:") || len(before) != 0 {
				t.Fatalf("answer: %s %q", out, before)
			}
			if got := stateOf(t, st); got != "empty" || c.Stats.Get(stats.CountTransitions) != 0 {
				t.Fatalf("a task that ended %s moved the workflow to %s", end.name, got)
			}
			if st.leased() {
				t.Fatal("the lease outlived the settlement")
			}
			if got := c.Stats.Get(stats.CountTasksSettled); got != 1 {
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
	c.facts.LeaseTTL = 300 * time.Millisecond
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
	if err := json.Unmarshal(ex.Body, &msg); err != nil || msg.ID != 7 || msg.Error.Code != tasks.CodeToolRefused ||
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

// TestTask_settledFromAnotherSession: the task's record is keyed by what owns the task
// across sessions (the principal, here none, and the task id): a client that reconnected
// and reads the task's end from its new session moves the workflow, once, and frees the
// lease, so the once-only step is not admitted again (issue 38: it ran twice once the lease
// lapsed).
func TestTask_settledFromAnotherSession(t *testing.T) {
	c, st := newHookCore(t, 50*time.Millisecond)
	startTask(t, c)
	ctx := context.Background()
	ex := c.Admit(ctx, headers("s2"), []byte(`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"T"}}`))
	out, _ := ex.Answer().RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"added"}]}}`))
	ex.Close()
	if c.Stats.Get(stats.CountTasksSettled) != 1 || stateOf(t, st) != "has_items" {
		t.Fatalf("the task's end read from another session settled %d times, state %s", c.Stats.Get(stats.CountTasksSettled), stateOf(t, st))
	}
	if !strings.Contains(string(out), "durationMs") {
		t.Fatalf("the result read from another session is not decorated: %s", out)
	}
	if st.leased() {
		t.Fatal("the lease outlived the settlement")
	}
	c.Observe(ctx, headers("s3"), []byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"T","status":"completed"}}`))
	if c.Stats.Get(stats.CountTasksSettled) != 1 || c.Stats.Get(stats.CountTransitions) != 1 {
		t.Fatalf("settled %d times, %d transitions: want once", c.Stats.Get(stats.CountTasksSettled), c.Stats.Get(stats.CountTransitions))
	}
}

// principalHookConfig is hookConfig with a principal header.
var principalHookConfig = strings.Replace(hookConfig, `{"version":1,`, `{"version":1,"principal":{"header":"X-Auth-Subject"},`, 1)

func as(session, principal string) http.Header {
	h := headers(session)
	h.Set("X-Auth-Subject", principal)
	return h
}

// TestTask_otherPrincipalsCannotSettle: with a principal header, another principal naming
// the task id, from any session, settles and reads nothing (its answer passes undecorated);
// the task's principal does, from another session.
func TestTask_otherPrincipalsCannotSettle(t *testing.T) {
	e, err := engine.New([]byte(principalHookConfig))
	if err != nil {
		t.Fatal(err)
	}
	st := newTestState(true)
	c := New(Options{Plugin: enginePlugin{e}, State: st, Config: []byte(principalHookConfig), LeaseWait: 50 * time.Millisecond})
	ctx := context.Background()
	ex := c.Admit(ctx, as("s1", "alice"), []byte(taskCall))
	ex.Answer().RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":`+taskCreate+`}`))
	ex.Close()
	result := []byte(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"added"}]}}`)
	for _, s := range []string{"s1", "s2"} {
		ex := c.Admit(ctx, as(s, "bob"), []byte(`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"T"}}`))
		if out, _ := ex.Answer().RewriteJSON(ctx, append([]byte(nil), result...)); string(out) != string(result) {
			t.Fatalf("bob's answer was decorated with alice's task: %s", out)
		}
		ex.Close()
		c.Observe(ctx, as(s, "bob"), []byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"T","status":"completed"}}`))
	}
	if n := c.Stats.Get(stats.CountTasksSettled); n != 0 {
		t.Fatalf("another principal settled alice's task (%d)", n)
	}
	c.Observe(ctx, as("s2", "alice"), []byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"T","status":"completed"}}`))
	if n := c.Stats.Get(stats.CountTasksSettled); n != 1 {
		t.Fatalf("alice's task read from her new session settled %d times, want once", n)
	}
}

// TestTask_reusedIDStaysWithItsSession: an upstream that gives the same task id again in
// one principal's scope (a stdio child per session counting from 1) gets the second record
// kept with its session: each session's end settles its own task, once each.
func TestTask_reusedIDStaysWithItsSession(t *testing.T) {
	c, _ := newHookCore(t, 50*time.Millisecond)
	ctx := context.Background()
	for _, s := range []string{"s1", "s2"} {
		ex := c.Admit(ctx, headers(s), []byte(taskCall))
		ex.Answer().RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":`+taskCreate+`}`))
		ex.Close()
	}
	for i, s := range []string{"s2", "s1", "s2"} {
		c.Observe(ctx, headers(s), []byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"T","status":"completed"}}`))
		if n, want := c.Stats.Get(stats.CountTasksSettled), int64(min(i+1, 2)); n != want {
			t.Fatalf("after %d ends: settled %d times, want %d", i+1, n, want)
		}
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
		if out, _ := ex.Answer().RewriteJSON(ctx, []byte(answer)); json.Valid([]byte(answer)) && !json.Valid(out) {
			t.Fatalf("a JSON answer became invalid: %s", out)
		}
		ex.Close()
		methods := []string{MethodTasksGet, MethodTasksResult, MethodTasksCancel}
		for i := range 2 {
			m := methods[(int(method)+i)%len(methods)]
			req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"taskId":"T"}}`, i+2, m)
			ex := c.Admit(ctx, headers("s1"), []byte(req))
			answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":%s}`, i+2, later)
			if out, _ := ex.Answer().RewriteJSON(ctx, []byte(answer)); json.Valid([]byte(answer)) && !json.Valid(out) {
				t.Fatalf("a JSON answer became invalid: %s", out)
			}
			ex.Close()
			c.Observe(ctx, headers("s1"), []byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":`+later+`}`))
		}
		if n := c.Stats.Get(stats.CountTransitions); n > 1 {
			t.Fatalf("the workflow moved %d times", n)
		}
	})
}

// onceConfig: a handle-keyed workflow with a principal whose one step, cart.pay, is
// once-only (paid is final).
const onceConfig = `{"version":1,"principal":{"header":"X-Auth-Subject"},
 "workflows":[{"id":"order","initial":"open","key":"argument:cart_id",
   "states":{"open":{"on":{"PAY":"paid"}},"paid":{"type":"final"}},
   "tools":{"cart.pay":{"states":["open"],"event":"PAY"}}}]}`

// FuzzTaskRecords: alice starts the once-only cart.pay as a task; then any order of
// reconnecting (a new session), polls that show the task working, completed, failed or
// cancelled (tasks/get, tasks/result, tasks/cancel, the status notification), the lease
// lapsing, and plain retries of cart.pay, by alice or by bob (another principal, with the
// same cart id). Once the gateway has learnt that alice's payment happened (the task's
// first end was a completion, or a retry ran), no retry of hers is admitted: the step runs
// once. Bob settles nothing of alice's, and a task settles at most once.
func FuzzTaskRecords(f *testing.F) {
	f.Add([]byte{0, 3, 6, 7})             // issue 38: reconnect, tasks/result, lapse, retry
	f.Add([]byte{0, 0x83, 0x87, 6, 7, 2}) // bob reads the task, and retries his own cart
	f.Add([]byte{1, 0, 4, 6, 7, 7})       // cancelled first: a retry may run, once
	f.Add([]byte{6, 7, 0, 5, 7})          // the lease lapses before the end: a retry runs
	f.Add([]byte{0, 8, 3, 6, 7})          // failed, then a late success: no move
	e, err := engine.New([]byte(onceConfig))
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		st := newTestState(true)
		c := New(Options{Plugin: enginePlugin{e}, State: st, Config: []byte(onceConfig), LeaseWait: time.Millisecond})
		const pay = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.pay","arguments":{"cart_id":"c1"}}}`
		ex := c.Admit(ctx, as("a0", "alice"), []byte(strings.Replace(pay, `}}}`, `},"task":{"ttl":60000}}}`, 1)))
		if ex.Verdict != Forward {
			t.Fatalf("the task call was not admitted: %s", ex.Body)
		}
		ex.Answer().RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":`+taskCreate+`}`))
		ex.Close()
		sessions := map[string]int{"alice": 0, "bob": 0}
		ended, paid := false, map[string]bool{}
		for i, b := range ops {
			who := "alice"
			if b&0x80 != 0 {
				who = "bob"
			}
			h := as(fmt.Sprintf("%s%d", who[:1], sessions[who]), who)
			settled := c.Stats.Get(stats.CountTasksSettled)
			end := "" // the end this op shows, if any
			switch op := b & 0x7f % 9; op {
			case 0:
				sessions[who]++
			case 1, 2, 4:
				method, status := MethodTasksGet, "working"
				if op == 2 {
					status, end = "completed", "completed"
				} else if op == 4 {
					method, status, end = MethodTasksCancel, "cancelled", "cancelled"
				}
				ex := c.Admit(ctx, h, []byte(`{"jsonrpc":"2.0","id":2,"method":"`+method+`","params":{"taskId":"T"}}`))
				ex.Answer().RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":2,"result":{"taskId":"T","status":"`+status+`"}}`))
				ex.Close()
			case 3, 8:
				res := `{"content":[{"type":"text","text":"paid"}]}`
				end = "completed"
				if op == 8 {
					res, end = `{"content":[{"type":"text","text":"declined"}],"isError":true}`, "failed"
				}
				ex := c.Admit(ctx, h, []byte(`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"T"}}`))
				ex.Answer().RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":2,"result":`+res+`}`))
				ex.Close()
			case 5:
				end = "completed"
				c.Observe(ctx, h, []byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"T","status":"completed"}}`))
			case 6:
				st.mu.Lock()
				for k := range st.leases {
					st.leases[k] = time.Time{} // the lease lapses
				}
				st.mu.Unlock()
			case 7:
				ex := c.Admit(ctx, h, []byte(pay))
				if ex.Verdict == Forward {
					if paid[who] {
						t.Fatalf("op %d: %s's once-only cart.pay admitted again after it ran (ops %v)", i, who, ops)
					}
					ex.Answer().RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"paid"}]}}`))
					paid[who] = true
				}
				ex.Close()
			}
			got := c.Stats.Get(stats.CountTasksSettled)
			switch {
			case who == "bob" && got != settled:
				t.Fatalf("op %d: bob settled alice's task (ops %v)", i, ops)
			case got > 1:
				t.Fatalf("op %d: the task settled %d times (ops %v)", i, got, ops)
			case who == "alice" && end != "" && !ended:
				if got != 1 {
					t.Fatalf("op %d: alice's task ended (%s) and the gateway did not settle it (ops %v)", i, end, ops)
				}
				ended = true
				paid["alice"] = paid["alice"] || end == "completed"
			}
		}
	})
}
