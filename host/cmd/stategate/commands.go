package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host/cli"
	"github.com/stategate/stategate/host/configfile"
	"github.com/stategate/stategate/host/serve"
)

// defaultPlugin, the --plugin default, is the module the binary embeds (plugin/built).
const defaultPlugin = ""

// pluginUsage is the help text of every --plugin flag.
const pluginUsage = "plugin module file (default: the module built into this binary, which stategate version names)"

func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: stategate check FILE [--tools tools.json | --upstream URL]"
	fs := newFlags("check", stderr)
	toolsPath := fs.String("tools", "", "a tools/list answer, result or tools array (JSON): also warn about configuration no listed tool meets")
	upstream := fs.String("upstream", "", "list the tools of this MCP server instead")
	var files []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return &exitError{Code: 2, Msg: usage}
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 || (*toolsPath != "" && *upstream != "") {
		return &exitError{Code: 2, Msg: usage}
	}
	return cli.Check(ctx, files[0], *toolsPath, *upstream, stdout)
}

func cmdGraph(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("graph", stderr)
	format := fs.String("format", "mermaid", "mermaid or dot")
	var files []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return &exitError{Code: 2, Msg: "usage: stategate graph FILE [--format mermaid|dot]"}
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 || (*format != "mermaid" && *format != "dot") {
		return &exitError{Code: 2, Msg: "usage: stategate graph FILE [--format mermaid|dot]"}
	}
	cfg, err := configfile.Load(files[0])
	if err != nil {
		return err
	}
	eng, err := serve.Validate(files[0], cfg)
	if err != nil {
		return err
	}
	graphs := serve.WorkflowGraphs(eng, *format)
	if len(graphs) == 0 {
		return &exitError{Code: 1, Msg: files[0] + ": no workflows"}
	}
	for _, g := range graphs {
		fmt.Fprint(stdout, g.Text)
	}
	return nil
}

func cmdCall(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("call", stderr)
	cfgPath := fs.String("config", "", "configuration file (JSON or YAML)")
	plugin := fs.String("plugin", defaultPlugin, pluginUsage)
	if wantsHelp(args) {
		return fs.Parse([]string{"-h"})
	}
	if len(args) == 0 {
		return &exitError{Code: 2, Msg: "usage: stategate call FUNC --config FILE [--plugin FILE] < input.json (FUNC: " + functionNames() + ")"}
	}
	fn, ok := abi.FunctionByName(args[0])
	if !ok {
		return &exitError{Code: 2, Msg: fmt.Sprintf("stategate call: unknown function %q (one of %s)", args[0], functionNames())}
	}
	if err := fs.Parse(args[1:]); err != nil {
		return &exitError{Code: 2}
	}
	return cli.Call(ctx, fn, *cfgPath, *plugin, stdin, stdout)
}

// functionNames lists the plugin's exports `stategate call` runs.
func functionNames() string {
	names := make([]string, len(abi.Functions))
	for i, f := range abi.Functions {
		names[i] = f.Name()
	}
	return strings.Join(names, ", ")
}

const interceptUsage = "usage: stategate intercept --config FILE [--listen 127.0.0.1:8090] [--store bolt:stategate-intercept.db|memory|redis://HOST:PORT/DB] [--plugin FILE]"

// cmdIntercept serves the hook endpoints for Docker's MCP gateway's interceptors.
func cmdIntercept(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("intercept", stderr)
	cfgPath := fs.String("config", "", "configuration file (JSON or YAML)")
	var o serve.Options
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8090", "address to listen on")
	fs.StringVar(&o.Store, "store", "bolt:stategate-intercept.db", "state store: bolt:PATH, memory, or redis://HOST:PORT/DB")
	fs.StringVar(&o.Plugin, "plugin", defaultPlugin, pluginUsage)
	fs.BoolVar(&o.Interruptible, "interruptible", false, "stop plugin calls at their deadline (hard), at about 10x the cost per call")
	fs.StringVar(&o.Origins, "allowed-origins", "", "comma-separated browser origins allowed to call the hooks (default: loopback origins only)")
	fs.StringVar(&o.Hosts, "allowed-hosts", "", "comma-separated Host names the listener answers to besides loopback names")
	if err := fs.Parse(args); err != nil {
		return &exitError{Code: 2}
	}
	if *cfgPath == "" || fs.NArg() != 0 {
		return &exitError{Code: 2, Msg: interceptUsage}
	}
	return serve.Intercept(ctx, *cfgPath, o, stdout, stderr)
}

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	var o serve.Options
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "gateway address")
	fs.StringVar(&o.Plugin, "plugin", defaultPlugin, pluginUsage)
	var d serve.DemoOptions
	fs.StringVar(&d.UpstreamListen, "upstream-listen", "127.0.0.1:3001", "demo upstream address")
	fs.BoolVar(&d.UpstreamOnly, "upstream-only", false, "serve only the demo upstream MCP server (for an Envoy in front)")
	fs.BoolVar(&d.NoScript, "no-script", false, "skip the scripted session")
	fs.BoolVar(&d.Once, "once", false, "exit after the scripted session")
	if err := fs.Parse(args); err != nil {
		return &exitError{Code: 2}
	}
	if d.UpstreamOnly && isSet(fs, "listen") {
		d.UpstreamListen = o.Listen // --listen names the upstream's address in this mode
	}
	return serve.Demo(ctx, o, d, stdout)
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
