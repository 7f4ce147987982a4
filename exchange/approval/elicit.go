package approval

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/state"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// The 2025-11-25 way of asking (issue 41, item 3): a host that can hold a request (the
// standalone gateway) answers the call with an event stream whose first event is an
// elicitation/create request of the gateway's own; the client POSTs its answer back as a
// JSON-RPC response carrying that request's id; the gateway consumes it (never forwards
// it), delivers the answer through the store to whichever replica holds the call, and the
// held call is admitted again with the answer (Held) and forwarded on a yes.
//
// # Notes
//
//   - The request's id is IDPrefix followed by a requestState (Seal): signed by the
//     gateway's key, bound to the call (tool, arguments, principal, the credentials' scope
//     with the session, the workflow state) and expiring. A server's own request ids never
//     begin with IDPrefix (the gateway's reverse-DNS name), and an id that does but does
//     not verify is refused, never forwarded.
//   - The answer is delivered once: AnswerKey(id) is created by compare-and-set against
//     absent; a second answer loses and is refused. The held call claims UsedKey before it
//     is forwarded, as a 2026-07-28 retry does: one yes runs one call once.

// IDPrefix starts the id of every elicitation/create request the gateway sends itself.
const IDPrefix = "dev.stategate/approval:"

// IsID reports whether id (a JSON-RPC id, as read) has the form of the gateway's own
// elicitation request id: a string with IDPrefix.
func IsID(id gjson.Result) bool {
	return id.Type == gjson.String && len(id.Str) > len(IDPrefix) && id.Str[:len(IDPrefix)] == IDPrefix
}

// FormCapable reports whether an initialize request's capabilities.elicitation (v) lets the
// client answer a form: {} (form mode, 2025-06-18's only mode) or an object with "form".
// A client with only "url" cannot.
func FormCapable(v gjson.Result) bool {
	if !v.IsObject() {
		return false
	}
	form, url := v.Get("form"), v.Get("url")
	return form.IsObject() || (!form.Exists() && !url.Exists())
}

// CapabilityKey is the store key recording that session's client can answer a form
// (FormCapable at initialize): owned by the session, so it ends with it.
func CapabilityKey(session string) string {
	d := sha256.Sum256([]byte(session))
	return abi.ApprovalKeyPrefix + "elicit/" + hex.EncodeToString(d[:16])
}

// AnswerKey is the store key an answer to the elicitation request id is delivered under.
func AnswerKey(id string) string {
	d := sha256.Sum256([]byte(id))
	return abi.ApprovalKeyPrefix + "answer/" + hex.EncodeToString(d[:16])
}

// Held is the answer to the elicitation request ID, handed by the host that held the call
// to the call's second admission (WithHeld): never read from the client's request.
type Held struct {
	ID       string // IDPrefix + the requestState
	Answer   Answer
	TimedOut bool // nobody answered within the wait (Answer is Invalid)
	Wait     time.Duration
}

type heldKey struct{}

// WithHeld returns ctx carrying h, for the admission of the call h answers.
func WithHeld(ctx context.Context, h *Held) context.Context {
	return context.WithValue(ctx, heldKey{}, h)
}

// HeldFrom returns the Held ctx carries (nil for none).
func HeldFrom(ctx context.Context) *Held {
	h, _ := ctx.Value(heldKey{}).(*Held)
	return h
}

// ReadResult reads an elicitation/create result (the raw result member of the client's
// response): Accept only when the action is "accept" and the content's approve is the JSON
// true, as ReadAnswer.
func ReadResult(result []byte) Answer {
	if jsonx.Validate(result, abi.MaxDepth) != nil {
		return Invalid
	}
	return readResponse(gjson.ParseBytes(result))
}

// Answered verifies the answer to one of the gateway's elicitation requests: id is the
// request's id, principal and scope those of the request that answers (ScopeOf, as the
// call's). It returns nil when id is the gateway's, unexpired and was sent for this caller.
func (g *Gate) Answered(ctx context.Context, id, principal, scope string, now time.Time) error {
	if len(id) <= len(IDPrefix) || id[:len(IDPrefix)] != IDPrefix {
		return ErrMalformed
	}
	keys, err := g.load(ctx)
	if err != nil {
		return err
	}
	st, err := Open(keys, id[len(IDPrefix):], now.UnixMilli())
	if err != nil {
		return err
	}
	tags := st.key.tags(&Bind{Principal: principal, Scope: scope})
	switch {
	case !hmac.Equal(st.tags[1][:], tags[1][:]):
		return &MismatchError{Field: "principal"}
	case !hmac.Equal(st.tags[2][:], tags[2][:]):
		return &MismatchError{Field: "scope"}
	}
	return nil
}

// Asker asks a 2025-11-25 client for the yes on the call's own stream: *Elicit, for a host
// that can hold a call (Call.Asker). An interface, so that a host that cannot (the Wasm
// modules) carries none of its code.
type Asker interface {
	// Hold decides a 2025-11-25 call c that needs n, bound to b: the question (Verdict
	// AskStream), or a refusal when its client cannot be asked.
	Hold(ctx context.Context, g *Gate, n Need, c *Call, b *Bind, keys []Key) Outcome
	// Settle decides the call again with the answer its question got (c.Held): a yes
	// bound to b passes once; anything else is refused.
	Settle(ctx context.Context, g *Gate, c *Call, b *Bind, keys []Key) Outcome
}

// Settle implements Asker. The person's answer is read first: a no is a no whatever else
// changed; a yes must still be bound to the call as admitted now (the workflow may have
// moved while the person decided).
func (e *Elicit) Settle(ctx context.Context, g *Gate, c *Call, b *Bind, keys []Key) Outcome {
	const again = " Call it again to be asked."
	h := c.Held
	st, err := Open(keys, strings.TrimPrefix(h.ID, IDPrefix), c.Now.UnixMilli())
	if err != nil {
		return invalid(c, err, again)
	}
	switch {
	case h.TimedOut:
		within := strconv.FormatInt(h.Wait.Milliseconds(), 10) + " ms"
		if h.Wait >= time.Second {
			within = strconv.FormatInt(h.Wait.Milliseconds()/1000, 10) + " s"
		}
		return refusal(c.Tool, abi.DenyApprovalCancelled, "Nobody answered the approval within "+within+": tool "+c.Tool+" was not run.", "timed out")
	case h.Answer == Accept:
		if err := st.Match(b); err != nil {
			return invalid(c, err, again)
		}
	}
	return g.settle(ctx, c, st, h.Answer, again)
}

// Hold implements Asker: the client must take an event stream and have declared it can
// answer a form (CapabilityKey of its session).
func (e *Elicit) Hold(ctx context.Context, g *Gate, n Need, c *Call, b *Bind, keys []Key) Outcome {
	if c.JSONOnly {
		return refusal(c.Tool, abi.DenyApprovalRequired, "Tool "+c.Tool+" runs only after a person approves the call. This gateway asks a 2025-11-25 client with an elicitation request on the call's event stream, and this request accepts only application/json: it was not run.", "json only")
	}
	ok, err := false, error(nil)
	if c.Session != "" {
		_, ok, err = g.Get(ctx, CapabilityKey(c.Session))
	}
	switch {
	case err != nil:
		return refusal(c.Tool, abi.DenyGateUnavailable, "Tool "+c.Tool+" needs a person's approval, and the gateway could not read whether this client can be asked: it was not run. Try again shortly.", "capability: "+err.Error())
	case !ok:
		return refusal(c.Tool, abi.DenyApprovalRequired, "Tool "+c.Tool+" runs only after a person approves the call. This gateway asks a 2025-11-25 client with an elicitation request on the call's stream, and this client did not declare the elicitation capability (form mode) when it initialized its session: it was not run.", "no elicitation capability")
	}
	return g.hold(n, c, b, keys)
}

// Prepare implements exchange.Elicitor: c is asked by e, or decided with the answer ctx
// carries (HeldFrom).
func (e *Elicit) Prepare(ctx context.Context, c *Call) {
	c.Asker, c.Held = e, HeldFrom(ctx)
}

// Capable implements exchange.Elicitor: FormCapable of params.capabilities.elicitation.
func (e *Elicit) Capable(params gjson.Result) bool {
	return FormCapable(params.Get("capabilities.elicitation"))
}

// Ours implements exchange.Elicitor: IsID.
func (e *Elicit) Ours(id gjson.Result) bool { return IsID(id) }

// Record records that session's client can answer a form (it declared so at initialize):
// owned by the session, so it ends with it.
func (e *Elicit) Record(ctx context.Context, session string) error {
	err := e.s.Store(context.WithoutCancel(ctx), session, CapabilityKey(session), []byte("form"), state.Slot{}, nil)
	if errors.Is(err, state.ErrConflict) {
		return nil // recorded already
	}
	return err
}

// Answer takes msg, a client's JSON-RPC response whose id is the gateway's (IsID), sent by
// principal with the credentials' scope (ScopeOf, as the call's): verified (Answered), its
// answer read (an error response is a cancel: the client could not ask) and delivered once.
// status is 202 when it was; else the HTTP status and text to refuse it with.
func (e *Elicit) Answer(ctx context.Context, msg []byte, principal, scope string) (status int, text string) {
	doc := gjson.ParseBytes(msg)
	id := doc.Get("id")
	if err := e.gate.Answered(ctx, id.Str, principal, scope, time.Now()); err != nil {
		return 400, "not an answer to a question this gateway asked this session (" + err.Error() + ")"
	}
	a := Cancel
	if r, repeated := count(doc, "result"); repeated {
		return 400, "the answer repeats its result member"
	} else if r.Exists() {
		a = ReadResult([]byte(r.Raw))
	}
	switch err := e.Deliver(ctx, id.Str, a); {
	case errors.Is(err, ErrAnswered):
		return 409, "this approval question was answered already"
	case err != nil:
		return 503, "the gateway could not record the answer: try again shortly"
	}
	return 202, ""
}

// hold answers a 2025-11-25 call whose client can be asked: the elicitation/create request
// (a JSON-RPC message) to send on the call's response stream, its id, and how long to wait.
func (g *Gate) hold(n Need, c *Call, b *Bind, keys []Key) Outcome {
	if err := g.Random(b.Nonce[:]); err != nil {
		return refusal(c.Tool, abi.DenyGateUnavailable, "Tool "+c.Tool+" needs a person's approval, and the gateway could not make the question: it was not run.", "random: "+err.Error())
	}
	// The approval's timeoutMs (the 2026 way's default when unset), within the call's own
	// timeout.
	wait := time.Duration(n.TimeoutMs) * time.Millisecond
	if wait <= 0 {
		wait = 300 * time.Second
	}
	if c.CallTimeout > 0 && c.CallTimeout < wait {
		wait = c.CallTimeout
	}
	// The yes is good a little past the wait: the held call is admitted again once the
	// answer is in.
	b.Expiry = c.Now.Add(wait + heldGrace).UnixMilli()
	s := Seal(&keys[0], b)
	if s == "" {
		return refusal(c.Tool, abi.DenyApprovalInvalid, "Tool "+c.Tool+" runs only after a person approves the call, and its name cannot be bound to an approval: it was not run.", "unsealable")
	}
	id := IDPrefix + s
	m := append([]byte(nil), `{"jsonrpc":"2.0","id":`...)
	m = jsonx.AppendString(m, id)
	m = append(m, `,"method":"elicitation/create","params":`...)
	m = append(m, Params(c.Tool, c.Args, n.Message, maxArgShown)...)
	m = append(m, '}')
	return Outcome{Verdict: AskStream, Result: m, ID: id, Wait: wait}
}

// heldGrace is how long past its wait a held call's yes stays good: the time its second
// admission takes (a lease wait at most).
const heldGrace = 30 * time.Second

// Elicit delivers the answers to the gateway's elicitation requests to the calls held for
// them, on one replica or across replicas through the store: Deliver writes the answer
// once (compare-and-set against absent), Await waits for it (a channel when the answer
// lands on the same replica, else polling the store every Poll until the deadline).
type Elicit struct {
	// Get and Create are the store's, as the Gate's.
	Get    func(ctx context.Context, key string) (value []byte, ok bool, err error)
	Create func(ctx context.Context, key string, value []byte) (created bool, err error)
	// Poll is how often Await reads the store (default 100 ms).
	Poll time.Duration

	s       state.State // Record's
	gate    *Gate       // Answer's keys
	mu      sync.Mutex
	waiting map[string]chan Answer
}

// NewElicit is an Elicit over the exchange's state; random is crypto/rand.Read.
func NewElicit(s state.State, random func([]byte) (int, error)) *Elicit {
	g := NewGate(s, random)
	return &Elicit{Get: g.Get, Create: g.Create, s: s, gate: g}
}

// ErrAnswered: an answer to this request was delivered already.
var ErrAnswered = errors.New("approval: this question was answered already")

// ErrNoAnswer: nobody answered before the deadline.
var ErrNoAnswer = errors.New("approval: no answer before the deadline")

// Deliver delivers a, the answer to the elicitation request id (verified by the caller:
// Gate.Answered), once: ErrAnswered when an answer was delivered before.
func (e *Elicit) Deliver(ctx context.Context, id string, a Answer) error {
	if a != Accept && a != Decline && a != Cancel {
		a = Cancel // an answer that cannot be read decides nothing: the call is not run
	}
	created, err := e.Create(ctx, AnswerKey(id), []byte(a.String()))
	switch {
	case err != nil:
		return err
	case !created:
		return ErrAnswered
	}
	e.mu.Lock()
	ch := e.waiting[id]
	e.mu.Unlock()
	if ch != nil {
		select {
		case ch <- a:
		default:
		}
	}
	return nil
}

// Await waits for the answer to the elicitation request id until deadline: ErrNoAnswer
// past it, ctx's error when ctx ends first (the client left).
func (e *Elicit) Await(ctx context.Context, id string, deadline time.Time) (Answer, error) {
	ch := make(chan Answer, 1)
	e.mu.Lock()
	if e.waiting == nil {
		e.waiting = map[string]chan Answer{}
	}
	e.waiting[id] = ch
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.waiting, id)
		e.mu.Unlock()
	}()
	poll := e.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	key := AnswerKey(id)
	for {
		select {
		case a := <-ch:
			return a, nil
		case <-ctx.Done():
			return Invalid, ctx.Err()
		case <-timer.C:
			return Invalid, ErrNoAnswer
		case <-ticker.C:
			v, ok, err := e.Get(ctx, key)
			if err != nil || !ok {
				continue // the store may answer on the next round
			}
			return parseAnswer(string(v)), nil
		}
	}
}

func parseAnswer(s string) Answer {
	switch s {
	case "accept":
		return Accept
	case "decline":
		return Decline
	}
	return Cancel
}

// Elicitor is the 2025-11-25 way of asking for a host that can hold a call
// (*Elicit): the question (Asker), the client's answer taken and
// delivered, the client's capability recorded. An interface, so that a host that cannot
// hold a call (the Envoy filter, the exchange module) carries none of its code.
type Elicitor interface {
	Asker
	Answer(ctx context.Context, msg []byte, principal, scope string) (status int, text string)
	Record(ctx context.Context, session string) error
	// Prepare readies c, a 2025-11-25 call, to be asked (c.Asker) or decided with the
	// answer its host hands in ctx (c.Held).
	Prepare(ctx context.Context, c *Call)
	// Capable reads an initialize request's params: can the client answer a form?
	Capable(params gjson.Result) bool
	// Ours reports whether a JSON-RPC id is the gateway's own question's.
	Ours(id gjson.Result) bool
}
