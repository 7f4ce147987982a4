// Package tasks is what the exchange keeps of MCP tasks (2025-11-25, experimental; the
// io.modelcontextprotocol/tasks extension in 2026-07-28): where a task's record lives in
// the state (Key, SessionKey), the record itself (Record), how a task's id and end are read
// (ID, Terminal), the JSON-RPC error a refused task-augmented call gets (Refusal), and the
// leases of moving calls held while their task runs (Leases). The
// way a task-augmented call is gated and settled is the exchange's (exchange/tasks.go).
// Standard Go, no I/O.
package tasks

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// CodeToolRefused is the JSON-RPC error code of a task-augmented tools/call the gateway
// refused (outside its workflow states, limits, tool health, the gate unavailable): in
// JSON-RPC's implementation-defined server range, below the -32020..-32099 MCP reserves.
const CodeToolRefused = -32010

// Refusal turns a refusal result (the engine's isError CallToolResult) into the JSON-RPC
// error a task-augmented call (request id, raw JSON) gets: the message is the result's
// text, the data its dev.stategate/error.
func Refusal(result, id []byte) []byte {
	res := gjson.ParseBytes(result)
	var text []string
	res.Get("content").ForEach(func(_, b gjson.Result) bool {
		if b.Get("type").Str == "text" {
			text = append(text, b.Get("text").Str)
		}
		return true
	})
	msg := strings.Join(text, "\n")
	if msg == "" {
		msg = "the gateway refused this call"
	}
	out := jsonrpc.AppendError(nil, id, CodeToolRefused, msg)
	if e := res.Get("_meta." + gjson.Escape(abi.MetaError)); e.IsObject() {
		data := jsonx.AppendString([]byte{'{'}, abi.MetaError)
		data = append(data, ':')
		data = append(data, e.Raw...)
		data = append(data, '}')
		out, _ = answer.Set(out, data, "error", "data")
	}
	return out
}

// KeyPrefix is where task records live in the state (outside stategate/v1/: no lease, no
// workflow snapshot).
const KeyPrefix = "stategate/tasks/v1/"

// MaxLeases bounds the leases held for running tasks in one core.
const MaxLeases = 10000

// Key is the record of task id for a principal: what owns a task across sessions. The
// spec lets a client poll a task from any session (a client that reconnected reads
// tasks/result from its new one), so a record keyed by the session missed the task's end
// there, and once the lease lapsed the same once-only step was admitted and ran again. The
// principal scopes it (another principal computes another key: it can neither settle nor
// read the record); without a principal header every client shares the scope, as they
// share handle-keyed state. The digest keeps the caller's names out of the key.
func Key(principal, id string) string {
	return digest("principal", principal, id)
}

// SessionKey is where a task's record goes when its principal's key is taken (an
// upstream that reuses a task id within one principal's scope, such as a stdio child per
// session counting from 1), and where records written before issue 38 are: a session's
// own, read first in that session.
func SessionKey(session, principal, id string) string {
	return digest(session, principal, id)
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return KeyPrefix + hex.EncodeToString(h.Sum(nil)[:16])
}

// ID returns the id of the task a CreateTaskResult (result) created: result.task.taskId
// (2025-11-25) or, under resultType "task", result.taskId (2026-07-28); "" for any other
// result.
func ID(result gjson.Result) string {
	if !result.IsObject() {
		return ""
	}
	if t := result.Get("task.taskId"); t.Type == gjson.String && result.Get("task").IsObject() {
		return t.Str
	}
	if result.Get("resultType").Str == "task" {
		if t := result.Get("taskId"); t.Type == gjson.String {
			return t.Str
		}
	}
	return ""
}

// Terminal reports whether status ends a task, and whether the end is a completion.
func Terminal(status string) (ended, completed bool) {
	switch status {
	case "completed":
		return true, true
	case "failed", "cancelled", "unknown":
		return true, false
	}
	return false, false
}

// Record is what settling a task needs, as stored: the tool, the engine input of the call,
// whether the call moves a workflow and purges the cache, and whether the task was
// settled.
type Record struct {
	Tool   string
	Input  string // the engine input of the call (an object)
	Moves  bool
	Purges bool
	Done   bool
}

// ParseRecord reads a stored record; false when v is not one.
func ParseRecord(v []byte) (Record, bool) {
	r := gjson.ParseBytes(v)
	if !gjson.ValidBytes(v) || !r.IsObject() || r.Get("tool").Type != gjson.String || !r.Get("input").IsObject() {
		return Record{}, false
	}
	return Record{Tool: r.Get("tool").Str, Input: r.Get("input").Raw, Moves: r.Get("moves").Bool(),
		Purges: r.Get("purges").Bool(), Done: r.Get("done").Bool()}, true
}

// Encode is the record as stored.
func (r Record) Encode() []byte {
	b := append([]byte(`{"tool":`), jsonx.AppendString(nil, r.Tool)...)
	b = append(b, `,"input":`...)
	b = append(b, r.Input...)
	for _, f := range []struct {
		name string
		on   bool
	}{{"moves", r.Moves}, {"purges", r.Purges}, {"done", r.Done}} {
		if f.on {
			b = append(b, `,"`+f.name+`":true`...)
		}
	}
	return append(b, '}')
}

// Lease is a moving call's lease on its workflow keys (exchange.Lease).
type Lease interface{ Release() }

// Leases keeps the leases of moving calls whose task is running, until the task ends or
// the lease's lifetime passes (then onLapse reports it). The zero value is ready.
type Leases struct {
	mu sync.Mutex
	m  map[string]*heldLease
}

type heldLease struct {
	lease   Lease
	timer   stopper
	due     time.Time // when the lease lapses (swept by it where timers never fire)
	onLapse func()
}

// Hold keeps lease for the task whose record is key, for ttl at most; onLapse runs when
// it lapses first (or at once, when MaxLeases are held: the task then runs unleased).
func (t *Leases) Hold(key string, lease Lease, ttl time.Duration, onLapse func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*heldLease{}
	}
	if !timersFire {
		t.sweep(time.Now())
	}
	if len(t.m) >= MaxLeases {
		lease.Release() // no room: the task runs unleased, reported as a lapse
		spawn(onLapse)
		return
	}
	h := &heldLease{lease: lease, due: time.Now().Add(ttl), onLapse: onLapse}
	h.timer = afterFunc(ttl, func() {
		t.mu.Lock()
		cur := t.m[key]
		if cur == h {
			delete(t.m, key)
		}
		t.mu.Unlock()
		if cur == h {
			h.lease.Release()
			onLapse()
		}
	})
	t.m[key] = h
}

// sweep drops the leases whose time passed, as their timers would have (t.mu held).
func (t *Leases) sweep(now time.Time) {
	for k, h := range t.m {
		if now.After(h.due) {
			delete(t.m, k)
			h.lease.Release()
			h.onLapse()
		}
	}
}

// Take hands over the lease held for key (nil when none is held any more).
func (t *Leases) Take(key string) Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.m[key]
	if h == nil {
		return nil
	}
	delete(t.m, key)
	h.timer.Stop()
	return h.lease
}
