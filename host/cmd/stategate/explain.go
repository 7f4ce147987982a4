package main

import (
	"context"
	"io"
	"strconv"

	"github.com/stategate/stategate/host/cli"
)

const explainUsage = "usage: stategate explain --config FILE (--tools tools.json | --upstream URL) [--format table|json]"

// cmdExplain shows, per listed tool, every decision the engine takes for it and where
// each comes from (cli.Explain).
func cmdExplain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("explain", stderr)
	cfgPath := fs.String("config", "", "configuration file (JSON or YAML)")
	toolsPath := fs.String("tools", "", "a tools/list answer, result or tools array (JSON)")
	upstream := fs.String("upstream", "", "list the tools of this MCP server (Streamable HTTP)")
	format := fs.String("format", "table", "table or json")
	if err := fs.Parse(args); err != nil {
		return &exitError{Code: 2, Msg: explainUsage}
	}
	switch {
	case fs.NArg() != 0:
		return &exitError{Code: 2, Msg: "stategate explain: unexpected argument " + strconv.Quote(fs.Arg(0)) + "\n" + explainUsage}
	case *cfgPath == "":
		return &exitError{Code: 2, Msg: "stategate explain: --config FILE is required: the configuration to explain\n" + explainUsage}
	case (*toolsPath == "") == (*upstream == ""):
		return &exitError{Code: 2, Msg: "stategate explain: give one tool source: --tools FILE (a saved tools/list answer, result or tools array) or --upstream URL (a running MCP server to list)\n" + explainUsage}
	case *format != "table" && *format != "json":
		return &exitError{Code: 2, Msg: "stategate explain: --format " + strconv.Quote(*format) + ": want table or json"}
	}
	return cli.Explain(ctx, *cfgPath, *toolsPath, *upstream, *format, stdout)
}
