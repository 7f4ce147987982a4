// Command stategate is the stategate gateway and its tools.
//
//	stategate serve --config FILE --upstream URL [--listen ADDR] [--public-url URL] [--store bolt:PATH|memory|redis://HOST:PORT/DB|redis+cluster://HOST:PORT,...|redis+sentinel://HOST:PORT,.../MASTER] [--plugin FILE]
//	stategate serve --config FILE [--listen ADDR] [--max-sessions N] -- COMMAND [ARGS...]
//	stategate stdio --config FILE [--store ...] [--admin ADDR] (-- COMMAND [ARGS...] | --upstream URL)
//	stategate intercept --config FILE [--listen ADDR] [--store ...] [--plugin FILE]
//	stategate demo [--listen ADDR] [--upstream-only] [--plugin FILE] [--no-script]
//	stategate check FILE [--tools tools.json | --upstream URL]
//	stategate explain --config FILE (--tools tools.json | --upstream URL) [--format table|json]
//	stategate graph FILE [--format mermaid|dot]
//	stategate call FUNC --config FILE [--plugin FILE] < input.json
//	stategate version
//	stategate tools | mode TARGET MODE | approve TARGET | purge TARGET | events [--admin URL] [--admin-token-file FILE]
//	stategate approvals | approve-call ID | deny-call ID [--admin URL] [--admin-token-file FILE]
//	  (TARGET: NAME, --tool NAME, or a GLOB previewed and confirmed, --yes when not a terminal)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/stategate/stategate/host/cli"
	"github.com/stategate/stategate/host/serve"
	"github.com/stategate/stategate/internal/termsafe"
)

const usage = `stategate: a state-awareness layer for MCP gateways

usage:
  stategate serve --config FILE --upstream URL [--listen 127.0.0.1:8080] [--public-url https://HOST] [--store bolt:stategate.db|memory|redis://HOST:PORT/DB|redis+cluster://HOST:PORT,...|redis+sentinel://HOST:PORT,.../MASTER] [--plugin FILE]
                  (--upstream-transport auto|streamable|sse: an HTTP+SSE server of 2024-11-05 with sse, or a URL ending in /sse)
  stategate serve --config FILE [--listen 127.0.0.1:8080] [--max-sessions 16] [...] -- COMMAND [ARGS...]
                  (a stdio server: a child per client session, at most --max-sessions)
  stategate stdio --config FILE [--store memory|bolt:PATH|redis://...] [--admin ADDR] [--plugin FILE] (-- COMMAND [ARGS...] | --upstream URL)
                  (for a desktop client's mcpServers entry: JSON-RPC on stdin/stdout, logs on stderr)
  stategate intercept --config FILE [--listen 127.0.0.1:8090] [--store bolt:stategate-intercept.db|memory|redis://HOST:PORT/DB] [--plugin FILE]
                  (hooks for Docker's MCP gateway: --interceptor before:http:http://ADDR/before --interceptor after:http:http://ADDR/after)
  stategate demo  [--listen 127.0.0.1:8080] [--upstream-listen 127.0.0.1:3001] [--upstream-only] [--no-script] [--plugin FILE]
  stategate check FILE [--tools tools.json | --upstream URL]
  stategate explain --config FILE (--tools tools.json | --upstream URL) [--format table|json]
  stategate graph FILE [--format mermaid|dot]
  stategate call FUNC --config FILE [--plugin FILE] < input.json
  stategate version                (also --version: the build and the plugin module it carries)
  stategate tools [--admin URL] [--admin-token-file FILE]
  stategate mode (NAME | GLOB | --tool NAME) MODE [--reason TEXT] [--yes] [--admin URL] [--admin-token-file FILE]
  stategate approve (NAME | GLOB | --tool NAME) [--yes] [--admin URL] [--admin-token-file FILE]
  stategate purge (NAME | GLOB | --tool NAME) [--yes] [--admin URL] [--admin-token-file FILE]
  stategate events [--count N] [--follow [--stop-after N]] [--since ID] [--type TYPE] [--tool NAME] [--session DIGEST] [--admin URL] [--admin-token-file FILE]
  stategate reset WORKFLOW (--handle VALUE | --session ID) [--principal P] [--to STATE] [--reason TEXT] [--admin URL] [--admin-token-file FILE]
  stategate approvals [--admin URL] [--admin-token-file FILE]
                  (the calls held for an operator's approval, on every replica of the store)
  stategate approve-call ID [--reason TEXT] [--admin URL] [--admin-token-file FILE]
  stategate deny-call ID [--reason TEXT] [--admin URL] [--admin-token-file FILE]

serve's operations flags: --admin ADDR|off (default: loopback, a free port, a generated token
the admin commands find) --name NAME --admin-token-file FILE (or
STATEGATE_ADMIN_TOKEN) --log-format text|json --drain-timeout 30s --probe-interval 5s.
The admin commands take the token the same way. mode, approve and purge act on one
tool by its exact name (--tool NAME, or a NAME without '*'); a GLOB shows how many tools
it matches and which, and asks before it acts (--yes when stdin is not a terminal).

Every command that runs the plugin uses the module built into the binary unless --plugin
names a file.
FUNC is one of decorate_tools, decorate_result, transition, check_limits, check_config.
Configuration files are JSON or YAML.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// exitError carries an exit status (the commands' work, host/cli, returns them too).
type exitError = cli.ExitError

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if args[0] == "version" || args[0] == "--version" || args[0] == "-version" {
		return cli.Version(stdout)
	}
	if wantsHelp(args[1:]) {
		// A command's help (its usage line and flags) goes to stdout with status 0: the
		// command parses just -h with its flag output on stdout.
		if _, ok := commandUsage(args[0]); !ok {
			fmt.Fprintf(stderr, "stategate: unknown command %q\n\n%s", args[0], usage)
			return 2
		}
		dispatch(context.Background(), args[0], []string{"-h"}, strings.NewReader(""), stdout, stdout)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err, known := dispatch(ctx, args[0], args[1:], stdin, stdout, stderr)
	if !known {
		fmt.Fprintf(stderr, "stategate: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.Msg != "" {
				fmt.Fprintln(stderr, termsafe.Lines(ee.Msg))
			}
			return ee.Code
		}
		if ce := (*serve.ConfigError)(nil); errors.As(err, &ce) {
			fmt.Fprintln(stderr, termsafe.Lines(ce.Error())) // the configuration's every error
			return 1
		}
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		// Errors may quote an upstream's or the admin API's words: no raw control reaches
		// the terminal (every command's errors end here).
		fmt.Fprintln(stderr, termsafe.Lines("stategate: "+strings.TrimPrefix(err.Error(), "stategate: ")))
		return 1
	}
	return 0
}

// dispatch runs command cmd; known is false for a command there is none of.
func dispatch(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout, stderr io.Writer) (err error, known bool) {
	switch cmd {
	case "serve":
		return cmdServe(ctx, args, stdout, stderr), true
	case "stdio":
		return cmdStdio(ctx, args, stdin, stdout, stderr), true
	case "intercept":
		return cmdIntercept(ctx, args, stdout, stderr), true
	case "demo":
		return cmdDemo(ctx, args, stdout, stderr), true
	case "check":
		return cmdCheck(ctx, args, stdout, stderr), true
	case "explain":
		return cmdExplain(ctx, args, stdout, stderr), true
	case "graph":
		return cmdGraph(args, stdout, stderr), true
	case "call":
		return cmdCall(ctx, args, stdin, stdout, stderr), true
	case "tools":
		return cmdTools(ctx, args, stdout, stderr), true
	case "mode":
		return cmdMode(ctx, args, stdin, stdout, stderr), true
	case "approve":
		return cmdApprove(ctx, args, stdin, stdout, stderr), true
	case "purge":
		return cmdPurge(ctx, args, stdin, stdout, stderr), true
	case "reset":
		return cmdReset(ctx, args, stdout, stderr), true
	case "events":
		return cmdEvents(ctx, args, stdout, stderr), true
	case "approvals":
		return cmdApprovals(ctx, args, stdout, stderr), true
	case "approve-call":
		return cmdDecideCall(ctx, "approve-call", true, args, stdout, stderr), true
	case "deny-call":
		return cmdDecideCall(ctx, "deny-call", false, args, stdout, stderr), true
	}
	return nil, false
}

// wantsHelp reports whether a command's arguments ask for its help (-h, -help or --help
// before a "--").
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// commandUsage returns cmd's lines of the usage text.
func commandUsage(cmd string) (string, bool) {
	var lines []string
	in := false
	for _, l := range strings.Split(usage, "\n") {
		if strings.HasPrefix(l, "  stategate ") {
			f := strings.Fields(l)
			in = len(f) > 1 && f[1] == cmd
		} else if !strings.HasPrefix(l, "                ") {
			in = false
		}
		if in {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return strings.Join(lines, "\n  "), len(lines) > 0
}

// newFlags returns command name's flag set writing to w: its usage lines from the usage
// text, then its flags.
func newFlags(name string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("stategate "+name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		if u, ok := commandUsage(name); ok {
			fmt.Fprintf(fs.Output(), "usage:\n  %s\n\nflags:\n", u)
		}
		fs.PrintDefaults()
	}
	return fs
}
