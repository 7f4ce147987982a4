package config

import (
	"strconv"
	"unicode/utf8"

	"github.com/stategate/stategate/internal/termsafe"
	"github.com/stategate/stategate/plugin/internal/glob"
	"github.com/tidwall/gjson"
)

// Approval is one entry of the top-level "approvals" list: calls of the tools it matches
// wait for a person's yes before they run. The first entry that applies to a tool wins.
type Approval struct {
	Match     glob.Pattern
	By        ApprovalBy
	Message   string // "" for the engine's default text
	TimeoutMs int
	// Destructive ("when": "destructive"): the entry applies only to tools whose
	// annotations (or the annotation defaults) say destructive; it needs
	// stateSync.fromAnnotations, which keeps the classes the tool lists gave.
	Destructive bool
}

// ApprovalBy says who approves.
type ApprovalBy uint8

// Who approves a call.
const (
	ByUser     ApprovalBy = iota // the client's user, by elicitation
	ByOperator                   // an operator, through the admin API or the status page
)

func (b ApprovalBy) String() string {
	if b == ByOperator {
		return "operator"
	}
	return "user"
}

// Bounds of an approval entry.
const (
	DefaultApprovalTimeoutMs = 300000 // five minutes to answer
	MinApprovalTimeoutMs     = 1000
	MaxApprovalTimeoutMs     = 24 * 3600 * 1000
	MaxApprovalMessage       = 512 // bytes
)

// Approval returns the index of the approval entry that applies to tool, whose
// annotations gave class, or -1 for none. A tool of unknown class (never listed to the
// caller) is destructive: the MCP defaults of absent hints.
func (c *Config) Approval(tool string, class Class) int {
	for i := range c.Approvals {
		a := &c.Approvals[i]
		if a.Match.Match(tool) && (!a.Destructive || class == ClassDestructive || class == ClassUnknown) {
			return i
		}
	}
	return -1
}

// ApprovalNeedsClass reports whether which approval applies to tool depends on its class:
// an entry with "when" matches it before any entry without.
func (c *Config) ApprovalNeedsClass(tool string) bool {
	for i := range c.Approvals {
		a := &c.Approvals[i]
		if a.Match.Match(tool) {
			return a.Destructive
		}
	}
	return false
}

// approvals reads the top-level "approvals" list (after stateSync: "when" needs
// fromAnnotations).
func (p *parser) approvals(c *Config, r gjson.Result) {
	if !r.Exists() {
		return
	}
	if !r.IsArray() {
		p.errf("approvals", "must be an array")
		return
	}
	i := 0
	var at []int // the list index of each entry kept
	r.ForEach(func(_, item gjson.Result) bool {
		path := "approvals[" + strconv.Itoa(i) + "]"
		i++
		if !p.object(path, item, "match", "by", "message", "timeoutMs", "when") {
			return true
		}
		a := Approval{TimeoutMs: DefaultApprovalTimeoutMs}
		m, ok := p.pattern(path+".match", item.Get("match"), c.Separator)
		a.Match = m
		if by, bok := p.str(path+".by", item.Get("by")); !bok {
			ok = false
		} else if by == "operator" {
			a.By = ByOperator
		} else if by != "user" {
			p.errf(path+".by", "must be \"user\" or \"operator\", got %s", strconv.Quote(by))
			ok = false
		}
		if v := item.Get("message"); v.Exists() {
			msg, mok := p.str(path+".message", v)
			switch {
			case !mok:
				ok = false
			case msg == "" || len(msg) > MaxApprovalMessage:
				p.errf(path+".message", "must be 1-%s bytes", strconv.Itoa(MaxApprovalMessage))
				ok = false
			case hasControl(msg):
				p.errf(path+".message", "must not contain control, bidi or invisible format characters")
				ok = false
			default:
				a.Message = msg
			}
		}
		if v := item.Get("timeoutMs"); v.Exists() {
			n, tok := p.integer(path+".timeoutMs", v, MinApprovalTimeoutMs, MaxApprovalTimeoutMs)
			a.TimeoutMs, ok = n, ok && tok
		}
		if v := item.Get("when"); v.Exists() {
			w, wok := p.str(path+".when", v)
			switch {
			case !wok:
				ok = false
			case w != "destructive":
				p.errf(path+".when", "must be \"destructive\", got %s", strconv.Quote(w))
				ok = false
			case !c.FromAnnotations:
				p.errf(path+".when", "\"destructive\" needs stateSync.fromAnnotations: true (a tool's destructiveness comes from its annotations in the tool lists)")
				ok = false
			default:
				a.Destructive = true
			}
		}
		if !ok {
			return true
		}
		for k := range c.Approvals {
			if b := &c.Approvals[k]; !b.Destructive && glob.Covers(b.Match, a.Match) {
				p.warnf(path+".match", "shadowed: never applies, approvals[%s] (%s) applies first to every name it covers",
					strconv.Itoa(at[k]), strconv.Quote(b.Match.String()))
				break
			}
		}
		c.Approvals = append(c.Approvals, a)
		at = append(at, i-1)
		return true
	})
}

// hasControl reports whether s holds a character a person's screen could be misled by:
// a control, bidi or invisible format character, or a byte that is not UTF-8.
func hasControl(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || termsafe.Control(r) {
			return true
		}
		i += n
	}
	return false
}
