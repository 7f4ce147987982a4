package health

import (
	"context"
	"errors"
	"time"

	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// The operator surface of tool health (modes, auto-disable, pinning). The admin API and
// the CLI call a Service's methods (through the core's Operator); the engine's
// tool_health export decides, the core loads and stores (compare-and-set, Engine), the
// Service publishes the events.
//
// # Notes
//
//   - Known units are those in the engine's index (abi.HealthIndexKey), which every
//     tools/list that shows a new unit extends with compare-and-set: it lives in the
//     store, so every replica and a restarted gateway see the same set, and an operator
//     can act on a tool no client has listed on this replica.

// ErrOff is returned by the operator methods when the configuration has no health
// section.
var ErrOff = errors.New("tool health is not configured (no \"health\" section)")

// ErrInvalidOperation is wrapped by the operator methods' errors that the operator's
// input caused (an unknown mode, a bad glob, a glob that matches no known tool): the
// admin API answers them 400.
var ErrInvalidOperation = errors.New("invalid tool health operation")

// Engine runs the engine's tool_health for a Service: the exchange core.
type Engine interface {
	// Run answers tool_health's answer to in (without its closing brace), loading the
	// state it asks for; with store, the answer's writes are stored (compare-and-set,
	// re-running on the state that won a conflict) and the stored answer is returned.
	// An input tool_health refuses wraps ErrInvalidOperation; without a health section,
	// ErrOff.
	Run(ctx context.Context, in []byte, store bool) ([]byte, error)
}

// Service is tool health's operator surface over one configuration's exchange.
type Service struct {
	engine      Engine
	publish     func(events.Event)
	listChanged func() // the visible tools changed: tell every client
}

// New returns the Service over engine; publish receives its events, listChanged is
// called when an action changed the visible tools.
func New(engine Engine, publish func(events.Event), listChanged func()) *Service {
	return &Service{engine: engine, publish: publish, listChanged: listChanged}
}

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
func (s *Service) Tools(ctx context.Context) ([]ToolStatus, error) {
	out, err := s.engine.Run(ctx, opInput("status", Action{}, "", ""), false)
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

// Check refuses an action that names both a tool and a glob, or neither.
func (a Action) Check() error {
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
func (s *Service) SetMode(ctx context.Context, a Action, mode, reason string) ([]ModeChange, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	return s.operate(ctx, opInput("set_mode", a, mode, reason), a.DryRun)
}

// Approve accepts the current definition of the quarantined unit a.Tool names, or of every
// one a.Match selects: it is re-pinned and becomes active. With a.Pending, only the
// definitions the operator was shown are approved (rule approve-as-shown refuses the rest).
func (s *Service) Approve(ctx context.Context, a Action) ([]ModeChange, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	return s.operate(ctx, opInput("approve", a, "", "approved"), a.DryRun)
}

// operate runs set_mode or approve and stores the result, publishing tool_state_changed
// for each change once stored; a dry run answers the changes and stores nothing.
func (s *Service) operate(ctx context.Context, in []byte, dryRun bool) ([]ModeChange, error) {
	out, err := s.engine.Run(ctx, in, !dryRun)
	if err != nil || dryRun {
		return changesOf(out), err
	}
	changes := changesOf(out)
	for _, mc := range changes {
		if mc.OK && mc.From != mc.To {
			reason := gjson.GetBytes(in[:len(in):len(in)], "reason").Str
			s.publish(events.Event{Type: events.EventToolStateChanged, Tool: mc.Name, OldState: mc.From, NewState: mc.To,
				Data: map[string]any{"reason": reason, "by": "operator"}})
		}
	}
	if gjson.GetBytes(out, "visibleChanged").Bool() {
		s.listChanged()
	}
	return changes, nil
}

// changesOf reads the changes of a set_mode or approve answer.
func changesOf(out []byte) []ModeChange {
	var changes []ModeChange
	gjson.GetBytes(out, "changes").ForEach(func(_, ch gjson.Result) bool {
		mc := ModeChange{Name: ch.Get("name").Str, From: ch.Get("from").Str, To: ch.Get("to").Str,
			OK: ch.Get("ok").Bool(), Error: ch.Get("error").Str}
		if p := ch.Get("pending"); p.IsObject() {
			mc.Pending = map[string]string{}
			p.ForEach(func(k, fp gjson.Result) bool {
				if tool, exact := jsonx.UnquoteExact(k.Raw); exact {
					mc.Pending[tool] = fp.Str
				}
				return true
			})
		}
		changes = append(changes, mc)
		return true
	})
	return changes
}

// opInput builds a tool_health input (without its closing brace): the unit a.Tool names
// goes as "name" (exact), a glob as "match".
func opInput(op string, a Action, mode, reason string) []byte {
	in := append([]byte(`{"op":`), jsonx.AppendString(nil, op)...)
	if a.Tool != "" {
		in = append(in, `,"name":`...)
		in = jsonx.AppendString(in, a.Tool)
	}
	if a.Match != "" {
		in = append(in, `,"match":`...)
		in = jsonx.AppendString(in, a.Match)
	}
	if mode != "" {
		in = append(in, `,"mode":`...)
		in = jsonx.AppendString(in, mode)
	}
	if reason != "" {
		in = append(in, `,"reason":`...)
		in = jsonx.AppendString(in, reason)
	}
	if a.Pending != nil {
		in = append(in, `,"pending":{`...)
		first := true
		for tool, fp := range a.Pending {
			if !first {
				in = append(in, ',')
			}
			first = false
			in = append(jsonx.AppendString(in, tool), ':')
			in = jsonx.AppendString(in, fp)
		}
		in = append(in, '}')
	}
	return AppendNow(in)
}

func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
