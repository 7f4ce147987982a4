package filestate

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/kvstate"
)

func open(t *testing.T, dir, unique string) *Dir {
	t.Helper()
	d, err := Open(dir, unique)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCAS(t *testing.T) {
	d := open(t, t.TempDir(), "a")
	v := func(s string) kvstate.Value { return kvstate.Value{B: []byte(s), Ok: true} }
	for _, tc := range []struct {
		name       string
		prev, next kvstate.Value
		want       bool
		after      kvstate.Value
	}{
		{"create_when_absent", kvstate.Value{}, v("1"), true, v("1")},
		{"create_again_fails", kvstate.Value{}, v("2"), false, v("1")},
		{"replace_with_the_value_read", v("1"), v("2"), true, v("2")},
		{"replace_with_a_stale_value_fails", v("1"), v("3"), false, v("2")},
		{"empty_value_is_a_value", v("2"), v(""), true, v("")},
		{"delete", v(""), kvstate.Value{}, true, kvstate.Value{}},
		{"delete_absent_with_absent", kvstate.Value{}, kvstate.Value{}, true, kvstate.Value{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := d.CAS("", "stategate/v1/k", tc.prev, tc.next)
			if err != nil || ok != tc.want {
				t.Fatalf("CAS = %v, %v; want %v", ok, err, tc.want)
			}
			got, err := d.Get([]string{"stategate/v1/k"})
			if err != nil || got[0].Ok != tc.after.Ok || string(got[0].B) != string(tc.after.B) {
				t.Fatalf("after: %+v, %v; want %+v", got, err, tc.after)
			}
		})
	}
}

// TestCAS_concurrent: increments through compare-and-set from many callers, each with a
// Dir of its own on one directory (as guest instances are): none is lost or doubled.
func TestCAS_concurrent(t *testing.T) {
	dir := t.TempDir()
	const callers, each = 8, 50
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := open(t, dir, "c"+strconv.Itoa(c))
			for range each {
				for {
					got, err := d.Get([]string{"n"})
					if err != nil {
						t.Error(err)
						return
					}
					n := 0
					if got[0].Ok {
						n, _ = strconv.Atoi(string(got[0].B))
					}
					ok, err := d.CAS("", "n", got[0], kvstate.Value{B: []byte(strconv.Itoa(n + 1)), Ok: true})
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	got, _ := open(t, dir, "r").Get([]string{"n"})
	if string(got[0].B) != strconv.Itoa(callers*each) {
		t.Fatalf("counter %q after %d increments", got[0].B, callers*each)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "[lt]-*"))
	if len(left) != 0 {
		t.Fatalf("lock or temporary files left: %v", left)
	}
}

// TestLock_staleIsBroken: a lock file whose holder never removed it (a trap mid-CAS) is
// broken once past its expiry; one within it is waited for, then reported.
func TestLock_staleIsBroken(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir, "a")
	lock := filepath.Join(dir, "l-"+name("k"))
	past := strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10)
	if err := os.WriteFile(lock, []byte(past), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.CAS("", "k", kvstate.Value{}, kvstate.Value{B: []byte("v"), Ok: true}); !ok || err != nil {
		t.Fatalf("CAS past a stale lock = %v, %v", ok, err)
	}
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	if err := os.WriteFile(lock, []byte(future), 0o600); err != nil {
		t.Fatal(err)
	}
	d.Wait = 50 * time.Millisecond
	if _, err := d.CAS("", "k", kvstate.Value{B: []byte("v"), Ok: true}, kvstate.Value{}); err == nil {
		t.Fatal("CAS went past a lock held by another caller")
	}
}

func TestOpen_refuses(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o600)
	for _, p := range []string{"", filepath.Join(t.TempDir(), "missing"), file} {
		if _, err := Open(p, "x"); err == nil {
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}
