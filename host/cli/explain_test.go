package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const approvalTools = `{"tools":[
 {"name":"files.read","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},
 {"name":"delete_file","inputSchema":{"type":"object"}},
 {"name":"cart.pay","inputSchema":{"type":"object"},"annotations":{"destructiveHint":false}}]}`

const approvalConfig = `{"version":1,"stateSync":{"fromAnnotations":true},"approvals":[
 {"match":"cart.pay","by":"operator","timeoutMs":60000},
 {"match":"admin.*","by":"operator"},
 {"match":"**","by":"user","when":"destructive"}]}`

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExplain_approvals: explain names, per listed tool, the approval its calls wait for
// and the entry it comes from; a tool its annotations call read-only passes a
// when: destructive entry.
func TestExplain_approvals(t *testing.T) {
	cfg, tools := writeTemp(t, "c.json", approvalConfig), writeTemp(t, "t.json", approvalTools)
	var out bytes.Buffer
	if err := Explain(context.Background(), cfg, tools, "", "table", &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.HasSuffix(strings.TrimSpace(lines[0]), "APPROVAL") {
		t.Errorf("header: %q", lines[0])
	}
	for tool, want := range map[string]string{
		"files.read":  "  -",
		"delete_file": "user, 300000 ms (approvals[2], when destructive)",
		"cart.pay":    "operator, 60000 ms (approvals[0])",
	} {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, tool+" ") {
				found = true
				if !strings.HasSuffix(strings.TrimRight(l, " "), want) {
					t.Errorf("%s: %q, want it to end in %q", tool, l, want)
				}
			}
		}
		if !found {
			t.Errorf("no row for %s:\n%s", tool, out.String())
		}
	}
	if !strings.Contains(out.String(), `warning: approvals[1].match: no listed tool matches "admin.*"`) {
		t.Errorf("no unmet warning:\n%s", out.String())
	}
}

// TestCheck_approvals: check reports the approvals' errors (when without fromAnnotations,
// an unknown by) and their warnings (a shadowed entry).
func TestCheck_approvals(t *testing.T) {
	bad := writeTemp(t, "bad.json", `{"version":1,"approvals":[{"match":"**","by":"admin"},{"match":"x","by":"user","when":"destructive"}]}`)
	var out bytes.Buffer
	err := Check(context.Background(), bad, "", "", &out)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("Check = %v, want exit 1", err)
	}
	for _, want := range []string{
		`error:   approvals[0].by: must be "user" or "operator", got "admin"`,
		`error:   approvals[1].when: "destructive" needs stateSync.fromAnnotations: true`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("check lacks %q:\n%s", want, out.String())
		}
	}
	shadow := writeTemp(t, "s.json", `{"version":1,"approvals":[{"match":"files.*","by":"user"},{"match":"files.rm","by":"operator"}]}`)
	out.Reset()
	if err := Check(context.Background(), shadow, "", "", &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `warning: approvals[1].match: shadowed: never applies, approvals[0] ("files.*")`) {
		t.Errorf("check lacks the shadow warning:\n%s", out.String())
	}
}
