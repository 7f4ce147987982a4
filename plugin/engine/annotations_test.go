package engine

import (
	"strconv"
	"testing"

	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/tidwall/gjson"
)

// TestMemo: a stored record is read back without the entries the engine would not have
// written, a class only ever escalates, and the record stops growing at its bounds.
func TestMemo(t *testing.T) {
	m := newMemo(gjson.Parse(`{"tools":{"a":"read","b":"maybe","c":7,"d":"destructive","a":"write"}}`))
	if m.changed || len(m.names) != 2 || m.classes[0] != config.ClassRead || m.classes[1] != config.ClassDestructive {
		t.Fatalf("read back %v %v changed=%v", m.names, m.classes, m.changed)
	}
	m.see("d", config.ClassRead)
	m.see("a", config.ClassRead)
	if m.changed {
		t.Fatal("a less cautious or equal class changed the record")
	}
	m.see("a", config.ClassWrite)
	m.see("e", config.ClassRead)
	if !m.changed || m.classes[0] != config.ClassWrite {
		t.Fatalf("escalation not kept: %v %v", m.names, m.classes)
	}
	if got := string(m.appendJSON(nil)); got != `{"tools":{"a":"write","d":"destructive","e":"read"}}` {
		t.Errorf("record %s", got)
	}
	long := string(make([]byte, MaxRememberedName+1))
	m.see(long, config.ClassWrite)
	if len(m.names) != 3 {
		t.Error("a name over the bound was remembered")
	}
	for i := 0; len(m.names) < MaxRememberedTools+10 && i < MaxRememberedTools+10; i++ {
		m.see("t"+strconv.Itoa(i), config.ClassWrite)
	}
	if len(m.names) != MaxRememberedTools {
		t.Errorf("%d names remembered, bound %d", len(m.names), MaxRememberedTools)
	}
}

// TestDomainOf: the own domain of a name under separators, and everything for a name that
// makes no valid pattern.
func TestDomainOf(t *testing.T) {
	for _, tt := range []struct{ tool, sep, want string }{
		{"tasks.update", ".", "tasks.*"},
		{"a.b.c", ".", "a.b.*"},
		{"update", ".", "*"},
		{"github__create_issue", "__", "github__*"},
		{"a..b", ".", "**"},
		{".x", ".", "**"},
	} {
		if got := domainOf(tt.tool, tt.sep).String(); got != tt.want {
			t.Errorf("domainOf(%q, %q) = %q, want %q", tt.tool, tt.sep, got, tt.want)
		}
	}
}
