package session

import (
	"context"
	"testing"
)

// mapRecords is Records over a map.
type mapRecords map[string][]byte

func (m mapRecords) Load(_ context.Context, key string) ([]byte, error) { return m[key], nil }
func (m mapRecords) Create(_ context.Context, _, key string, v []byte) error {
	m[key] = v
	return nil
}

// A session is live for the principal that opened it only; a record from before sessions
// named their principal is any principal's.
func TestLive_theOpeningPrincipalOnly(t *testing.T) {
	ctx := context.Background()
	r := mapRecords{}
	alice, err := Issue(ctx, r, "alice")
	if err != nil {
		t.Fatal(err)
	}
	anon, _ := Issue(ctx, r, "")
	tricky, _ := Issue(ctx, r, `a"},"principal":"b`)
	for _, c := range []struct {
		id, principal string
		want          bool
	}{
		{alice, "alice", true},
		{alice, "bob", false},
		{alice, "", false},
		{alice, "alic", false},
		{anon, "", true},
		{anon, "alice", false},
		{tricky, `a"},"principal":"b`, true},
		{tricky, "b", false},
		{Prefix + "unknown", "alice", false},
	} {
		if got, err := Live(ctx, r, c.id, c.principal); got != c.want || err != nil {
			t.Errorf("Live(%q, %q) = %v %v, want %v", c.id, c.principal, got, err, c.want)
		}
	}
	old := Prefix + "fromBefore"
	r[RecordKey(old)] = []byte(`{"issuedMs":1}`)
	for _, p := range []string{"", "alice"} {
		if live, _ := Live(ctx, r, old, p); !live {
			t.Errorf("a record without a principal is not live for %q", p)
		}
	}
}
