package toollist

import (
	"reflect"
	"testing"

	"github.com/tidwall/gjson"
)

// TestNames: Listed keeps the first names up to its bound, Seen keeps what was listed to
// anyone, and Names is their union, sorted, without repeats.
func TestNames(t *testing.T) {
	l, s := NewListed(2), NewSeen()
	l.Add(gjson.Parse(`["b","a","c",7]`))
	if !l.Has("a") || !l.Has("b") || l.Has("c") || l.Len() != 2 {
		t.Fatalf("listed past its bound of 2: a %v b %v c %v, %d names", l.Has("a"), l.Has("b"), l.Has("c"), l.Len())
	}
	if gen, done := s.Add(gjson.Parse(`["c","a"]`), false); gen != 2 || done {
		t.Fatalf("Seen.Add = %d, %v; want 2, false", gen, done)
	}
	if gen, done := s.Add(gjson.Parse(`["c","a"]`), true); gen != 2 || !done || s.Len() != 2 || !s.Has("c") {
		t.Fatalf("Seen.Add again = %d, %v (%d names)", gen, done, s.Len())
	}
	if got := Names(l, s); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("Names = %v", got)
	}
	k := NewKnown(1)
	k.Set("s1", []byte(`["a"]`))
	k.Set("s2", []byte(`["b"]`))
	if k.Get("s1") != nil || string(k.Get("s2")) != `["b"]` || k.Len() != 1 {
		t.Fatalf("Known past its bound of 1: s1 %s, s2 %s", k.Get("s1"), k.Get("s2"))
	}
	k.Forget("s2")
	if k.Get("s2") != nil {
		t.Fatal("a forgotten session's list is kept")
	}
}
