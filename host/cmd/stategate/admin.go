package main

import (
	"context"
	"io"
	"net/url"
	"strconv"

	"github.com/stategate/stategate/host/cli"
	"github.com/stategate/stategate/host/ops"
)

// The admin commands' flags; their work is host/cli's, over the admin API's client
// (ops.Client).

type flagSet = interface {
	String(name, value, usage string) *string
	Bool(name string, value bool, usage string) *bool
}

// adminFlags parses the shared flags and returns the client and the remaining arguments.
func adminFlags(name string, args []string, stderr io.Writer, usage string, extra func(fs flagSet)) (*ops.Client, []string, error) {
	fs := newFlags(name, stderr)
	base := fs.String("admin", "", "the gateway's admin listener URL (default: the running gateway found in the state directory)")
	gwName := fs.String("name", "", "the running gateway to reach, by its name (when several run)")
	tokenFile := fs.String("admin-token-file", "", "file holding the admin token (or set "+ops.TokenEnv+")")
	if extra != nil {
		extra(fs)
	}
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, &exitError{Code: 2, Msg: usage}
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	c, err := cli.Connect(*base, *gwName, *tokenFile, stderr)
	return c, rest, err
}

// actingFlags adds the flags every acting command shares: --tool and --yes.
func actingFlags(fs flagSet) (tool *string, yes *bool) {
	tool = fs.String("tool", "", "one tool by its exact name (never a glob)")
	yes = fs.Bool("yes", false, "act on every tool a glob matches without asking")
	return tool, yes
}

// target reads the selection and the remaining positionals: with --tool, every positional
// is the rest; without, the first is the name or glob.
func target(tool string, rest []string, want int, usage string) (cli.Selection, []string, error) {
	if tool == "" {
		if len(rest) != want+1 || rest[0] == "" {
			return cli.Selection{}, nil, &exitError{Code: 2, Msg: usage}
		}
		return cli.SelectionOf("", rest[0]), rest[1:], nil
	}
	if len(rest) != want {
		return cli.Selection{}, nil, &exitError{Code: 2, Msg: usage}
	}
	return cli.SelectionOf(tool, ""), rest, nil
}

func cmdTools(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: stategate tools [--admin URL] [--admin-token-file FILE]"
	c, rest, err := adminFlags("tools", args, stderr, usage, nil)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return &exitError{Code: 2, Msg: usage}
	}
	return cli.Tools(ctx, c, stdout, stderr)
}

func cmdMode(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	const usage = "usage: stategate mode (NAME | GLOB | --tool NAME) MODE [--reason TEXT] [--yes] [--admin URL] [--admin-token-file FILE]"
	var reason, tool *string
	var yes *bool
	c, rest, err := adminFlags("mode", args, stderr, usage, func(fs flagSet) {
		reason = fs.String("reason", "", "why (logged, shown with the mode)")
		tool, yes = actingFlags(fs)
	})
	if err != nil {
		return err
	}
	sel, rest, err := target(*tool, rest, 1, usage)
	if err != nil {
		return err
	}
	return cli.Mode(ctx, c, sel, rest[0], *reason, cli.Confirmer{Yes: *yes, Stdin: stdin, Stderr: stderr}, stdout)
}

func cmdApprove(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	const usage = "usage: stategate approve (NAME | GLOB | --tool NAME) [--yes] [--admin URL] [--admin-token-file FILE]"
	var tool *string
	var yes *bool
	c, rest, err := adminFlags("approve", args, stderr, usage, func(fs flagSet) { tool, yes = actingFlags(fs) })
	if err != nil {
		return err
	}
	sel, _, err := target(*tool, rest, 0, usage)
	if err != nil {
		return err
	}
	return cli.Approve(ctx, c, sel, cli.Confirmer{Yes: *yes, Stdin: stdin, Stderr: stderr}, stdout)
}

func cmdPurge(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	const usage = "usage: stategate purge (NAME | GLOB | --tool NAME) [--yes] [--admin URL] [--admin-token-file FILE]"
	var tool *string
	var yes *bool
	c, rest, err := adminFlags("purge", args, stderr, usage, func(fs flagSet) { tool, yes = actingFlags(fs) })
	if err != nil {
		return err
	}
	sel, _, err := target(*tool, rest, 0, usage)
	if err != nil {
		return err
	}
	return cli.Purge(ctx, c, sel, cli.Confirmer{Yes: *yes, Stdin: stdin, Stderr: stderr}, stdout)
}

func cmdEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: stategate events [--count N] [--follow [--stop-after N]] [--since ID] [--type TYPE] [--tool NAME] [--session DIGEST] [--admin URL] [--admin-token-file FILE]"
	var typ, tool, session, count, since, stop *string
	var follow *bool
	c, rest, err := adminFlags("events", args, stderr, usage, func(fs flagSet) {
		typ = fs.String("type", "", "only events of this type")
		tool = fs.String("tool", "", "only events of this tool")
		session = fs.String("session", "", "only events of this session or handle digest (data.session)")
		count = fs.String("count", "", "print the last N events from history (default 20; with --follow, 0)")
		since = fs.String("since", "", "print the events after this id (from history) instead of the last N")
		follow = fs.Bool("follow", false, "then wait for new events, until interrupted")
		stop = fs.String("stop-after", "0", "with --follow, end after printing this many events (0: never)")
	})
	if err != nil {
		return err
	}
	o := cli.EventsOptions{Count: 20, Since: *since, Follow: *follow, CountSet: *count != "", Filter: url.Values{}}
	if *follow {
		o.Count = 0
	}
	if len(rest) != 0 || (*count != "" && (atoiErr(*count, &o.Count) != nil || o.Count < 0)) || atoiErr(*stop, &o.StopAfter) != nil || o.StopAfter < 0 {
		return &exitError{Code: 2, Msg: usage}
	}
	if *since != "" {
		if _, err := strconv.ParseUint(*since, 10, 64); err != nil {
			return &exitError{Code: 2, Msg: "--since: an event id, a non-negative integer"}
		}
	}
	for k, v := range map[string]string{"type": *typ, "tool": *tool, "session": *session} {
		if v != "" {
			o.Filter.Set(k, v)
		}
	}
	return cli.Events(ctx, c, o, stdout)
}

func atoiErr(s string, n *int) error {
	v, err := strconv.Atoi(s)
	if err == nil {
		*n = v
	}
	return err
}

func cmdReset(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: stategate reset WORKFLOW (--handle VALUE | --session ID) [--principal P] [--to STATE] [--reason TEXT] [--admin URL] [--admin-token-file FILE]"
	var handle, session, principal, to, reason *string
	c, rest, err := adminFlags("reset", args, stderr, usage, func(fs flagSet) {
		handle = fs.String("handle", "", "the instance's handle (a handle-keyed workflow)")
		session = fs.String("session", "", "the instance's session id (a session-keyed workflow)")
		principal = fs.String("principal", "", "the principal, when state is scoped by principal")
		to = fs.String("to", "", "the state to put it in (default: the workflow's initial state)")
		reason = fs.String("reason", "", "why (in the event and the log)")
	})
	if err != nil {
		return err
	}
	if len(rest) != 1 || rest[0] == "" || (*handle == "") == (*session == "") {
		return &exitError{Code: 2, Msg: usage}
	}
	return cli.Reset(ctx, c, ops.ResetRequest{Workflow: rest[0], Handle: *handle, Session: *session, Principal: *principal, To: *to, Reason: *reason}, stdout)
}

func cmdApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: stategate approvals [--admin URL] [--admin-token-file FILE]"
	c, rest, err := adminFlags("approvals", args, stderr, usage, nil)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return &exitError{Code: 2, Msg: usage}
	}
	return cli.Approvals(ctx, c, stdout)
}

// cmdDecideCall is approve-call (approve) and deny-call.
func cmdDecideCall(ctx context.Context, name string, approve bool, args []string, stdout, stderr io.Writer) error {
	usage := "usage: stategate " + name + " ID [--reason TEXT] [--admin URL] [--admin-token-file FILE]"
	var reason *string
	c, rest, err := adminFlags(name, args, stderr, usage, func(fs flagSet) {
		reason = fs.String("reason", "", "why (in the approval_decided event)")
	})
	if err != nil {
		return err
	}
	if len(rest) != 1 || rest[0] == "" {
		return &exitError{Code: 2, Msg: usage}
	}
	return cli.DecideCall(ctx, c, rest[0], approve, *reason, stdout)
}
