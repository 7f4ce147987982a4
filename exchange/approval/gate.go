package approval

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/state"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Gate decides a tools/call that check_limits admitted with an approval: ask for the yes,
// let the call through on a valid one, or refuse it. It keeps the gateway's keys (loaded
// from the store once, created there once by whichever replica comes first) and claims
// each yes in the store before it lets a call through, so a yes is used once on every
// replica.
//
// # Notes
//
//   - A 2026-07-28 client is asked with an input_required result and a signed
//     requestState. A 2025-11-25 client is asked by an elicitation/create request on the
//     call's response stream (elicit.go) when its host can hold the call (Call.Asker) and
//     the client declared it can answer a form; otherwise it is refused with a message
//     that says a person must approve the call. An operator's approval is held by a host
//     that can hold a request (exchange/hold.go over Hold), and refused here on one that
//     cannot: the call never reaches the server without a yes.
//   - Everything that comes back from the client is hostile input: Open verifies the MAC
//     before it reads anything but the key id, Match compares every binding.
type Gate struct {
	// Get reads a key of the store (ok false when absent).
	Get func(ctx context.Context, key string) (value []byte, ok bool, err error)
	// Create stores value under key only if the key is absent: false when it was not.
	Create func(ctx context.Context, key string, value []byte) (created bool, err error)
	// Random fills b with random bytes.
	Random func(b []byte) error

	mu   sync.Mutex
	keys []Key
}

// Need is what check_limits answered for a call that waits for a yes (its "approval").
type Need struct {
	By        string // "user" or "operator"
	Message   string
	TimeoutMs int64
}

// ReadNeed reads check_limits' approval member.
func ReadNeed(v gjson.Result) Need {
	return Need{By: v.Get("by").Str, Message: v.Get("message").Str, TimeoutMs: v.Get("timeoutMs").Int()}
}

// Call is the call a yes must be bound to, as admission read it.
type Call struct {
	Tool      string
	Args      []byte // the raw arguments (nil: none)
	Principal string
	Scope     string // ScopeOf the caller's credential headers
	Workflow  string // WorkflowOf the workflow keys read at admission
	// Modern: the client speaks 2026-07-28 (input_required and requestState).
	Modern bool
	// Task: the call is task-augmented (a task cannot wait for a yes).
	Task bool
	// RequestState and InputResponses are the call's params members (a retry's).
	RequestState, InputResponses gjson.Result
	Now                          time.Time
	// Asker asks a 2025-11-25 client on the call's stream (elicit.go; nil: the host cannot
	// hold the call); Session is the call's Mcp-Session-Id and CallTimeout its own timeout
	// (the wait's bound). Held is the answer such a question got, handed by the host
	// (HeldFrom).
	Asker       Asker
	Session     string
	CallTimeout time.Duration
	Held        *Held
	JSONOnly    bool // the client takes no event stream: it cannot be asked on one
}

// Verdict is what to do with a call.
type Verdict uint8

const (
	Ask       Verdict = iota // answer Result (input_required) and forward nothing
	Pass                     // forward the call without the gateway's requestState and inputResponses
	Refuse                   // answer Result (an error result with Code) and forward nothing
	AskStream                // send Result (an elicitation/create request) on the call's stream, await the answer to ID for Wait
)

// Outcome is the gate's decision.
type Outcome struct {
	Verdict Verdict
	Result  []byte        // Ask: the input_required result; Refuse: the refusal result
	Code    string        // Refuse: the denial code
	Why     string        // Refuse: what was wrong, for the event and the log
	ID      string        // AskStream: the elicitation request's id
	Wait    time.Duration // AskStream: how long to wait for its answer
	// Pass of a 2026-07-28 call: Carried is the server's requestState to forward in place
	// of the gateway's (a continuation's; "": none), and Cont wraps the server's own in the
	// answer when the server asks too.
	Carried string
	Cont    *Continuation
}

// Continuation turns the requestState of a server that answers a call let through on a
// yes with input_required into the gateway's continuation (SealCont), bound as the yes was:
// the client's retry carries the yes on, once, and the server gets its state back.
type Continuation struct {
	g   *Gate
	k   *Key
	b   Bind
	ttl int64
}

// Wrap returns the continuation carrying the server's requestState s, "" when it cannot
// be made (s empty or over MaxCarried, no randomness): pass the server's answer untouched,
// and the retry is asked again.
func (c *Continuation) Wrap(s string, now time.Time) string {
	b := c.b
	if c.g.Random(b.Nonce[:]) != nil {
		return ""
	}
	b.Expiry = now.UnixMilli() + c.ttl
	return SealCont(c.k, &b, s)
}

// maxArgShown bounds the arguments the form shows, in bytes.
const maxArgShown = 2048

// Decide decides c, which needs the approval n.
func (g *Gate) Decide(ctx context.Context, n Need, c *Call) Outcome {
	switch {
	case n.By != "user":
		return refusal(c.Tool, abi.DenyApprovalRequired, "Tool "+c.Tool+" runs only after an operator approves the call, and this host cannot hold a call while an operator decides: it was not run. Call it through stategate serve or stategate stdio, where it waits for an operator's approve-call or the status page.", "operator approval")
	case c.Task:
		return refusal(c.Tool, abi.DenyApprovalRequired, "Tool "+c.Tool+" runs only after a person approves the call, which a task-augmented call cannot wait for: call it without a task to be asked.", "task-augmented")
	case !c.Modern && c.Asker == nil:
		return refusal(c.Tool, abi.DenyApprovalRequired, "Tool "+c.Tool+" runs only after a person approves the call. This gateway asks with the 2026-07-28 protocol's input_required result, which this client's protocol version cannot carry: it was not run.", "protocol version")
	}
	digest, ok := ArgsDigest(c.Args)
	if !ok {
		return refusal(c.Tool, abi.DenyApprovalInvalid, "Tool "+c.Tool+" runs only after a person approves the call, and its arguments cannot be shown as they would be sent (a repeated member or invalid text): it was not run.", "arguments without a canonical form")
	}
	keys, err := g.load(ctx)
	if err != nil {
		return refusal(c.Tool, abi.DenyGateUnavailable, "Tool "+c.Tool+" needs a person's approval, and the gateway could not read its approval key: it was not run. Try again shortly.", "key: "+err.Error())
	}
	bind := Bind{Tool: c.Tool, ArgsDigest: digest, Principal: c.Principal, Scope: c.Scope, Workflow: c.Workflow}
	if c.Asker != nil && !c.Modern {
		if c.Held != nil {
			return c.Asker.Settle(ctx, g, c, &bind, keys)
		}
		return c.Asker.Hold(ctx, g, n, c, &bind, keys)
	}
	s := c.RequestState
	cont := s.Type == gjson.String && strings.HasPrefix(s.Str, ContPrefix)
	if !cont && (s.Type != gjson.String || !strings.HasPrefix(s.Str, Prefix)) {
		return g.ask(n, c, &bind, keys)
	}
	const again = " Call it again without requestState to be asked."
	open, answer := Open, Answer(0)
	if cont {
		open, answer = OpenCont, Accept // the yes was given: the server asked since
	}
	st, err := open(keys, s.Str, c.Now.UnixMilli())
	if err == nil {
		err = st.Match(&bind)
	}
	if err != nil {
		return invalid(c, err, again)
	}
	if !cont {
		answer = ReadAnswer([]byte(c.InputResponses.Raw))
	}
	out := g.settle(ctx, c, st, answer, again)
	if out.Verdict == Pass {
		out.Carried, out.Cont = st.Carried, &Continuation{g: g, k: &keys[0], b: bind, ttl: ttl(n)}
	}
	return out
}

// ttl is how long a question (and a continuation) is good for, in ms.
func ttl(n Need) int64 {
	if n.TimeoutMs <= 0 {
		return 300_000
	}
	return n.TimeoutMs
}

// invalid refuses a call whose state err is wrong with: forged, expired, another call's.
func invalid(c *Call, err error, again string) Outcome {
	text := "The approval this call carries is not valid for it"
	switch {
	case errors.Is(err, ErrExpired):
		text = "The approval this call carries has expired"
	case errors.Is(err, ErrMismatch):
		text = "The approval this call carries was given for another call (" + err.Error() + ")"
	}
	return refusal(c.Tool, abi.DenyApprovalInvalid, text+": tool "+c.Tool+" was not run."+again, err.Error())
}

// settle decides a call by the answer its verified state st got: a yes is claimed once in
// the store and passes; anything else is refused.
func (g *Gate) settle(ctx context.Context, c *Call, st *State, answer Answer, again string) Outcome {
	switch answer {
	case Decline:
		return refusal(c.Tool, abi.DenyApprovalDeclined, "The person asked declined to approve this call: tool "+c.Tool+" was not run.", "declined")
	case Cancel:
		return refusal(c.Tool, abi.DenyApprovalCancelled, "The person asked dismissed the approval without deciding: tool "+c.Tool+" was not run.", "cancelled")
	case Accept:
	default:
		return refusal(c.Tool, abi.DenyApprovalInvalid, "The call carries no readable answer to the approval asked for: tool "+c.Tool+" was not run."+again, "no answer")
	}
	created, err := g.Create(ctx, UsedKey(st), []byte("1"))
	switch {
	case err != nil:
		return refusal(c.Tool, abi.DenyGateUnavailable, "The gateway could not record the approval as used: tool "+c.Tool+" was not run. Try again shortly.", "claim: "+err.Error())
	case !created:
		return refusal(c.Tool, abi.DenyApprovalInvalid, "The approval this call carries has been used already (an approval runs one call once): tool "+c.Tool+" was not run.", "replayed")
	}
	return Outcome{Verdict: Pass}
}

// ask answers the input_required result that asks for the yes.
func (g *Gate) ask(n Need, c *Call, b *Bind, keys []Key) Outcome {
	if err := g.Random(b.Nonce[:]); err != nil {
		return refusal(c.Tool, abi.DenyGateUnavailable, "Tool "+c.Tool+" needs a person's approval, and the gateway could not make the question: it was not run.", "random: "+err.Error())
	}
	b.Expiry = c.Now.UnixMilli() + ttl(n)
	r := append([]byte(nil), `{"resultType":"input_required","inputRequests":`...)
	r = append(r, Form(c.Tool, c.Args, n.Message, maxArgShown)...)
	r = append(r, `,"requestState":`...)
	r = jsonx.AppendString(r, Seal(&keys[0], b))
	r = append(r, '}')
	return Outcome{Verdict: Ask, Result: r}
}

// load returns the gateway's keys, reading (or creating) them in the store on first use;
// a failure is tried again on the next call.
func (g *Gate) load(ctx context.Context) ([]Key, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keys != nil {
		return g.keys, nil
	}
	keys, err := EnsureKey(
		func() ([]byte, bool, error) { return g.Get(ctx, abi.ApprovalSecretKey) },
		func(v []byte) (bool, error) { return g.Create(ctx, abi.ApprovalSecretKey, v) },
		g.Random)
	if err != nil {
		return nil, err
	}
	g.keys = keys
	return keys, nil
}

// refusal is a Refuse outcome: an error result with code in _meta, as the engine's denials.
func refusal(tool, code, text, why string) Outcome {
	o := HeldRefusal(tool, code, text, "")
	o.Why = why
	return o
}

// Strip returns the params of a call let through (params: the call's params object, raw)
// without the gateway's requestState and its key in inputResponses (and without
// inputResponses when nothing else is left in it): what the server sees is the call as if
// no gateway had asked. carried is the server's own requestState to send instead
// (Outcome.Carried; "": none). ok is false when params is not an object.
func Strip(params gjson.Result, carried string) (out []byte, ok bool) {
	if !params.IsObject() {
		return nil, false
	}
	out = append(make([]byte, 0, len(params.Raw)), '{')
	first := true
	member := func(k, v string) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, k...)
		out = append(out, ':')
		out = append(out, v...)
	}
	params.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "requestState":
			return true
		case "inputResponses":
			if !v.IsObject() {
				member(k.Raw, v.Raw)
				return true
			}
			inner := []byte{'{'}
			v.ForEach(func(ik, iv gjson.Result) bool {
				if ik.Str != InputKey {
					if len(inner) > 1 {
						inner = append(inner, ',')
					}
					inner = append(inner, ik.Raw...)
					inner = append(inner, ':')
					inner = append(inner, iv.Raw...)
				}
				return true
			})
			if len(inner) > 1 {
				member(k.Raw, string(append(inner, '}')))
			}
			return true
		}
		member(k.Raw, v.Raw)
		return true
	})
	if carried != "" {
		member(`"requestState"`, string(jsonx.AppendString(nil, carried)))
	}
	return append(out, '}'), true
}

// NewGate is a Gate over the exchange's state: the gateway's key and the used yeses are
// keys of the store (abi.ApprovalKeyPrefix), so every replica shares them and a restart
// keeps them; random is crypto/rand.Read.
func NewGate(s state.State, random func([]byte) (int, error)) *Gate {
	return &Gate{
		Get: func(ctx context.Context, key string) ([]byte, bool, error) {
			slots, err := s.Load(ctx, []string{key}, false)
			if err != nil || len(slots) != 1 {
				return nil, false, errors.Join(err, errors.New("approval: the store answered no slot"))
			}
			return slots[0].Value, slots[0].Exists, nil
		},
		Create: func(ctx context.Context, key string, value []byte) (bool, error) {
			switch err := s.Store(ctx, "", key, value, state.Slot{}, nil); {
			case errors.Is(err, state.ErrConflict):
				return false, nil
			case err != nil:
				return false, err
			}
			return true, nil
		},
		Random: func(b []byte) error { _, err := random(b); return err },
	}
}

// ScopeOfHeaders is ScopeOf the values of the headers names in h (nil h, or an empty
// name: absent).
func ScopeOfHeaders(h interface{ Values(string) []string }, names ...string) string {
	values := make([][]string, len(names))
	for i, n := range names {
		if h != nil && n != "" {
			values[i] = h.Values(n)
		}
	}
	return ScopeOf(values...)
}

// WorkflowOfSlots is WorkflowOf the workflow keys among keys (abi.IsWorkflowKey) and their
// slots as admission read them.
func WorkflowOfSlots(keys []string, slots []state.Slot) string {
	var wk []string
	var snaps [][]byte
	for i, k := range keys {
		if abi.IsWorkflowKey(k) && i < len(slots) {
			wk, snaps = append(wk, k), append(snaps, slots[i].Value)
		}
	}
	return WorkflowOf(wk, snaps)
}
