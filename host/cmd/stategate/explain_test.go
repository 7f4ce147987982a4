package main

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stategate/stategate/host/demo"
)

const explainTools = `{"jsonrpc":"2.0","id":1,"result":{"tools":[
 {"name":"tasks.list","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},
 {"name":"tasks.update","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}},
 {"name":"sprints.create","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false,"destructiveHint":false}},
 {"name":"reports.daily","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}}`

func TestExplain(t *testing.T) {
	cfg := "../../../abi/testdata/config/annotations.json"
	tools := writeFile(t, "tools.json", explainTools)
	code, out, errOut := runCLI(t, "", "explain", "--config", cfg, "--tools", tools)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"TOOL            ANNOTATED    HINT",
		"tasks.list      read         no-store (default)  - (annotation)",
		"5000 ms (category read, annotation)",
		"tasks.*, sprints.* (policy stateSync.policies[1])",
		"sprints.* (annotation)",
		`90000 ms (category reports, limits.tools["reports.*"])`,
		`warning: limits.tools["bulk.import"]: no listed tool matches it`,
		`warning: stateSync.policies[0].match: no listed tool matches "countries.*"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "", "explain", "--config", cfg, "--tools", tools, "--format", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 4 {
		t.Fatalf("json: exit %d, %v:\n%s", code, err, out)
	}
	if rows[2]["name"] != "sprints.create" || rows[2]["invalidatesFrom"] != "annotation" || rows[2]["timeoutMs"] != float64(20000) || rows[2]["categoryFrom"] != "annotation" {
		t.Errorf("sprints.create: %v", rows[2])
	}
	for _, bad := range [][]string{
		{"explain", "--config", cfg},
		{"explain", "--tools", tools},
		{"explain", "--config", cfg, "--tools", tools, "--upstream", "http://127.0.0.1:1/mcp"},
		{"explain", "--config", cfg, "--tools", tools, "--format", "yaml"},
	} {
		if code, _, _ := runCLI(t, "", bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
	if code, _, errOut := runCLI(t, "", "explain", "--config", cfg, "--tools", writeFile(t, "x.json", `{"result":{}}`)); code != 1 || !strings.Contains(errOut, "no tools array") {
		t.Errorf("no tools: exit %d: %s", code, errOut)
	}
}

// TestExplain_upstream lists the tools of a live official-SDK server (the demo upstream,
// whose tools carry annotations).
func TestExplain_upstream(t *testing.T) {
	up := httptest.NewServer(demo.Handler(demo.Options{}))
	defer up.Close()
	cfg := writeFile(t, "c.json", `{"version": 1, "stateSync": {"fromAnnotations": true, "defaults": {"cacheControl": "no-store"}}}`)
	code, out, errOut := runCLI(t, "", "explain", "--config", cfg, "--upstream", up.URL+"/mcp")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"tasks.update    destructive  no-store (default)  tasks.* (annotation)", "countries.list  read", "cart.pay        destructive"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	if code, _, errOut := runCLI(t, "", "explain", "--config", cfg, "--upstream", "http://127.0.0.1:1/mcp"); code != 1 || !strings.Contains(errOut, "upstream[") {
		t.Errorf("dead upstream: exit %d: %s", code, errOut)
	}
}

func TestCheck_tools(t *testing.T) {
	tools := writeFile(t, "tools.json", explainTools)
	code, out, _ := runCLI(t, "", "check", "../../../abi/testdata/config/sample.json", "--tools", tools)
	for _, want := range []string{`warning: stateSync.policies[0].match: no listed tool matches "countries.*"`, `warning: workflows[0].tools["cart.pay"]: no listed tool is named "cart.pay"`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("exit %d, lacks %q:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "tasks.update") {
		t.Errorf("a policy a listed tool matches is reported:\n%s", out)
	}
}
