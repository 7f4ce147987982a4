package config

import (
	"strings"
	"testing"
)

func TestParse_approvals(t *testing.T) {
	c, problems := Parse([]byte(`{"version":1,"stateSync":{"fromAnnotations":true},"approvals":[
		{"match":"cart.pay","by":"operator","message":"Payments need a yes.","timeoutMs":60000},
		{"match":"files.**","by":"user","when":"destructive"},
		{"match":"files.*","by":"user"}]}`))
	if c == nil {
		t.Fatalf("problems: %v", problems)
	}
	want := []Approval{
		{By: ByOperator, Message: "Payments need a yes.", TimeoutMs: 60000},
		{By: ByUser, TimeoutMs: DefaultApprovalTimeoutMs, Destructive: true},
		{By: ByUser, TimeoutMs: DefaultApprovalTimeoutMs},
	}
	if len(c.Approvals) != len(want) {
		t.Fatalf("%d approvals", len(c.Approvals))
	}
	for i, w := range want {
		a := c.Approvals[i]
		if a.By != w.By || a.Message != w.Message || a.TimeoutMs != w.TimeoutMs || a.Destructive != w.Destructive {
			t.Errorf("approvals[%d] = %+v, want %+v", i, a, w)
		}
	}
	// First entry that applies wins; when: destructive lets other classes through.
	for _, tc := range []struct {
		tool       string
		class      Class
		want       int
		needsClass bool
	}{
		{"cart.pay", ClassRead, 0, false},
		{"files.rm", ClassDestructive, 1, true},
		{"files.rm", ClassUnknown, 1, true}, // never listed: the defaults say destructive
		{"files.cat", ClassRead, 2, true},
		{"files.a.b", ClassWrite, -1, true},
		{"other", ClassDestructive, -1, false},
	} {
		if got := c.Approval(tc.tool, tc.class); got != tc.want {
			t.Errorf("Approval(%q, %s) = %d, want %d", tc.tool, tc.class, got, tc.want)
		}
		if got := c.ApprovalNeedsClass(tc.tool); got != tc.needsClass {
			t.Errorf("ApprovalNeedsClass(%q) = %v, want %v", tc.tool, got, tc.needsClass)
		}
	}
}

func TestParse_approvalErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`"approvals":{}`, "approvals: must be an array"},
		{`"approvals":[1]`, "approvals[0]: must be an object"},
		{`"approvals":[{"match":"a","by":"user","ttl":1}]`, "approvals[0].ttl: unknown field"},
		{`"approvals":[{"match":"a","by":"user","by":"operator"}]`, "approvals[0].by: duplicate field"},
		{`"approvals":[{"by":"user"}]`, "approvals[0].match: required"},
		{`"approvals":[{"match":"a"}]`, "approvals[0].by: required"},
		{`"approvals":[{"match":"a","by":"admin"}]`, `approvals[0].by: must be "user" or "operator", got "admin"`},
		{`"approvals":[{"match":"a","by":true}]`, "approvals[0].by: must be a string"},
		{`"approvals":[{"match":"a*","by":"user"}]`, `approvals[0].match: invalid segment "a*"`},
		{`"approvals":[{"match":"a","by":"user","message":""}]`, "approvals[0].message: must be 1-512 bytes"},
		{`"approvals":[{"match":"a","by":"user","message":"` + strings.Repeat("é", 257) + `"}]`, "approvals[0].message: must be 1-512 bytes"},
		{`"approvals":[{"match":"a","by":"user","message":"a\u0007b"}]`, "approvals[0].message: must not contain control"},
		{`"approvals":[{"match":"a","by":"user","message":"a\tb"}]`, "approvals[0].message: must not contain control"},
		{`"approvals":[{"match":"a","by":"user","message":"a\u0085b"}]`, "approvals[0].message: must not contain control"},
		{`"approvals":[{"match":"a","by":"user","message":"a\u2067b"}]`, "approvals[0].message: must not contain control"},
		{`"approvals":[{"match":"a","by":"user","timeoutMs":999}]`, "approvals[0].timeoutMs: must be between 1000 and 86400000, got 999"},
		{`"approvals":[{"match":"a","by":"user","timeoutMs":1.5}]`, "approvals[0].timeoutMs: must be a whole number"},
		{`"approvals":[{"match":"a","by":"user","when":"always"}]`, `approvals[0].when: must be "destructive", got "always"`},
		{`"approvals":[{"match":"a","by":"user","when":"destructive"}]`, `approvals[0].when: "destructive" needs stateSync.fromAnnotations: true`},
		{`"stateSync":{"fromAnnotations":false},"approvals":[{"match":"a","by":"user","when":"destructive"}]`, `approvals[0].when: "destructive" needs stateSync.fromAnnotations: true`},
	} {
		c, problems := Parse([]byte(`{"version":1,` + tc.doc + `}`))
		if c != nil {
			t.Errorf("%s: accepted", tc.doc)
			continue
		}
		found := false
		for _, p := range problems {
			found = found || strings.HasPrefix(p.String(), tc.want)
		}
		if !found {
			t.Errorf("%s: problems %v, want %q", tc.doc, problems, tc.want)
		}
	}
}

func TestParse_approvalWarnings(t *testing.T) {
	_, problems := Parse([]byte(`{"version":1,"stateSync":{"fromAnnotations":true},"approvals":[
		{"match":"**","by":"user","when":"destructive"},
		{"match":"a.b","by":"operator"},
		{"match":"a.*","by":"user"},
		{"match":"x","by":"user","timeoutMs":0},
		{"match":"a.c","by":"user"}]}`))
	var warnings []string
	for _, p := range problems {
		if p.Warning {
			warnings = append(warnings, p.String())
		}
	}
	// An entry with when shadows nothing; the warning names the list index of the entry
	// that shadows, past an entry with errors.
	want := `approvals[4].match: shadowed: never applies, approvals[2] ("a.*") applies first to every name it covers`
	if len(warnings) != 1 || warnings[0] != want {
		t.Errorf("warnings %q, want [%q]", warnings, want)
	}
}
