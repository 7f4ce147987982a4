package exchange

import (
	"context"
	"errors"
	"time"

	"github.com/tidwall/gjson"
)

// The operator surface of tool health (modes, auto-disable, pinning). The admin API and
// the CLI call these methods on the Core; the engine's tool_health export decides, the
// core loads and stores (compare-and-set) and publishes the events.
//
// # Notes
//
//   - Known units are those in the engine's index (abi.HealthIndexKey), which every
//     tools/list that shows a new unit extends with compare-and-set: it lives in the
//     store, so every replica and a restarted gateway see the same set, and an operator
//     can act on a tool no client has listed on this replica.

// ErrHealthOff is returned by the operator methods when the configuration has no health
// section.
var ErrHealthOff = errors.New("tool health is not configured (no \"health\" section)")

// ToolStatus is what the gateway knows about one tool (or one server, with unit "server").
type ToolStatus struct {
	Name        string    `json:"name"`                  // the tool, or the server for unit "server"
	Unit        string    `json:"unit"`                  // "tool" or "server"
	Mode        string    `json:"mode"`                  // active, disabled, quarantined, auto_disabled
	Failures    int       `json:"failures"`              // consecutive failures counted so far
	Fingerprint string    `json:"fingerprint,omitempty"` // the pinned definition's SHA-256 (hex)
	LastError   string    `json:"lastError,omitempty"`
	Reason      string    `json:"reason,omitempty"` // the operator's reason for the current mode
	RetryAt     time.Time `json:"retryAt,omitzero"` // when an auto-disabled unit may be probed
	Changed     time.Time `json:"changed,omitzero"` // when the mode last changed
}

// ModeChange is the outcome of an operator action on one tool.
type ModeChange struct {
	Name  string `json:"name"`
	From  string `json:"from"`
	To    string `json:"to"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"` // the rule that refused it
	// Pending (approve) is what approving pins: tool -> definition fingerprint. A client
	// shows it and sends it back (Action.Pending), so what is approved is what was shown.
	Pending map[string]string `json:"pending,omitempty"`
}

// Tools lists every known tool (or server) with its health, in name order.
func (c *Core) Tools(ctx context.Context) ([]ToolStatus, error) {
	out, _, err := c.healthOp(ctx, opInput("status", Action{}, "", ""))
	if err != nil {
		return nil, err
	}
	list := []ToolStatus{}
	gjson.GetBytes(out, "units").ForEach(func(_, u gjson.Result) bool {
		rec := u.Get("record")
		ts := ToolStatus{Name: u.Get("name").Str, Unit: u.Get("unit").Str, Mode: u.Get("mode").Str,
			Failures: int(rec.Get("failures").Int()), LastError: rec.Get("lastError").Str, Reason: rec.Get("reason").Str,
			RetryAt: msTime(rec.Get("retryAt").Int()), Changed: msTime(rec.Get("changed").Int())}
		if ts.Unit == "tool" {
			ts.Fingerprint = rec.Get("pins." + gjson.Escape(ts.Name)).Str
		}
		list = append(list, ts)
		return true
	})
	return list, nil
}

// Action says what an operator action covers: one unit by its exact name (Tool), or the
// known units a glob selects (Match); exactly one of the two. With DryRun the action is
// only previewed: the answer says what it would change, nothing is stored or published.
//
// # Notes
//
//   - Tool names come from upstreams and are hostile input: a tool may be named "**" or
//     "a.*". An action on one tool addresses it by Tool, which is compared byte for byte
//     (never read as a glob, never case-folded); Match is for the operator's own globs,
//     which a client should preview (DryRun) and confirm before acting on them.
type Action struct {
	Tool   string // one unit (a tool; a server with unit "server") by its exact name
	Match  string // a glob over the known units
	DryRun bool   // answer what would change; change nothing
	// Pending (approve only) is what the operator was shown: a preview's ModeChange.Pending,
	// merged over its units. A unit is approved only while every definition it has pending
	// is the one shown (the server may list another between the preview and the approval:
	// it must not be approved unseen); nil approves whatever is pending.
	Pending map[string]string
}

// check refuses an action that names both a tool and a glob, or neither.
func (a Action) check() error {
	switch {
	case a.Tool != "" && a.Match != "":
		return errors.Join(ErrInvalidOperation, errors.New(`give "tool" (one tool, by its exact name) or "match" (a glob), not both`))
	case a.Tool == "" && a.Match == "":
		return errors.Join(ErrInvalidOperation, errors.New(`"tool" (one tool, by its exact name) or "match" (a glob) is required`))
	}
	return nil
}

// SetMode moves the unit a.Tool names, or every known unit a.Match selects, to mode, with
// the operator's reason; each unit's change is checked against the engine's transition
// table. Refused units are reported with the rule; the others are applied. An unknown
// mode, a bad glob, both a tool and a glob or neither, or a name or glob that covers no
// known unit wraps ErrInvalidOperation and changes nothing.
func (c *Core) SetMode(ctx context.Context, a Action, mode, reason string) ([]ModeChange, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	return c.operate(ctx, opInput("set_mode", a, mode, reason), a.DryRun)
}

// Approve accepts the current definition of the quarantined unit a.Tool names, or of every
// one a.Match selects: it is re-pinned and becomes active. With a.Pending, only the
// definitions the operator was shown are approved (rule approve-as-shown refuses the rest).
func (c *Core) Approve(ctx context.Context, a Action) ([]ModeChange, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	return c.operate(ctx, opInput("approve", a, "", "approved"), a.DryRun)
}
