package exchange

import (
	"context"
	"errors"
	"time"
)

// The operator surface of tool health (modes, auto-disable, pinning). The admin API and
// the CLI call these methods on the Core; the health feature implements them.

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

// Tools lists every known tool (or server) with its health.
func (c *Core) Tools(ctx context.Context) ([]ToolStatus, error) { return nil, ErrHealthOff }

// SetMode moves every known unit matching the glob match to mode, with the operator's
// reason; each unit's change is checked against the engine's transition table.
func (c *Core) SetMode(ctx context.Context, match, mode, reason string) ([]ModeChange, error) {
	return nil, ErrHealthOff
}

// Approve accepts the current definition of every quarantined unit matching match: it is
// re-pinned and becomes active.
func (c *Core) Approve(ctx context.Context, match string) ([]ModeChange, error) {
	return nil, ErrHealthOff
}
