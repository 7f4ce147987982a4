// Command stategate is the stategate gateway and its tools.
//
//	stategate serve --config FILE --upstream URL [--listen ADDR] [--public-url URL] [--store bolt:PATH|memory|redis://HOST:PORT/DB|redis+cluster://HOST:PORT,...|redis+sentinel://HOST:PORT,.../MASTER] [--plugin FILE]
//	stategate intercept --config FILE [--listen ADDR] [--store ...] [--plugin FILE]
//	stategate demo [--listen ADDR] [--upstream-only] [--plugin FILE] [--no-script]
//	stategate check FILE [--tools tools.json | --upstream URL]
//	stategate explain --config FILE (--tools tools.json | --upstream URL) [--format table|json]
//	stategate graph FILE [--format mermaid|dot]
//	stategate call FUNC --config FILE [--plugin FILE] < input.json
//	stategate tools | mode TARGET MODE | approve TARGET | purge TARGET | events [--admin URL] [--admin-token-file FILE]
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

	"github.com/stategate/stategate/internal/termsafe"
)

const usage = `stategate: a state-awareness layer for MCP gateways

usage:
  stategate serve --config FILE --upstream URL [--listen 127.0.0.1:8080] [--public-url https://HOST] [--store bolt:stategate.db|memory|redis://HOST:PORT/DB|redis+cluster://HOST:PORT,...|redis+sentinel://HOST:PORT,.../MASTER] [--plugin build/stategate.wasm]
  stategate intercept --config FILE [--listen 127.0.0.1:8090] [--store bolt:stategate-intercept.db|memory|redis://HOST:PORT/DB] [--plugin FILE]
                  (hooks for Docker's MCP gateway: --interceptor before:http:http://ADDR/before --interceptor after:http:http://ADDR/after)
  stategate demo  [--listen 127.0.0.1:8080] [--upstream-listen 127.0.0.1:3001] [--upstream-only] [--no-script] [--plugin FILE]
  stategate check FILE [--tools tools.json | --upstream URL]
  stategate explain --config FILE (--tools tools.json | --upstream URL) [--format table|json]
  stategate graph FILE [--format mermaid|dot]
  stategate call FUNC --config FILE [--plugin FILE] < input.json
  stategate tools [--admin URL] [--admin-token-file FILE]
  stategate mode (NAME | GLOB | --tool NAME) MODE [--reason TEXT] [--yes] [--admin URL] [--admin-token-file FILE]
  stategate approve (NAME | GLOB | --tool NAME) [--yes] [--admin URL] [--admin-token-file FILE]
  stategate purge (NAME | GLOB | --tool NAME) [--yes] [--admin URL] [--admin-token-file FILE]
  stategate events [--type TYPE] [--tool NAME] [--count N] [--admin URL] [--admin-token-file FILE]

serve's operations flags: --admin ADDR (off by default) --admin-token-file FILE (or
STATEGATE_ADMIN_TOKEN) --log-format text|json --drain-timeout 30s --probe-interval 5s.
The admin commands take the token the same way. mode, approve and purge act on one
tool by its exact name (--tool NAME, or a NAME without '*'); a GLOB shows how many tools
it matches and which, and asks before it acts (--yes when stdin is not a terminal).

FUNC is one of decorate_tools, decorate_result, transition, check_limits, check_config.
Configuration files are JSON or YAML.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// exitError carries an exit status.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "serve":
		err = cmdServe(ctx, args[1:], stdout, stderr)
	case "intercept":
		err = cmdIntercept(ctx, args[1:], stdout, stderr)
	case "demo":
		err = cmdDemo(ctx, args[1:], stdout, stderr)
	case "check":
		err = cmdCheck(ctx, args[1:], stdout)
	case "explain":
		err = cmdExplain(ctx, args[1:], stdout, stderr)
	case "graph":
		err = cmdGraph(args[1:], stdout)
	case "call":
		err = cmdCall(ctx, args[1:], stdin, stdout)
	case "tools":
		err = cmdTools(ctx, args[1:], stdout, stderr)
	case "mode":
		err = cmdMode(ctx, args[1:], stdin, stdout, stderr)
	case "approve":
		err = cmdApprove(ctx, args[1:], stdin, stdout, stderr)
	case "purge":
		err = cmdPurge(ctx, args[1:], stdin, stdout, stderr)
	case "events":
		err = cmdEvents(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "stategate: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(stderr, termsafe.Lines(ee.msg))
			}
			return ee.code
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

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("stategate "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
