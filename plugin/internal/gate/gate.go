// Package gate holds the FSM State Gate: where each workflow's state lives (the storage
// key), how a stored snapshot is read back, and which tools a state allows.
//
// # Notes
//
//   - The engine derives storage keys, not the hosts, so every host keys state identically.
//   - Snapshots are JSON: {"workflow","fingerprint","state","seq"}. seq grows by one on every
//     write, so hosts can compare-and-set on the stored bytes without ABA.
//   - A snapshot whose fingerprint differs from the current definition keeps its state when
//     that state still exists (notice STATE_MIGRATED) and otherwise restarts at the initial
//     state (notice STATE_RESET); a snapshot that does not parse, names another workflow or
//     names an unknown state restarts at the initial state (notice STATE_RESET).
package gate

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Era is the MCP protocol era of a request.
type Era uint8

// The protocol eras.
const (
	EraSession   Era = iota // 2025-03-26 .. 2025-11-25: initialize handshake, Mcp-Session-Id
	EraStateless            // 2026-07-28 and later: no session, state handles in arguments
)

// StatelessSince is the first protocol version of the stateless era.
const StatelessSince = "2026-07-28"

// EraOf returns the era of a protocol version string ("" means the session era, as a
// request without MCP-Protocol-Version is read as 2025-03-26). A version that is not a
// YYYY-MM-DD date is read as the session era too.
func EraOf(protocolVersion string) Era {
	if isDate(protocolVersion) && protocolVersion >= StatelessSince {
		return EraStateless
	}
	return EraSession
}

// isDate reports whether s has the shape of a protocol version: YYYY-MM-DD.
func isDate(s string) bool {
	if len(s) != len(StatelessSince) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if i == 4 || i == 7 {
			if s[i] != '-' {
				return false
			}
		} else if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Hides reports whether w's bound tools are hidden outside their states in era (rather
// than kept and marked): only session-keyed workflows in the session era, since a
// 2026-07-28 tools/list must not vary with state and a handle-keyed state is not known
// at list time.
func Hides(w *config.Workflow, era Era) bool {
	return era == EraSession && w.Key == config.KeySession
}

// KeyStatus says whether a storage key could be derived.
type KeyStatus uint8

// The outcomes of key derivation.
const (
	KeyOK            KeyStatus = iota
	KeyNoSession               // session-keyed workflow, request without a session
	KeyMissingHandle           // handle-keyed workflow, argument absent
	KeyBadHandle               // handle argument is not a string or whole number, or is repeated
	KeyBadScope                // the principal is too long to key state by
)

// Scope is what a request says about where its state lives.
type Scope struct {
	Session   string
	Principal string
	Args      gjson.Result // the tool arguments (may not exist)
}

// Key derives the storage key of w for a request in scope:
//
//	stategate/v1/<workflow>/session/<principal>/<session id>
//	stategate/v1/<workflow>/arg.<name>/<principal>/<handle>
//
// with principal and value percent-encoded, so distinct scopes never share a key. The
// principal scopes every key, so a handle is inert in another principal's hands.
// Values longer than MaxScopeBytes are refused (KeyBadHandle for a handle, KeyNoSession
// for a session id or principal) rather than cut or hashed, keeping keys collision-free.
func Key(w *config.Workflow, s *Scope) (key, handle string, st KeyStatus) {
	var kind, value string
	switch w.Key {
	case config.KeySession:
		if s.Session == "" || len(s.Session) > MaxScopeBytes {
			return "", "", KeyNoSession
		}
		kind, value = "session", s.Session
	case config.KeyArgument:
		if !s.Args.IsObject() {
			return "", "", KeyMissingHandle // no arguments (an array would index by position)
		}
		v, repeated := handleArg(s.Args.Raw, w.KeyArg)
		if repeated {
			// The gate and the server could read different handles (first vs last).
			return "", "", KeyBadHandle
		}
		switch v.Type {
		case gjson.String:
			var exact bool
			if value, exact = jsonx.UnquoteExact(v.Raw); !exact {
				// Readers decode it differently: two handles could share one state.
				return "", "", KeyBadHandle
			}
		case gjson.Number:
			if !canonicalInt(v.Raw) {
				return "", "", KeyBadHandle // 1, 1.0 and 1e0 must not be three carts
			}
			value = v.Raw
		default:
			if v.Exists() && v.Type != gjson.Null {
				return "", "", KeyBadHandle
			}
			return "", "", KeyMissingHandle
		}
		if value == "" {
			return "", "", KeyMissingHandle
		}
		if len(value) > MaxScopeBytes {
			return "", "", KeyBadHandle
		}
		kind, handle = "arg."+w.KeyArg, value
	}
	principal := s.Principal
	if len(principal) > MaxScopeBytes {
		return "", "", KeyBadScope // cannot be scoped safely: the gate refuses
	}
	b := make([]byte, 0, 24+len(w.ID)+len(kind)+3*(len(principal)+len(value)))
	b = append(b, "stategate/v1/"...)
	b = append(b, w.ID...)
	b = append(b, '/')
	b = escape(b, kind)
	b = append(b, '/')
	b = escape(b, principal)
	b = append(b, '/')
	b = escape(b, value)
	return unsafe.String(unsafe.SliceData(b), len(b)), handle, KeyOK // b is not written again
}

// handleArg returns the member name of the arguments object raw, and whether it is
// repeated. A member whose name differs from name only in case counts as a repeat:
// servers that decode arguments into structs (Go's encoding/json) match member names
// case-insensitively, so {"cart_id":"a","CART_ID":"b"} is gated as cart a and run as b.
func handleArg(raw, name string) (gjson.Result, bool) {
	var v gjson.Result
	found := false
	it := jsonx.Object(raw, jsonx.SkipWS(raw, 0))
	for key, val, ok := it.Next(); ok; key, val, ok = it.Next() {
		if key != name {
			if strings.EqualFold(key, name) {
				return gjson.Result{}, true
			}
			continue
		}
		if found {
			return gjson.Result{}, true
		}
		found = true
		end := jsonx.SkipValue(raw, val)
		it.Skip(end)
		v = gjson.Parse(raw[val:end])
	}
	return v, false
}

// canonicalInt reports whether a JSON number is a whole number written the one way:
// -?(0|[1-9][0-9]*).
func canonicalInt(n string) bool {
	if n != "" && n[0] == '-' {
		n = n[1:]
	}
	if n == "" || (n[0] == '0' && len(n) > 1) {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}

// MaxScopeBytes bounds a session id, a state handle and a principal in a key.
const MaxScopeBytes = 512

// escape percent-encodes every byte outside [A-Za-z0-9._-].
func escape(dst []byte, s string) []byte {
	const hexDigits = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', hexDigits[c>>4], hexDigits[c&0xf])
	}
	return dst
}

// Notice reports something the host should log or count; it never fails a call.
type Notice struct {
	Code     string
	Workflow string
	Message  string
}

// Notice codes.
const (
	NoticeMigrated  = "STATE_MIGRATED"
	NoticeReset     = "STATE_RESET"
	NoticeNoSession = "NO_SESSION"
	NoticeIgnored   = "EVENT_IGNORED"
	NoticeFinal     = "FINAL_STATE"
)

// Current is a workflow's state as loaded for one request.
type Current struct {
	Workflow *config.Workflow
	Key      string // "" when the state cannot be stored (no session)
	Handle   string // the state-handle value for handle-keyed workflows
	Conf     config.Conf
	Seq      int64
	Healed   bool // the stored snapshot was migrated or reset and should be rewritten
	Status   KeyStatus
}

// Initial returns w's state before any event, as loaded for one request.
func Initial(w *config.Workflow, key string, st KeyStatus) Current {
	return Current{Workflow: w, Key: key, Conf: w.InitialConf(), Status: st}
}

// Value returns the state value of c (XState's snapshot.value) as JSON.
func (c *Current) Value() string {
	return string(c.Workflow.AppendValue(nil, &c.Conf))
}

// Describe returns the state of c for people.
func (c *Current) Describe() string {
	return c.Workflow.Describe(&c.Conf)
}

// Load reads the snapshot stored under a key (snap.Type == gjson.Null or !Exists for
// none) and returns the current state, with a notice when a rule had to be applied.
//
// # Notes
//
//   - "state" is XState's state value: a string (a child of the root with no children of
//     its own; every flat workflow's state, as before statecharts) or an object for
//     compound and parallel states. It must name a complete configuration.
func Load(w *config.Workflow, key string, snap gjson.Result) (Current, *Notice) {
	c := Initial(w, key, KeyOK)
	if !snap.Exists() || snap.Type == gjson.Null {
		return c, nil
	}
	st, wf, fp, sq := snapshotMembers(snap)
	if !snap.IsObject() || wf.Str != w.ID || (st.Type != gjson.String && !st.IsObject()) {
		c.Healed = true
		return c, &Notice{Code: NoticeReset, Workflow: w.ID,
			Message: "stored snapshot is not a snapshot of workflow " + strconv.Quote(w.ID) + "; restarted at " + strconv.Quote(w.Initial)}
	}
	c.Seq = seqOf(sq)
	conf, known := w.ParseValue(st)
	if fp.Str != w.Fingerprint {
		c.Healed = true
		if known {
			c.Conf = conf
			return c, &Notice{Code: NoticeMigrated, Workflow: w.ID,
				Message: "snapshot from a changed definition of workflow " + strconv.Quote(w.ID) + "; kept state " + stateName(st)}
		}
		return c, &Notice{Code: NoticeReset, Workflow: w.ID,
			Message: "snapshot from a changed definition of workflow " + strconv.Quote(w.ID) + " names state " + stateName(st) + ", which no longer exists; restarted at " + strconv.Quote(w.Initial)}
	}
	if !known {
		c.Healed = true
		return c, &Notice{Code: NoticeReset, Workflow: w.ID,
			Message: "snapshot names unknown state " + stateName(st) + " of workflow " + strconv.Quote(w.ID) + "; restarted at " + strconv.Quote(w.Initial)}
	}
	c.Conf = conf
	return c, nil
}

// snapshotMembers reads the members of a snapshot Load looks at, the first of each name
// (as gjson's Get would, one scan of the snapshot each), in one pass.
func snapshotMembers(snap gjson.Result) (state, workflow, fingerprint, seq gjson.Result) {
	raw := snap.Raw
	it := jsonx.Object(raw, jsonx.SkipWS(raw, 0))
	for k, at, ok := it.Next(); ok; k, at, ok = it.Next() {
		var dst *gjson.Result
		switch k {
		case "state":
			dst = &state
		case "workflow":
			dst = &workflow
		case "fingerprint":
			dst = &fingerprint
		case "seq":
			dst = &seq
		default:
			continue
		}
		end := jsonx.SkipValue(raw, at)
		it.Skip(end)
		if !dst.Exists() {
			*dst = gjson.Parse(raw[at:end])
		}
	}
	return
}

// stateName is a snapshot's state as a notice names it.
func stateName(st gjson.Result) string {
	if st.Type == gjson.String {
		return strconv.Quote(st.Str)
	}
	return st.Raw
}

// seqOf reads a snapshot's seq: an integer, 0 when it is not a number. Numbers outside
// int64 saturate, so every build (Go, TinyGo) reads the same value; gjson's Int converts
// them with an out-of-range float conversion, whose result differs between platforms.
func seqOf(r gjson.Result) int64 {
	if r.Type != gjson.Number {
		return 0
	}
	if i, err := strconv.ParseInt(r.Raw, 10, 64); err == nil {
		return i
	}
	switch f := r.Num; {
	case f >= 1<<63:
		return 1<<63 - 1
	case f <= -(1 << 63):
		return -1 << 63
	default:
		return int64(f)
	}
}

// AppendSnapshot appends the snapshot of workflow w in configuration c with sequence seq.
func AppendSnapshot(dst []byte, w *config.Workflow, c *config.Conf, seq int64) []byte {
	dst = append(dst, `{"workflow":`...)
	dst = jsonx.AppendString(dst, w.ID)
	dst = append(dst, `,"fingerprint":`...)
	dst = jsonx.AppendString(dst, w.Fingerprint)
	dst = append(dst, `,"state":`...)
	dst = w.AppendValue(dst, c)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	return append(dst, '}')
}

// SameTools reports whether configurations a and b of w allow the same set of tools.
func SameTools(w *config.Workflow, a, b *config.Conf) bool {
	for i := range w.Tools {
		if w.Tools[i].Allows(a) != w.Tools[i].Allows(b) {
			return false
		}
	}
	return true
}
