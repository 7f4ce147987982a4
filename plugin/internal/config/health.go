package config

import (
	"strconv"

	"github.com/stategate/stategate/plugin/internal/glob"
	"github.com/tidwall/gjson"
)

// Health is the validated "health" section: tool modes, auto-disable, probing and
// definition pinning. The zero value (Enabled false) means the section is absent.
type Health struct {
	Enabled       bool
	ByServer      bool // unit "server": the part of a tool name before the first separator
	Threshold     int  // consecutive failures that auto-disable a unit; 0 never
	RetryAfterMs  int  // wait before one probe call of an auto-disabled unit; 0 none
	CountIsError  bool // an isError result counts as a failure
	Tools         []HealthTools
	Modes         []HealthMode
	Pin           bool
	QuarantineNew bool // newTools "quarantine"
}

// HealthTools overrides the health settings for units matching Match; nil inherits.
type HealthTools struct {
	Match        glob.Pattern
	Threshold    *int
	RetryAfterMs *int
	CountIsError *bool
}

// HealthMode is one start-up mode of health.modes.
type HealthMode struct {
	Match glob.Pattern
	Mode  string
}

// DefaultThreshold is health.autoDisableThreshold when the section names none.
const DefaultThreshold = 3

// For returns the settings that apply to unit: the first matching tools entry wins.
func (h *Health) For(unit string) (threshold, retryAfterMs int, countIsError bool) {
	threshold, retryAfterMs, countIsError = h.Threshold, h.RetryAfterMs, h.CountIsError
	for i := range h.Tools {
		t := &h.Tools[i]
		if !t.Match.Match(unit) {
			continue
		}
		if t.Threshold != nil {
			threshold = *t.Threshold
		}
		if t.RetryAfterMs != nil {
			retryAfterMs = *t.RetryAfterMs
		}
		if t.CountIsError != nil {
			countIsError = *t.CountIsError
		}
		break
	}
	return
}

// StartMode returns the configured start-up mode of unit ("active" when no glob matches).
func (h *Health) StartMode(unit string) string {
	for i := range h.Modes {
		if h.Modes[i].Match.Match(unit) {
			return h.Modes[i].Mode
		}
	}
	return "active"
}

func (p *parser) health(c *Config, r gjson.Result) {
	if !r.Exists() {
		return
	}
	if !p.object("health", r, "unit", "autoDisableThreshold", "retryAfterMs", "countIsError", "tools", "modes", "pinDefinitions", "newTools") {
		return
	}
	h := &c.Health
	h.Enabled, h.Threshold, h.Pin = true, DefaultThreshold, true
	if v := r.Get("unit"); v.Exists() {
		if s, ok := p.str("health.unit", v); ok {
			switch s {
			case "tool":
			case "server":
				h.ByServer = true
			default:
				p.errf("health.unit", "must be \"tool\" or \"server\", got %s", strconv.Quote(s))
			}
		}
	}
	p.healthFields("health", r, &h.Threshold, &h.RetryAfterMs, &h.CountIsError)
	if v := r.Get("pinDefinitions"); v.Exists() {
		if b, ok := p.boolean("health.pinDefinitions", v); ok {
			h.Pin = b
		}
	}
	if v := r.Get("newTools"); v.Exists() {
		if s, ok := p.str("health.newTools", v); ok {
			switch s {
			case "allow":
			case "quarantine":
				h.QuarantineNew = true
			default:
				p.errf("health.newTools", "must be \"allow\" or \"quarantine\", got %s", strconv.Quote(s))
			}
		}
	}
	if h.QuarantineNew && !h.Pin {
		p.errf("health.newTools", "\"quarantine\" needs pinDefinitions true: new tools are told apart from the pinned set")
	}
	if t := r.Get("tools"); t.Exists() {
		if !t.IsObject() {
			p.errf("health.tools", "must be an object")
		} else {
			t.ForEach(func(k, v gjson.Result) bool {
				path := "health.tools[" + strconv.Quote(k.Str) + "]"
				g, err := glob.Compile(k.Str, c.Separator)
				if err != nil {
					p.errf(path, "%s", err.Error())
				}
				e := HealthTools{Match: g}
				if p.object(path, v, "autoDisableThreshold", "retryAfterMs", "countIsError") {
					var th, ra int
					var ce bool
					if p.healthFields(path, v, &th, &ra, &ce) {
						if v.Get("autoDisableThreshold").Exists() {
							e.Threshold = &th
						}
						if v.Get("retryAfterMs").Exists() {
							e.RetryAfterMs = &ra
						}
						if v.Get("countIsError").Exists() {
							e.CountIsError = &ce
						}
					}
				}
				h.Tools = append(h.Tools, e)
				return true
			})
		}
	}
	if m := r.Get("modes"); m.Exists() {
		if !m.IsObject() {
			p.errf("health.modes", "must be an object")
		} else {
			m.ForEach(func(k, v gjson.Result) bool {
				path := "health.modes[" + strconv.Quote(k.Str) + "]"
				g, err := glob.Compile(k.Str, c.Separator)
				if err != nil {
					p.errf(path, "%s", err.Error())
				}
				if s, ok := p.str(path, v); ok {
					switch s {
					case "active", "disabled", "quarantined":
						h.Modes = append(h.Modes, HealthMode{Match: g, Mode: s})
					case "auto_disabled":
						p.errf(path, "auto_disabled is set only by the gateway after failures; use \"disabled\"")
					default:
						p.errf(path, "must be \"active\", \"disabled\" or \"quarantined\", got %s", strconv.Quote(s))
					}
				}
				return true
			})
		}
	}
}

// healthFields reads autoDisableThreshold, retryAfterMs and countIsError of r; ok is false
// when any is invalid.
func (p *parser) healthFields(path string, r gjson.Result, threshold, retryAfterMs *int, countIsError *bool) bool {
	ok := true
	if v := r.Get("autoDisableThreshold"); v.Exists() {
		n, nok := p.integer(path+".autoDisableThreshold", v, 0, 1000000)
		*threshold, ok = n, ok && nok
	}
	if v := r.Get("retryAfterMs"); v.Exists() {
		n, nok := p.integer(path+".retryAfterMs", v, 0, 7*24*3600*1000)
		*retryAfterMs, ok = n, ok && nok
	}
	if v := r.Get("countIsError"); v.Exists() {
		b, bok := p.boolean(path+".countIsError", v)
		*countIsError, ok = b, ok && bok
	}
	return ok
}

func (p *parser) boolean(path string, r gjson.Result) (bool, bool) {
	if r.Type != gjson.True && r.Type != gjson.False {
		p.errf(path, "must be true or false")
		return false, false
	}
	return r.Type == gjson.True, true
}
