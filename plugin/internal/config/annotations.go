package config

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// Class is what a tool's annotations say it does, from the least to the most cautious
// reading. The names are also the timeout categories the annotations select.
type Class uint8

// The classes. ClassUnknown: the tool was not seen in a list (or annotations are not used).
const (
	ClassUnknown     Class = iota
	ClassRead              // readOnlyHint true
	ClassWrite             // readOnlyHint false (or absent), destructiveHint false
	ClassDestructive       // readOnlyHint false (or absent), destructiveHint true (or absent)
)

// String returns the class's name, which is also the name of its timeout category.
func (c Class) String() string {
	switch c {
	case ClassRead:
		return "read"
	case ClassWrite:
		return "write"
	case ClassDestructive:
		return "destructive"
	}
	return ""
}

// ClassNamed returns the class called name (ClassUnknown for any other name).
func ClassNamed(name string) Class {
	for c := ClassRead; c <= ClassDestructive; c++ {
		if c.String() == name {
			return c
		}
	}
	return ClassUnknown
}

// ClassOf classifies a tool from its annotation hints (1 true, 0 false, -1 absent or not
// a boolean), with the MCP schema's defaults for an absent hint: readOnlyHint false,
// destructiveHint true.
func ClassOf(readOnly, destructive int8) Class {
	switch {
	case readOnly == 1:
		return ClassRead
	case destructive == 0:
		return ClassWrite
	}
	return ClassDestructive
}

// Category is one entry of limits.categories: a named timeout.
type Category struct {
	Name      string
	TimeoutMs int
}

// TimeoutSource says where a tool's timeout comes from.
type TimeoutSource uint8

// The timeout sources, in precedence order.
const (
	FromTool     TimeoutSource = iota // limits.tools[glob].timeoutMs
	FromCategory                      // limits.tools[glob].category
	FromClass                         // the category its annotations select (fromAnnotations)
	FromDefault                       // limits.timeoutMs
)

// Timeout returns the timeout of tool, whose annotations gave class, and where it comes
// from: the first limits.tools entry matching the tool (its timeoutMs, then its category),
// then the category named after the class (when fromAnnotations is on and it exists),
// then limits.timeoutMs. entry is the matching limits.tools index (-1 for none), cat the
// category applied ("" for none).
func (c *Config) Timeout(tool string, class Class) (ms int, src TimeoutSource, entry int, cat string) {
	l := &c.Limits
	entry = -1
	for i := range l.Tools {
		t := &l.Tools[i]
		if !t.Match.Match(tool) {
			continue
		}
		entry = i
		if t.TimeoutMs != 0 {
			return t.TimeoutMs, FromTool, i, ""
		}
		if ms, ok := l.category(t.Category); ok {
			return ms, FromCategory, i, t.Category
		}
		break
	}
	if c.FromAnnotations {
		if ms, ok := l.category(class.String()); ok {
			return ms, FromClass, entry, class.String()
		}
	}
	return l.TimeoutMs, FromDefault, entry, ""
}

// ClassMatters reports whether tool's timeout may depend on its annotations: nothing
// explicit decides it first, and a category named after a class exists.
func (c *Config) ClassMatters(tool string) bool {
	if !c.FromAnnotations {
		return false
	}
	_, src, _, _ := c.Timeout(tool, ClassUnknown)
	if src == FromTool || src == FromCategory {
		return false
	}
	for cl := ClassRead; cl <= ClassDestructive; cl++ {
		if _, ok := c.Limits.category(cl.String()); ok {
			return true
		}
	}
	return false
}

func (l *Limits) category(name string) (int, bool) {
	if name == "" {
		return 0, false
	}
	for _, cat := range l.Categories {
		if cat.Name == name {
			return cat.TimeoutMs, true
		}
	}
	return 0, false
}

// MaxTimeoutMs is the longest timeout any call can get: limits.timeoutMs, every per-tool
// override and every category (an upper bound).
func (l *Limits) MaxTimeoutMs() int {
	longest := l.TimeoutMs
	for _, t := range l.Tools {
		longest = max(longest, t.TimeoutMs)
	}
	for _, cat := range l.Categories {
		longest = max(longest, cat.TimeoutMs)
	}
	return longest
}

func (p *parser) fromAnnotations(c *Config, r gjson.Result) {
	if !r.Exists() {
		return
	}
	if r.Type != gjson.True && r.Type != gjson.False {
		p.errf("stateSync.fromAnnotations", "must be true or false")
		return
	}
	c.FromAnnotations = r.Type == gjson.True
}

// categories reads limits.categories: name -> {"timeoutMs"}.
func (p *parser) categories(c *Config, r gjson.Result) {
	if !r.Exists() {
		return
	}
	if !r.IsObject() {
		p.errf("limits.categories", "must be an object")
		return
	}
	r.ForEach(func(k, v gjson.Result) bool {
		path := "limits.categories[" + strconv.Quote(k.Str) + "]"
		if !validID(k.Str) {
			p.errf(path, "a category name must be 1-64 characters of [A-Za-z0-9_.-]")
			return true
		}
		if _, dup := c.Limits.category(k.Str); dup {
			p.errf(path, "duplicate category")
			return true
		}
		if !p.object(path, v, "timeoutMs") {
			return true
		}
		t := v.Get("timeoutMs")
		if !t.Exists() {
			p.errf(path+".timeoutMs", "required")
			return true
		}
		if n, ok := p.integer(path+".timeoutMs", t, 1, 24*3600*1000); ok {
			c.Limits.Categories = append(c.Limits.Categories, Category{Name: k.Str, TimeoutMs: n})
		}
		return true
	})
}

// toolCategory reads limits.tools[glob].category, which must name a category.
func (p *parser) toolCategory(c *Config, path string, r gjson.Result) string {
	if !r.Exists() {
		return ""
	}
	name, ok := p.str(path+".category", r)
	if !ok {
		return ""
	}
	if _, found := c.Limits.category(name); !found {
		p.errf(path+".category", "names no category in limits.categories: %s", strconv.Quote(name))
		return ""
	}
	return name
}
