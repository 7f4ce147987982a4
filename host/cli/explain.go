package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host/configfile"
	"github.com/stategate/stategate/host/serve"
	"github.com/stategate/stategate/internal/termsafe"
	"github.com/tidwall/gjson"
)

// Explain shows, per tool listed in toolsPath or by the server at upstream, every decision
// the engine takes for it and where each comes from (`stategate explain`; format table or
// json). The engine answers (check_config with the tool list), so every host explains
// alike; this only lists the tools and prints the answer.
func Explain(ctx context.Context, cfgPath, toolsPath, upstream, format string, stdout io.Writer) error {
	ans, err := explainAnswer(ctx, cfgPath, toolsPath, upstream)
	if err != nil {
		return err
	}
	if format == "json" {
		var b bytes.Buffer
		json.Indent(&b, []byte(ans.Get("explain").Raw), "", "  ")
		b.WriteByte('\n')
		_, err := stdout.Write(b.Bytes())
		return err
	}
	printExplain(stdout, ans)
	return nil
}

// explainAnswer asks the engine's check_config about the configuration at cfgPath and
// the tools listed in toolsPath or by the server at upstream.
func explainAnswer(ctx context.Context, cfgPath, toolsPath, upstream string) (gjson.Result, error) {
	cfg, err := configfile.Load(cfgPath)
	if err != nil {
		return gjson.Result{}, err
	}
	eng, err := serve.Validate(cfgPath, cfg)
	if err != nil {
		return gjson.Result{}, err
	}
	var tools []byte
	if toolsPath != "" {
		tools, err = toolsFromFile(toolsPath)
	} else {
		tools, err = toolsFromUpstream(ctx, upstream)
	}
	if err != nil {
		return gjson.Result{}, err
	}
	out := eng.Call(abi.FuncCheckConfig, append(append([]byte(`{"tools":`), tools...), '}'))
	ans := gjson.ParseBytes(out)
	if e := ans.Get("error"); e.Exists() {
		return gjson.Result{}, fmt.Errorf("explain: %s: %s", e.Get("code").Str, e.Get("message").Str)
	}
	return ans, nil
}

// toolsFromFile reads a tools array from a JSON-RPC tools/list answer, its result, or the
// bare array.
func toolsFromFile(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !gjson.ValidBytes(raw) {
		return nil, fmt.Errorf("tools[%s]: not JSON", path)
	}
	doc := gjson.ParseBytes(raw)
	for _, t := range []gjson.Result{doc, doc.Get("tools"), doc.Get("result.tools")} {
		if t.IsArray() {
			return []byte(t.Raw), nil
		}
	}
	return nil, fmt.Errorf("tools[%s]: no tools array (a tools/list answer, its result, or the array)", path)
}

// toolsFromUpstream lists every tool of a live MCP server with the official Go SDK client.
func toolsFromUpstream(ctx context.Context, url string) ([]byte, error) {
	return serve.ListTools(ctx, url, &mcp.StreamableClientTransport{Endpoint: url})
}

func printExplain(w io.Writer, ans gjson.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tANNOTATED\tHINT\tINVALIDATES\tWORKFLOW\tTIMEOUT\tAPPROVAL")
	for _, t := range ans.Get("explain").Array() {
		// Tool names come from the upstream: every cell is rendered for the terminal.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termsafe.String(t.Get("name").Str), termsafe.String(t.Get("class").Str),
			termsafe.String(t.Get("cacheControl").Str+" ("+from(t.Get("cacheControlFrom").Str, t.Get("policy").Str)+")"),
			termsafe.String(invalidatesText(t)), termsafe.String(workflowsText(t)), termsafe.String(timeoutText(t)),
			termsafe.String(approvalText(t)))
	}
	tw.Flush()
	for _, warn := range ans.Get("warnings").Array() {
		fmt.Fprintln(w, "warning: "+termsafe.String(warn.Str))
	}
}

func from(source, path string) string {
	if source == "policy" && path != "" {
		return "policy " + path
	}
	return source
}

func invalidatesText(t gjson.Result) string {
	var pats []string
	for _, p := range t.Get("invalidates").Array() {
		pats = append(pats, p.Str)
	}
	s := "-"
	if len(pats) > 0 {
		s = strings.Join(pats, ", ")
	}
	return s + " (" + from(t.Get("invalidatesFrom").Str, t.Get("policy").Str) + ")"
}

func workflowsText(t gjson.Result) string {
	var out []string
	for _, w := range t.Get("workflows").Array() {
		var states []string
		for _, s := range w.Get("states").Array() {
			states = append(states, s.Str)
		}
		s := w.Get("id").Str + " in " + strings.Join(states, "|")
		if ev := w.Get("event").Str; ev != "" {
			s += " fires " + ev
		}
		var guards []string
		for _, g := range w.Get("guards").Array() {
			guards = append(guards, g.Str)
		}
		if len(guards) > 0 {
			s += " (guarded: " + strings.Join(guards, "; ") + ")"
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, "; ")
}

func timeoutText(t gjson.Result) string {
	s := fmt.Sprintf("%d ms (", t.Get("timeoutMs").Int())
	limits := t.Get("limits").Str
	switch t.Get("timeoutFrom").Str {
	case "tool":
		s += limits
	case "category":
		s += "category " + t.Get("category").Str + ", "
		if t.Get("categoryFrom").Str == "annotation" {
			s += "annotation"
		} else {
			s += limits
		}
	default:
		s += "default"
	}
	return s + ")"
}

// approvalText is who approves the tool's calls and by which entry: "user, 300000 ms
// (approvals[2], when destructive)", or "-".
func approvalText(t gjson.Result) string {
	a := t.Get("approval")
	if !a.IsObject() {
		return "-"
	}
	s := fmt.Sprintf("%s, %d ms (%s", a.Get("by").Str, a.Get("timeoutMs").Int(), a.Get("entry").Str)
	if w := a.Get("when").Str; w != "" {
		s += ", when " + w
	}
	return s + ")"
}
