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
}

// Tools lists every known tool (or server) with its health, in name order.
func (c *Core) Tools(ctx context.Context) ([]ToolStatus, error) {
	out, _, err := c.healthOp(ctx, opInput("status", "", "", ""))
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

// SetMode moves every known unit matching the glob match to mode, with the operator's
// reason; each unit's change is checked against the engine's transition table. Refused
// units are reported with the rule; the others are applied. An unknown mode, a bad glob
// or one that matches no known unit wraps ErrInvalidOperation and changes nothing.
func (c *Core) SetMode(ctx context.Context, match, mode, reason string) ([]ModeChange, error) {
	if match == "" {
		return nil, errors.Join(ErrInvalidOperation, errors.New("match is required: a tool name or a glob"))
	}
	return c.operate(ctx, opInput("set_mode", match, mode, reason))
}

// Approve accepts the current definition of every quarantined unit matching match: it is
// re-pinned and becomes active.
func (c *Core) Approve(ctx context.Context, match string) ([]ModeChange, error) {
	if match == "" {
		return nil, errors.Join(ErrInvalidOperation, errors.New("match is required: a tool name or a glob"))
	}
	return c.operate(ctx, opInput("approve", match, "", "approved"))
}
