package approval

import (
	"context"
	"encoding/hex"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/state"
	"github.com/stategate/stategate/internal/termsafe"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Hold keeps calls that wait for a decision made elsewhere (an operator's approve or deny,
// on any replica) in the store: Open writes a call's record, Decide writes its decision
// once, Await waits for it, List lists what is still pending. Every replica on the same
// store sees the same records, so a call held on one replica is decided on another.
//
// # Notes
//
//   - A record is abi.ApprovalPendingPrefix+ID, its decision abi.ApprovalDecisionPrefix+ID,
//     created once (compare-and-set against absent): the first decision wins, a later one
//     gets ErrDecided with the first. Expiry is a decision too (VerdictExpired, written by
//     Await or by a Decide after the deadline), so a late approve can never pass.
//   - The state contract has no key scan: List reads a bounded index (abi.ApprovalIndexKey,
//     the ids and deadlines of at most MaxPending records, compare-and-set updated, pruned
//     of decided and expired ones), and Open refuses a call beyond the bound (ErrFull).
//   - Await polls the decision (Poll apart): the state contract has no notification either.
//   - Records and decisions are never deleted (the contract has no delete): they are small,
//     and the store's own expiry of idle keys takes them.
//   - Built for operator approval (exchange/hold.go) and meant for any decision a call
//     waits for; it does no I/O but the State's, and builds with TinyGo.
type Hold struct {
	State state.State
	// Random fills b with random bytes (the records' ids).
	Random func(b []byte) error
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Poll is how often Await reads the decision (0: DefaultPoll).
	Poll time.Duration
}

// NewHold is a Hold over s; random is crypto/rand.Read.
func NewHold(s state.State, random func([]byte) (int, error)) *Hold {
	return &Hold{State: s, Random: func(b []byte) error { _, err := random(b); return err }}
}

// DefaultPoll is how often Await reads a decision by default.
const DefaultPoll = 200 * time.Millisecond

// MaxPending bounds the records pending at once (across every replica of a store).
const MaxPending = 256

// MaxArgsShown bounds the preview of a held call's arguments, in bytes.
const MaxArgsShown = 2048

// The verdicts of a Decision.
const (
	VerdictApproved = "approved" // an operator approved: the call goes
	VerdictDenied   = "denied"   // an operator denied: the call is refused
	VerdictExpired  = "expired"  // nobody decided before the deadline: the call is refused
	VerdictClosed   = "closed"   // the caller left (a client disconnect) before a decision
)

// Pending is one held call's record: what an operator sees before deciding.
type Pending struct {
	ID string `json:"id"`
	// Tool is the tool's name as called; ToolShown the same escaped and cut
	// (termsafe.String, MaxToolShown): what a terminal or a page shows.
	Tool      string `json:"tool"`
	ToolShown string `json:"toolShown"`
	// Principal is the caller's principal ("" for none), escaped as ToolShown.
	Principal string `json:"principal,omitempty"`
	// Session is a digest of the caller's session (never the id: it is a credential).
	Session string `json:"session,omitempty"`
	// Arguments is the arguments' preview: canonical JSON where they have one, escaped
	// (every control, bidi or invisible character as a visible escape), cut after
	// MaxArgsShown bytes.
	Arguments string `json:"arguments"`
	// Message is the approvals entry's message, escaped.
	Message  string `json:"message,omitempty"`
	AskedAt  int64  `json:"askedAt"`  // Unix ms
	Deadline int64  `json:"deadline"` // Unix ms: expired after it
	// Decision is the decision, once there is one.
	Decision *Decision `json:"decision,omitempty"`
}

// Decision is what was decided about a held call, by whom and how.
type Decision struct {
	Verdict string `json:"verdict"` // VerdictApproved, VerdictDenied, VerdictExpired or VerdictClosed
	By      string `json:"by"`      // who: the operator's name ("admin"), "gateway" for expiry, "client" when it left
	Via     string `json:"via"`     // how: "cli", "status page", "api", "timeout", "disconnect"
	At      int64  `json:"at"`      // Unix ms
}

// Errors of a Hold.
var (
	ErrUnknown     = errors.New("approval: no held call has this id")
	ErrDecided     = errors.New("approval: the held call was decided already")
	ErrHoldExpired = errors.New("approval: the held call's deadline passed before the decision")
	ErrFull        = errors.New("approval: too many calls are held at once")
	ErrBadID       = errors.New("approval: an id is 24 hexadecimal digits")
	ErrBadEntry    = errors.New("approval: a held call's record cannot be read")
)

// idLen is the length of an id in bytes (hex: twice as many digits).
const idLen = 12

// ValidID reports whether id can name a held call (24 lowercase hexadecimal digits).
func ValidID(id string) bool {
	if len(id) != 2*idLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Preview is a held call's Pending before Open: the tool, the principal and the arguments
// shown as an operator must see them (escaped, cut), the message escaped. deadline is
// the Unix ms after which it expires; session a digest of the caller's session.
func Preview(tool, principal, session string, args []byte, message string, deadline int64) Pending {
	shown := shownArgs(args)
	return Pending{
		Tool:      tool,
		ToolShown: string(appendCut(nil, termsafe.String(tool), MaxToolShown)),
		Principal: string(appendCut(nil, termsafe.String(principal), MaxToolShown)),
		Session:   session,
		Arguments: string(appendCut(nil, termsafe.String(string(shown)), MaxArgsShown)),
		Message:   string(appendCut(nil, termsafe.String(message), 512)),
		Deadline:  deadline,
	}
}

func (h *Hold) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// Open stores p (p.ID is set here, p.AskedAt to now) and adds it to the index. ErrFull
// when MaxPending records are pending already.
func (h *Hold) Open(ctx context.Context, p *Pending) error {
	var raw [idLen]byte
	if err := h.Random(raw[:]); err != nil {
		return err
	}
	p.ID, p.AskedAt, p.Decision = hex.EncodeToString(raw[:]), h.now().UnixMilli(), nil
	if err := h.addIndex(ctx, p.ID, p.Deadline); err != nil {
		return err
	}
	created, err := h.create(ctx, abi.ApprovalPendingPrefix+p.ID, appendPending(nil, p))
	if err == nil && !created {
		err = errors.New("approval: a held call's id was taken")
	}
	return err
}

// Get reads a held call's record with its decision (nil while pending).
func (h *Hold) Get(ctx context.Context, id string) (Pending, error) {
	if !ValidID(id) {
		return Pending{}, ErrBadID
	}
	slots, err := h.State.Load(ctx, []string{abi.ApprovalPendingPrefix + id, abi.ApprovalDecisionPrefix + id}, false)
	if err != nil {
		return Pending{}, err
	}
	if len(slots) != 2 {
		return Pending{}, errors.New("approval: the store answered no slot")
	}
	if !slots[0].Exists {
		return Pending{}, ErrUnknown
	}
	p, ok := parsePending(slots[0].Value)
	if !ok {
		return Pending{}, ErrBadEntry
	}
	if slots[1].Exists {
		d, ok := parseDecision(slots[1].Value)
		if !ok {
			return Pending{}, ErrBadEntry
		}
		p.Decision = &d
	}
	return p, nil
}

// Decide writes the decision d about the held call id (d.At is set here) and answers the
// record with it. The first decision wins: a later one gets ErrDecided and the record with
// the first. An approve or deny after the deadline writes VerdictExpired instead and gets
// ErrHoldExpired (or ErrDecided, when another decision came first).
func (h *Hold) Decide(ctx context.Context, id string, d Decision) (Pending, error) {
	switch d.Verdict {
	case VerdictApproved, VerdictDenied, VerdictExpired, VerdictClosed:
	default:
		return Pending{}, errors.New("approval: unknown verdict " + strconv.Quote(d.Verdict))
	}
	p, err := h.Get(ctx, id)
	if err != nil {
		return p, err
	}
	if p.Decision != nil {
		return p, ErrDecided
	}
	now := h.now().UnixMilli()
	late := (d.Verdict == VerdictApproved || d.Verdict == VerdictDenied) && now > p.Deadline
	if late {
		d = Decision{Verdict: VerdictExpired, By: "gateway", Via: "timeout"}
	}
	d.At = now
	created, err := h.create(ctx, abi.ApprovalDecisionPrefix+id, appendDecision(nil, &d))
	if err != nil {
		return p, err
	}
	if !created {
		if q, err := h.Get(ctx, id); err == nil {
			p = q
		}
		return p, ErrDecided
	}
	p.Decision = &d
	h.dropIndex(ctx, id)
	if late {
		return p, ErrHoldExpired
	}
	return p, nil
}

// Await waits for the decision about the held call id and returns it. At the record's
// deadline it decides VerdictExpired itself (unless a decision came first). When ctx ends
// first it returns ctx's error, and the caller decides (VerdictClosed).
func (h *Hold) Await(ctx context.Context, id string) (Decision, error) {
	poll := h.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	var timer *time.Timer
	for {
		p, err := h.Get(ctx, id)
		switch {
		case err != nil && ctx.Err() != nil:
			return Decision{}, ctx.Err()
		case err != nil:
			return Decision{}, err
		case p.Decision != nil:
			return *p.Decision, nil
		}
		wait := time.Duration(p.Deadline-h.now().UnixMilli()) * time.Millisecond
		if wait < 0 {
			q, err := h.Decide(ctx, id, Decision{Verdict: VerdictExpired, By: "gateway", Via: "timeout"})
			if q.Decision != nil {
				return *q.Decision, nil
			}
			return Decision{}, err
		}
		if wait > poll {
			wait = poll
		}
		if timer == nil {
			timer = time.NewTimer(wait + time.Millisecond)
			defer timer.Stop()
		} else {
			timer.Reset(wait + time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return Decision{}, ctx.Err()
		case <-timer.C:
		}
	}
}

// List answers the held calls still pending (no decision, deadline not passed), oldest
// first, and prunes the index of the others.
func (h *Hold) List(ctx context.Context) ([]Pending, error) {
	entries, slot, err := h.loadIndex(ctx)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return []Pending{}, nil
	}
	keys := make([]string, 0, 2*len(entries))
	for _, e := range entries {
		keys = append(keys, abi.ApprovalPendingPrefix+e.id, abi.ApprovalDecisionPrefix+e.id)
	}
	slots, err := h.State.Load(ctx, keys, false)
	if err != nil {
		return nil, err
	}
	if len(slots) != len(keys) {
		return nil, errors.New("approval: the store answered too few slots")
	}
	now := h.now().UnixMilli()
	out := []Pending{}
	keep := entries[:0:0]
	for i, e := range entries {
		rec, dec := slots[2*i], slots[2*i+1]
		if dec.Exists || e.deadline < now {
			continue // decided, or expired: pruned
		}
		keep = append(keep, e)
		if !rec.Exists {
			continue // still being opened
		}
		if p, ok := parsePending(rec.Value); ok {
			out = append(out, p)
		}
	}
	if len(keep) != len(entries) {
		// Best effort: a conflict means another writer updated it; the next List prunes.
		h.State.Store(ctx, "", abi.ApprovalIndexKey, appendIndex(nil, keep), slot, nil)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].AskedAt < out[j].AskedAt })
	return out, nil
}

// create stores value under key only if it is absent.
func (h *Hold) create(ctx context.Context, key string, value []byte) (bool, error) {
	switch err := h.State.Store(ctx, "", key, value, state.Slot{}, nil); {
	case errors.Is(err, state.ErrConflict):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

type indexEntry struct {
	id       string
	deadline int64
}

// indexRounds bounds the compare-and-set rounds of one index update.
const indexRounds = 32

func (h *Hold) loadIndex(ctx context.Context) ([]indexEntry, state.Slot, error) {
	slots, err := h.State.Load(ctx, []string{abi.ApprovalIndexKey}, false)
	if err != nil {
		return nil, state.Slot{}, err
	}
	if len(slots) != 1 {
		return nil, state.Slot{}, errors.New("approval: the store answered no slot")
	}
	return parseIndex(slots[0].Value), slots[0], nil
}

// addIndex adds id to the index, pruned of expired entries; ErrFull beyond MaxPending.
func (h *Hold) addIndex(ctx context.Context, id string, deadline int64) error {
	return h.updateIndex(ctx, func(es []indexEntry) ([]indexEntry, error) {
		now := h.now().UnixMilli()
		kept := es[:0]
		for _, e := range es {
			if e.deadline >= now {
				kept = append(kept, e)
			}
		}
		if len(kept) >= MaxPending {
			return nil, ErrFull
		}
		return append(kept, indexEntry{id, deadline}), nil
	})
}

// dropIndex takes id out of the index (best effort: List prunes what is left).
func (h *Hold) dropIndex(ctx context.Context, id string) {
	h.updateIndex(ctx, func(es []indexEntry) ([]indexEntry, error) {
		kept := es[:0]
		for _, e := range es {
			if e.id != id {
				kept = append(kept, e)
			}
		}
		return kept, nil
	})
}

func (h *Hold) updateIndex(ctx context.Context, fn func([]indexEntry) ([]indexEntry, error)) error {
	for round := 0; round < indexRounds; round++ {
		es, slot, err := h.loadIndex(ctx)
		if err != nil {
			return err
		}
		next, err := fn(es)
		if err != nil {
			return err
		}
		switch err := h.State.Store(ctx, "", abi.ApprovalIndexKey, appendIndex(nil, next), slot, nil); {
		case errors.Is(err, state.ErrConflict):
			continue
		case err != nil:
			return err
		}
		return nil
	}
	return errors.New("approval: the index of held calls kept changing")
}

// The stored forms: JSON objects written with jsonx, read with gjson.

func appendIndex(b []byte, es []indexEntry) []byte {
	b = append(b, '[')
	for i, e := range es {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":"`...)
		b = append(b, e.id...)
		b = append(b, `","deadline":`...)
		b = strconv.AppendInt(b, e.deadline, 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

func parseIndex(raw []byte) []indexEntry {
	var es []indexEntry
	gjson.ParseBytes(raw).ForEach(func(_, v gjson.Result) bool {
		if id := v.Get("id").Str; ValidID(id) {
			es = append(es, indexEntry{id, v.Get("deadline").Int()})
		}
		return true
	})
	return es
}

func appendPending(b []byte, p *Pending) []byte {
	b = append(b, `{"id":`...)
	b = jsonx.AppendString(b, p.ID)
	for _, m := range [...]struct{ k, v string }{{"tool", p.Tool}, {"toolShown", p.ToolShown}, {"principal", p.Principal},
		{"session", p.Session}, {"arguments", p.Arguments}, {"message", p.Message}} {
		b = append(b, `,"`...)
		b = append(b, m.k...)
		b = append(b, `":`...)
		b = jsonx.AppendString(b, m.v)
	}
	b = append(b, `,"askedAt":`...)
	b = strconv.AppendInt(b, p.AskedAt, 10)
	b = append(b, `,"deadline":`...)
	b = strconv.AppendInt(b, p.Deadline, 10)
	return append(b, '}')
}

func parsePending(raw []byte) (Pending, bool) {
	if jsonx.Validate(raw, abi.MaxDepth) != nil {
		return Pending{}, false
	}
	v := gjson.ParseBytes(raw)
	p := Pending{ID: v.Get("id").Str, Tool: v.Get("tool").Str, ToolShown: v.Get("toolShown").Str, Principal: v.Get("principal").Str,
		Session: v.Get("session").Str, Arguments: v.Get("arguments").Str, Message: v.Get("message").Str,
		AskedAt: v.Get("askedAt").Int(), Deadline: v.Get("deadline").Int()}
	return p, ValidID(p.ID)
}

func appendDecision(b []byte, d *Decision) []byte {
	b = append(b, `{"verdict":`...)
	b = jsonx.AppendString(b, d.Verdict)
	b = append(b, `,"by":`...)
	b = jsonx.AppendString(b, d.By)
	b = append(b, `,"via":`...)
	b = jsonx.AppendString(b, d.Via)
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, d.At, 10)
	return append(b, '}')
}

func parseDecision(raw []byte) (Decision, bool) {
	if jsonx.Validate(raw, abi.MaxDepth) != nil {
		return Decision{}, false
	}
	v := gjson.ParseBytes(raw)
	d := Decision{Verdict: v.Get("verdict").Str, By: v.Get("by").Str, Via: v.Get("via").Str, At: v.Get("at").Int()}
	return d, d.Verdict != ""
}
