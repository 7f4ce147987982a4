package config

import (
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// MaxNodes bounds the state nodes of a statechart, its root included: a configuration is
// then a fixed-size bit set (Conf), copied and compared without allocating. A flat
// workflow (no compound or parallel state) may have any number of states: it has one
// active state besides the root, which Conf holds apart when its index is past the bits.
const MaxNodes = 256

// Kind is the type of a state node, as XState's StateNode.type.
type Kind uint8

// The kinds of state node.
const (
	KindAtomic Kind = iota
	KindCompound
	KindParallel
	KindFinal
)

// String returns XState's name of k.
func (k Kind) String() string {
	switch k {
	case KindCompound:
		return "compound"
	case KindParallel:
		return "parallel"
	case KindFinal:
		return "final"
	}
	return "atomic"
}

// Conf is a configuration: the set of active state nodes, by index. Nodes below MaxNodes
// are bits; one node at or past it (a state of a large flat workflow) is held in far.
type Conf struct {
	bits [MaxNodes / 64]uint64
	far  int // 0: none (the root is never far)
}

// Has reports whether node i is active.
func (c *Conf) Has(i int) bool {
	if i >= MaxNodes {
		return c.far == i
	}
	return i >= 0 && c.bits[i>>6]&(1<<(uint(i)&63)) != 0
}

// Set marks node i active.
func (c *Conf) Set(i int) {
	switch {
	case i >= MaxNodes:
		c.far = i
	case i >= 0:
		c.bits[i>>6] |= 1 << (uint(i) & 63)
	}
}

// AnyIn reports whether a node in [from, to) is active.
func (c *Conf) AnyIn(from, to int) bool {
	for i := from; i < to && i < MaxNodes; i++ {
		if c.Has(i) {
			return true
		}
	}
	return c.far != 0 && c.far >= from && c.far < to
}

// Or adds the nodes of x to c.
func (c *Conf) Or(x *Conf) {
	for i := range c.bits {
		c.bits[i] |= x.bits[i]
	}
	if x.far != 0 {
		c.far = x.far
	}
}

// AndNot removes the nodes of x from c.
func (c *Conf) AndNot(x *Conf) {
	for i := range c.bits {
		c.bits[i] &^= x.bits[i]
	}
	if x.far != 0 && x.far == c.far {
		c.far = 0
	}
}

// Intersects reports whether c and x share a node.
func (c *Conf) Intersects(x *Conf) bool {
	for i := range c.bits {
		if c.bits[i]&x.bits[i] != 0 {
			return true
		}
	}
	return c.far != 0 && c.far == x.far
}

// Guard is a transition guard of the fixed vocabulary: a test of the call's arguments or
// result, or a combination of guards.
type Guard struct {
	Kind   GuardKind
	Path   []string // argument/result: the dotted path, split
	Op     Op
	Value  Scalar   // eq, ne, lt, lte, gt, gte
	Values []Scalar // in
	Guards []Guard  // and, or (any number); not (exactly one)
}

// GuardKind says what a guard tests.
type GuardKind uint8

// The guard kinds: XState guard types.
const (
	GuardArgument GuardKind = iota + 1
	GuardResult
	GuardAnd
	GuardOr
	GuardNot
)

// Op is the comparison of an argument or result guard.
type Op uint8

// The comparisons.
const (
	OpEq Op = iota + 1
	OpNe
	OpLt
	OpLte
	OpGt
	OpGte
	OpIn
	OpExists
)

var opNames = [...]string{OpEq: "eq", OpNe: "ne", OpLt: "lt", OpLte: "lte", OpGt: "gt", OpGte: "gte", OpIn: "in", OpExists: "exists"}

// String returns the configuration spelling of o.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return ""
}

// Symbol returns o as an operator for messages ("<=" for lte).
func (o Op) Symbol() string {
	switch o {
	case OpEq:
		return "="
	case OpNe:
		return "!="
	case OpLt:
		return "<"
	case OpLte:
		return "<="
	case OpGt:
		return ">"
	case OpGte:
		return ">="
	case OpIn:
		return "in"
	}
	return "exists"
}

// Scalar is a JSON string, number, boolean or null.
type Scalar struct {
	Type gjson.Type
	Str  string
	Num  float64
	Raw  string // as written
}

// Equal reports whether the JSON value r is the scalar s (JavaScript's ===).
func (s *Scalar) Equal(r gjson.Result) bool {
	if r.Type != s.Type {
		return false
	}
	switch r.Type {
	case gjson.String:
		return r.Str == s.Str
	case gjson.Number:
		return parseNumber(r.Raw) == s.Num
	}
	return true // null, true, false
}

// Node returns node i, or nil when there is none.
func (w *Workflow) Node(i int) *State {
	if i < 0 || i >= len(w.States) {
		return nil
	}
	return &w.States[i]
}

// IsDescendant reports whether node a is a proper descendant of node b.
func (w *Workflow) IsDescendant(a, b int) bool {
	return b >= 0 && b < len(w.States) && a > b && a < w.States[b].End
}

// InitialConf returns the configuration the workflow starts in.
func (w *Workflow) InitialConf() Conf {
	if w.start == nil {
		c := w.initialConf()
		return c
	}
	return *w.start
}

// Start returns the configuration the workflow starts in, shared: do not change it.
func (w *Workflow) Start() *Conf {
	if w.start == nil {
		c := w.initialConf()
		return &c
	}
	return w.start
}

// SetStart sets the configuration w starts in (chart.Start: the default entry and the
// done events it raises).
func (w *Workflow) SetStart(c Conf) { w.start = &c }

func (w *Workflow) initialConf() Conf {
	var c Conf
	w.EnterDefault(&c, 0)
	return c
}

// EnterDefault marks node i and its default descendants active: the initial child of a
// compound node, every region of a parallel one.
func (w *Workflow) EnterDefault(c *Conf, i int) { w.enterDefault(i, c.Set) }

func (w *Workflow) enterDefault(i int, set func(int)) {
	for n := 0; n <= len(w.States); n++ { // bounded: a chain of initial children
		s := w.Node(i)
		if s == nil {
			return
		}
		set(i)
		switch s.Kind {
		case KindCompound:
			i = s.Initial
			continue
		case KindParallel:
			for _, ch := range s.Children {
				w.enterDefault(ch, set)
			}
		}
		return
	}
}

// ParseValue reads a state value (XState's: a string or an object) into a configuration;
// ok is false when it is not a complete, legal configuration of w.
func (w *Workflow) ParseValue(v gjson.Result) (Conf, bool) {
	var c Conf
	c.Set(0)
	ok := w.valueOf(&c, 0, v, 0)
	return c, ok
}

// valueOf reads v, the value of the active node i (compound or parallel), into c.
func (w *Workflow) valueOf(c *Conf, i int, v gjson.Result, depth int) bool {
	s := w.Node(i)
	if s == nil || depth > len(w.States) {
		return false
	}
	switch s.Kind {
	case KindCompound:
		if v.Type == gjson.String {
			ch := w.child(i, v.Str)
			if ch < 0 || !w.States[ch].Leaf() {
				return false
			}
			c.Set(ch)
			return true
		}
		if !v.IsObject() {
			return false
		}
		n, ok := 0, true
		v.ForEach(func(k, sub gjson.Result) bool {
			n++
			ch := w.child(i, k.Str)
			if n > 1 || ch < 0 || w.States[ch].Leaf() {
				ok = false
				return false
			}
			c.Set(ch)
			ok = w.valueOf(c, ch, sub, depth+1)
			return ok
		})
		return ok && n == 1
	case KindParallel:
		if !v.IsObject() {
			return false
		}
		n, ok := 0, true
		v.ForEach(func(k, sub gjson.Result) bool {
			ch := w.child(i, k.Str)
			if ch < 0 || c.Has(ch) {
				ok = false
				return false
			}
			n++
			c.Set(ch)
			if w.States[ch].Leaf() {
				ok = sub.IsObject() && len(sub.Raw) > 0 && isEmptyObject(sub.Raw)
			} else {
				ok = w.valueOf(c, ch, sub, depth+1)
			}
			return ok
		})
		return ok && n == len(s.Children)
	}
	return false
}

func isEmptyObject(raw string) bool {
	n := 0
	gjson.Parse(raw).ForEach(func(_, _ gjson.Result) bool { n++; return false })
	return n == 0
}

// child returns the index of node i's child named key, or -1.
func (w *Workflow) child(i int, key string) int {
	s := w.Node(i)
	if s == nil {
		return -1
	}
	if i == 0 && w.stateIndex != nil {
		// A child of the root: its path is its name (a large flat workflow is not scanned).
		if n, ok := w.stateIndex[key]; ok && w.States[n].Parent == 0 {
			return n
		}
		if len(w.States) > 1 && w.States[len(w.States)-1].Path != "" {
			return -1 // paths are complete: the index is the whole answer
		}
	}
	for _, ch := range s.Children {
		if w.States[ch].Name == key {
			return ch
		}
	}
	return -1
}

// Leaf reports whether s has no children (atomic or final).
func (s *State) Leaf() bool { return len(s.Children) == 0 }

// AppendValue appends the state value of c: XState's snapshot.value.
func (w *Workflow) AppendValue(dst []byte, c *Conf) []byte {
	return w.appendValue(dst, c, 0)
}

func (w *Workflow) appendValue(dst []byte, c *Conf, i int) []byte {
	s := w.Node(i)
	if s == nil {
		return append(dst, "{}"...)
	}
	switch s.Kind {
	case KindCompound:
		for _, ch := range s.Children {
			if !c.Has(ch) {
				continue
			}
			if w.States[ch].Leaf() {
				return jsonx.AppendString(dst, w.States[ch].Name)
			}
			dst = append(dst, '{')
			dst = jsonx.AppendString(dst, w.States[ch].Name)
			dst = append(dst, ':')
			dst = w.appendValue(dst, c, ch)
			return append(dst, '}')
		}
		return append(dst, "{}"...)
	case KindParallel:
		dst = append(dst, '{')
		n := 0
		for _, ch := range s.Children {
			if !c.Has(ch) {
				continue
			}
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			dst = jsonx.AppendString(dst, w.States[ch].Name)
			dst = append(dst, ':')
			dst = w.appendValue(dst, c, ch)
		}
		return append(dst, '}')
	}
	return append(dst, "{}"...)
}

// Leaves returns the paths of the active atomic and final nodes of c, in document
// order: a configuration as people read it.
func (w *Workflow) Leaves(c *Conf) []string {
	var out []string
	for i := 1; i < len(w.States); i++ {
		if c.Has(i) && w.States[i].Leaf() {
			out = append(out, w.States[i].Path)
		}
	}
	return out
}

// Describe returns c for people: "paid" for a flat workflow, the active leaves' paths
// otherwise ("fulfilment.shipping.packed and fulfilment.invoicing.sent").
func (w *Workflow) Describe(c *Conf) string {
	leaves := w.Leaves(c)
	switch len(leaves) {
	case 0:
		return ""
	case 1:
		return leaves[0]
	}
	s := ""
	for i, l := range leaves {
		switch {
		case i == 0:
		case i == len(leaves)-1:
			s += " and "
		default:
			s += ", "
		}
		s += l
	}
	return s
}

// Done reports whether c has reached a final child of the root: the workflow has
// finished, and no event moves it.
func (w *Workflow) Done(c *Conf) bool {
	if len(w.States) == 0 {
		return false
	}
	for _, ch := range w.States[0].Children {
		if c.Has(ch) && w.States[ch].Kind == KindFinal {
			return true
		}
	}
	return false
}

// Allows reports whether b permits its tool in configuration c: any of its states matches.
func (b *Binding) Allows(c *Conf) bool {
	for _, n := range b.Nodes {
		if c.Has(n) {
			return true
		}
	}
	return false
}
