// Package config parses and validates the stategate configuration document.
//
// Validation is fail-fast and complete: Parse returns every error at once, each naming its
// path (`stateSync.policies[2].match: invalid segment "get*"`), and the warnings (shadowed
// and overlapping policies, unreachable states) beside them.
package config

import (
	"github.com/stategate/stategate/plugin/internal/glob"
)

// CacheControl is the hint a policy attaches to a tool description.
type CacheControl uint8

// The cache-control values of the configuration.
const (
	CacheNone CacheControl = iota
	CacheNoStore
	CacheImmutable
)

// String returns the configuration spelling of c.
func (c CacheControl) String() string {
	switch c {
	case CacheNoStore:
		return "no-store"
	case CacheImmutable:
		return "immutable"
	}
	return "none"
}

// Config is a validated configuration.
type Config struct {
	Separator       string
	Default         CacheControl
	Policies        []Policy
	Workflows       []*Workflow
	Limits          Limits
	PrincipalHeader string // request header that names the principal; "" when unset
	Cache           *Cache // nil: no response cache
	// FromAnnotations derives the policy of a tool no policy matches, and its timeout
	// category, from the annotations of the last tools/list (annotations.go).
	FromAnnotations bool
	Health          Health
	Approvals       []Approval // in document order; the first that applies wins

	bindings map[string][]Ref // tool name -> its bindings, in workflow order
	// boundEnds has bit len%64 of word last-byte set for every bound tool name: a name
	// whose bit is clear is bound to nothing, without hashing it (in the guest a map
	// lookup hashes and compares by calls, once per listed tool).
	boundEnds [256]uint64
}

// Policy is one entry of stateSync.policies.
type Policy struct {
	Match        glob.Pattern
	CacheControl CacheControl // the policy's own value, or the default when it sets none
	Invalidates  []glob.Pattern
	NoCache      bool // "cache": false: never cache the matched tools
	CacheTTLMs   int  // "cache": {"ttlMs": N}; 0 keeps cache.ttlMs
	OwnCache     bool // the policy sets cacheControl itself (else it inherits the default)
}

// KeyKind says where a workflow's state lives.
type KeyKind uint8

// The key kinds of a workflow.
const (
	KeySession  KeyKind = iota // per MCP session
	KeyArgument                // per state handle: the value of one tool argument
)

// Workflow is one validated statechart: a faithful subset of an XState v5 machine.
type Workflow struct {
	ID          string
	Initial     string // the root's initial state
	Key         KeyKind
	KeyArg      string    // argument name for KeyArgument
	States      []State   // every state node in XState's document order; States[0] is the root
	Tools       []Binding // in document order
	Fingerprint string    // hex digest of the canonical definition
	// Flat: every state is an atomic or final child of the root. Only a flat workflow may
	// name states with a '.' (read as whole names, never as paths).
	Flat bool

	stateIndex map[string]int // state path -> node index
	ids        map[string]int // "id" of a node (and the workflow id for the root) -> index
	start      *Conf          // the initial configuration
}

// State is one state node.
type State struct {
	Name     string // its key in its parent's states ("" for the root)
	Path     string // the keys from the root, joined by '.' ("" for the root)
	ID       string // its "id", "" when it sets none
	Parent   int    // -1 for the root
	End      int    // one past its last descendant: descendants are (index, End)
	Kind     Kind
	Final    bool   // Kind == KindFinal
	Initial  int    // compound: the index of the initial child
	Children []int  // in document order
	On       []Edge // in document order; one event may have several candidates
	OnDone   []Edge // candidates for the done event of a compound or parallel node
}

// Edge is one candidate transition out of a state.
type Edge struct {
	Event  string // "" for onDone
	Target string // as written; "" for a transition without a target
	To     int    // the target node, -1 for none
	Source int    // the node that owns it
	Guard  *Guard // nil: always passes
}

// Binding ties a tool to the states of one workflow in which it may run, and to the
// event its success fires ("" for none).
type Binding struct {
	Tool   string
	States []string // state paths as written
	Nodes  []int    // the nodes they name
	Event  string
}

// Ref points at one binding of a tool.
type Ref struct {
	Workflow *Workflow
	Binding  *Binding
}

// Limits holds the runtime limits. Zero means unlimited for MaxArraySize and
// MaxResponseBytes.
type Limits struct {
	MaxArraySize     int
	MaxResponseBytes int
	TimeoutMs        int
	Tools            []ToolLimits
	Categories       []Category // limits.categories, in document order
}

// ToolLimits overrides the global limits for tools matching Match; zero fields inherit.
type ToolLimits struct {
	Match            glob.Pattern
	MaxArraySize     int
	MaxResponseBytes int
	TimeoutMs        int
	Category         string // a name in limits.categories; "" for none
}

// DefaultTimeoutMs is the call timeout when the configuration names none.
const DefaultTimeoutMs = 30000

// Bindings returns the workflow bindings of tool, in workflow order.
func (c *Config) Bindings(tool string) []Ref {
	if tool == "" || c.boundEnds[tool[len(tool)-1]]&(1<<(len(tool)&63)) == 0 {
		return nil
	}
	return c.bindings[tool]
}

// StateIndex returns the node index of the state at path (as State reads it) and whether
// it exists.
func (w *Workflow) StateIndex(path string) (int, bool) {
	i, ok := w.stateIndex[path]
	return i, ok
}

// State returns the state at path (a dotted path; a whole name in a flat workflow) and
// whether it exists.
func (w *Workflow) State(path string) (*State, bool) {
	i, ok := w.stateIndex[path]
	if !ok {
		return nil, false
	}
	return &w.States[i], true
}

// ToolsIn returns the tools of w allowed in configuration c, in document order.
func (w *Workflow) ToolsIn(c *Conf) []string {
	var out []string
	for i := range w.Tools {
		if w.Tools[i].Allows(c) {
			out = append(out, w.Tools[i].Tool)
		}
	}
	return out
}

// For returns the limits that apply to tool: the first limits.tools entry matching it
// overrides the global ones. timeoutMs is that override or limits.timeoutMs, before
// categories: Config.Timeout applies the whole rule.
func (l *Limits) For(tool string) (maxArray, maxResponse, timeoutMs int) {
	maxArray, maxResponse, timeoutMs = l.MaxArraySize, l.MaxResponseBytes, l.TimeoutMs
	for i := range l.Tools {
		t := &l.Tools[i]
		if !t.Match.Match(tool) {
			continue
		}
		if t.MaxArraySize != 0 {
			maxArray = t.MaxArraySize
		}
		if t.MaxResponseBytes != 0 {
			maxResponse = t.MaxResponseBytes
		}
		if t.TimeoutMs != 0 {
			timeoutMs = t.TimeoutMs
		}
		break
	}
	return
}
