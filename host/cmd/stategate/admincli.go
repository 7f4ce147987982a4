package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/host/ops"
	"github.com/stategate/stategate/internal/termsafe"
)

// The admin CLI: stategate tools | mode TARGET MODE | approve TARGET | purge TARGET | events, each
// a client of a running gateway's admin API (--admin URL, the token from --admin-token-file
// or STATEGATE_ADMIN_TOKEN). TARGET is one tool by its exact name (--tool NAME, or a NAME
// without '*'), or a glob, previewed and confirmed before it acts (see selection).

// adminClient is a configured admin API client.
type adminClient struct {
	base  string
	token string
	http  *http.Client
}

// adminFlags parses the shared flags and returns the client and the remaining arguments.
func adminFlags(name string, args []string, stderr io.Writer, usage string, extra func(fs flagSet)) (*adminClient, []string, error) {
	fs := newFlags(name, stderr)
	base := fs.String("admin", "", "the gateway's admin listener URL (default: the running gateway found in the state directory)")
	gwName := fs.String("name", "", "the running gateway to reach, by its name (when several run)")
	tokenFile := fs.String("admin-token-file", "", "file holding the admin token (or set "+adminTokenEnv+")")
	if extra != nil {
		extra(fs)
	}
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, &exitError{code: 2, msg: usage}
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	tok, err := adminToken(*tokenFile)
	if err != nil {
		return nil, nil, err
	}
	if *base == "" {
		rec, err := findGateway(*gwName)
		if err != nil {
			return nil, nil, &exitError{code: 1, msg: "stategate: " + err.Error()}
		}
		*base = rec.Admin
		if tok == "" && rec.TokenFile != "" {
			if tok, err = adminToken(rec.TokenFile); err != nil {
				return nil, nil, err
			}
		}
		fmt.Fprintf(stderr, "stategate: gateway %s, admin %s\n", rec.Name, rec.Admin)
	}
	u, err := url.Parse(*base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, &exitError{code: 2, msg: fmt.Sprintf("--admin %q is not an http(s) URL", *base)}
	}
	return &adminClient{base: strings.TrimSuffix(*base, "/"), token: tok, http: &http.Client{}}, rest, nil
}

type flagSet = interface {
	String(name, value, usage string) *string
	Bool(name string, value bool, usage string) *bool
}

func (c *adminClient) request(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set(ops.ViaHeader, "cli")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin[%s]: %w", c.base, err)
	}
	return resp, nil
}

// call sends a request and decodes a 200 answer into out; any other status is an error
// carrying the API's message.
func (c *adminClient) call(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return &exitError{code: 1, msg: fmt.Sprintf("admin[%s]: %s (HTTP %d)%s", c.base, e.Error, resp.StatusCode, authHint(resp.StatusCode))}
		}
		return &exitError{code: 1, msg: fmt.Sprintf("admin[%s]: HTTP %d%s", c.base, resp.StatusCode, authHint(resp.StatusCode))}
	}
	return json.Unmarshal(b, out)
}

func cmdTools(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: stategate tools [--admin URL] [--admin-token-file FILE]"
	c, rest, err := adminFlags("tools", args, stderr, usage, nil)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return &exitError{code: 2, msg: usage}
	}
	// Without tool health there are no modes to show: every listed tool then, with its
	// workflow hint, calls, latency and last refusal (what the status page shows).
	var ov struct {
		Tools  []ops.ToolOverview
		Health bool
	}
	if err := c.call(ctx, "GET", "/admin/tools/overview", nil, &ov); err != nil {
		return err
	}
	if !ov.Health {
		fmt.Fprintln(stderr, "stategate: tool health is not configured (no \"health\" section): modes are not tracked")
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL\tWORKFLOW HINT\tCALLS\tP50\tP95\tLAST REFUSAL")
		for _, t := range ov.Tools {
			refusal := ""
			if t.LastRefusal != nil {
				refusal = t.LastRefusal.Code + " at " + t.LastRefusal.At.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", termsafe.String(t.Name), termsafe.String(t.Hint), t.Calls,
				seconds(t.P50), seconds(t.P95), termsafe.String(refusal))
		}
		return tw.Flush()
	}
	var out struct{ Tools []ops.ToolView }
	if err := c.call(ctx, "GET", "/admin/tools", nil, &out); err != nil {
		return err
	}
	// Names, reasons and errors come from upstreams: every cell is rendered for the
	// terminal (termsafe), so none can move the cursor, retitle the window or hide text.
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tUNIT\tMODE\tFAILURES\tFINGERPRINT\tLAST ERROR\tREASON")
	for _, t := range out.Tools {
		fp := t.Fingerprint
		if len(fp) > 12 {
			fp = fp[:12]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", termsafe.String(t.Name), termsafe.String(t.Unit), termsafe.String(t.Mode),
			t.Failures, termsafe.String(fp), termsafe.String(t.LastError), termsafe.String(t.Reason))
	}
	return tw.Flush()
}

func printChanges(stdout io.Writer, changes []health.ModeChange) error {
	failed := 0
	for _, ch := range changes {
		if ch.OK {
			fmt.Fprintf(stdout, "%s: %s -> %s\n", termsafe.String(ch.Name), termsafe.String(ch.From), termsafe.String(ch.To))
		} else {
			failed++
			fmt.Fprintf(stdout, "%s: %s -> %s refused: %s\n", termsafe.String(ch.Name), termsafe.String(ch.From), termsafe.String(ch.To), termsafe.String(ch.Error))
		}
	}
	if len(changes) == 0 {
		return &exitError{code: 1, msg: "no known tool matches"}
	}
	if failed > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d of %d change(s) refused", failed, len(changes))}
	}
	return nil
}

// selection is what an acting command covers: one tool by its exact name, or a glob.
//
// # Notes
//
//   - Tool names come from upstreams: one may be named "**" or "a.*". --tool NAME always
//     means that one tool, byte for byte. A positional NAME without '*' is a name too (a
//     glob without wildcards matches only itself). One with '*' is a glob: the command
//     first previews what it would touch (dryRun), shows the count and the names, asks
//     for confirmation (or needs --yes when stdin is not a terminal), then acts on each
//     previewed tool by its exact name, so a tool that appears in between is not touched.
type selection struct {
	tool, match string
}

// selectionOf reads the target of an acting command from --tool or the positional.
func selectionOf(tool, positional string) selection {
	if tool != "" {
		return selection{tool: tool}
	}
	if strings.Contains(positional, "*") {
		return selection{match: positional}
	}
	return selection{tool: positional}
}

// confirmer asks the operator before a glob acts.
type confirmer struct {
	yes    bool
	stdin  io.Reader
	stderr io.Writer
}

// isTerminal reports whether r is an interactive terminal (a variable for tests).
var isTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// confirm shows how many tools the glob would touch and which (lines, one per tool, each
// already rendered for the terminal), and returns nil when the operator agrees: --yes, or
// "y" typed at a terminal. Without a terminal and without --yes it refuses.
func (c confirmer) confirm(glob, what string, lines []string) error {
	fmt.Fprintf(c.stderr, "%s matches %d tool(s); %s:\n  %s\n", termsafe.String(glob), len(lines), what, strings.Join(lines, "\n  "))
	if c.yes {
		return nil
	}
	if !isTerminal(c.stdin) {
		return &exitError{code: 2, msg: "stdin is not a terminal: pass --yes to act on them (or --tool NAME for one tool)"}
	}
	fmt.Fprintf(c.stderr, "Proceed with these %d tool(s)? [y/N] ", len(lines))
	answer, _ := bufio.NewReader(c.stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return &exitError{code: 1, msg: "cancelled: nothing changed"}
	}
	return nil
}

// changeLine describes a previewed change for the confirmation.
func changeLine(ch health.ModeChange) string {
	line := termsafe.String(ch.Name) + " (" + termsafe.String(ch.From) + " -> " + termsafe.String(ch.To)
	if !ch.OK {
		line += ", refused: " + termsafe.String(ch.Error)
	}
	return line + ")"
}

// actOnTools runs a mode or approve request: on the one tool named, or, for a glob, after
// a confirmed preview, on each previewed tool by its exact name.
func (c *adminClient) actOnTools(ctx context.Context, path string, sel selection, body map[string]any, conf confirmer) ([]health.ModeChange, error) {
	send := func(tool string, pending map[string]string) ([]health.ModeChange, error) {
		b := maps.Clone(body)
		b["tool"] = tool
		if pending != nil {
			b["pending"] = pending
		}
		var out struct{ Changes []health.ModeChange }
		err := c.call(ctx, "POST", path, b, &out)
		return out.Changes, err
	}
	approve := path == "/admin/tools/approve"
	if sel.tool != "" && !approve {
		return send(sel.tool, nil)
	}
	// An approval is always previewed, by name too: it sends back the definitions the
	// preview showed (pending), so one the server lists in between is not approved unseen.
	preview := maps.Clone(body)
	if sel.tool != "" {
		preview["tool"] = sel.tool
	} else {
		preview["match"] = sel.match
	}
	preview["dryRun"] = true
	var prev struct{ Changes []health.ModeChange }
	if err := c.call(ctx, "POST", path, preview, &prev); err != nil {
		return nil, err
	}
	if sel.tool != "" {
		return send(sel.tool, pendingOf(prev.Changes))
	}
	lines := make([]string, len(prev.Changes))
	for i, ch := range prev.Changes {
		lines[i] = changeLine(ch) + pendingLine(ch)
	}
	if err := conf.confirm(sel.match, "it would change", lines); err != nil {
		return nil, err
	}
	var all []health.ModeChange
	for _, ch := range prev.Changes {
		var pending map[string]string
		if approve {
			pending = pendingOf([]health.ModeChange{ch})
		}
		changes, err := send(ch.Name, pending)
		if err != nil {
			return all, err // the changes made so far are printed with the error
		}
		all = append(all, changes...)
	}
	return all, nil
}

// pendingOf merges the definitions a preview's changes would pin (tool -> fingerprint); an
// empty map, never nil, so an approval always says what it was shown.
func pendingOf(changes []health.ModeChange) map[string]string {
	out := map[string]string{}
	for _, ch := range changes {
		maps.Copy(out, ch.Pending)
	}
	return out
}

// pendingLine is a preview line's list of the definitions approving would pin, by the
// first 12 hex digits of their fingerprints (for the operator to compare with the
// server's).
func pendingLine(ch health.ModeChange) string {
	if len(ch.Pending) == 0 {
		return ""
	}
	tools := slices.Sorted(maps.Keys(ch.Pending))
	parts := make([]string, len(tools))
	for i, t := range tools {
		fp := ch.Pending[t]
		if len(fp) > 12 {
			fp = fp[:12]
		}
		parts[i] = termsafe.String(t) + " sha256:" + termsafe.String(fp)
	}
	return " [pending: " + strings.Join(parts, ", ") + "]"
}

// actingFlags adds the flags every acting command shares: --tool and --yes.
func actingFlags(fs flagSet) (tool *string, yes *bool) {
	tool = fs.String("tool", "", "one tool by its exact name (never a glob)")
	yes = fs.Bool("yes", false, "act on every tool a glob matches without asking")
	return tool, yes
}

// target reads the selection and the remaining positionals: with --tool, every positional
// is the rest; without, the first is the name or glob.
func target(tool string, rest []string, want int, usage string) (selection, []string, error) {
	if tool == "" {
		if len(rest) != want+1 || rest[0] == "" {
			return selection{}, nil, &exitError{code: 2, msg: usage}
		}
		return selectionOf("", rest[0]), rest[1:], nil
	}
	if len(rest) != want {
		return selection{}, nil, &exitError{code: 2, msg: usage}
	}
	return selectionOf(tool, ""), rest, nil
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
	changes, err := c.actOnTools(ctx, "/admin/tools/mode", sel, map[string]any{"mode": rest[0], "reason": *reason},
		confirmer{yes: *yes, stdin: stdin, stderr: stderr})
	if err != nil {
		if len(changes) > 0 {
			printChanges(stdout, changes)
		}
		return err
	}
	return printChanges(stdout, changes)
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
	changes, err := c.actOnTools(ctx, "/admin/tools/approve", sel, map[string]any{}, confirmer{yes: *yes, stdin: stdin, stderr: stderr})
	if err != nil {
		if len(changes) > 0 {
			printChanges(stdout, changes)
		}
		return err
	}
	return printChanges(stdout, changes)
}

// cmdPurge purges the response cache of one cached tool (by exact name) or of every cached
// tool a glob matches (previewed and confirmed like mode), on every replica (POST
// /admin/cache/purge), and lists the purged tools.
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
	purge := func(body map[string]any) ([]string, error) {
		var out struct{ Purged []string }
		err := c.call(ctx, "POST", "/admin/cache/purge", body, &out)
		return out.Purged, err
	}
	var purged []string
	if sel.tool != "" {
		if purged, err = purge(map[string]any{"tool": sel.tool}); err != nil {
			return err
		}
	} else {
		would, err := purge(map[string]any{"match": sel.match, "dryRun": true})
		if err != nil {
			return err
		}
		lines := make([]string, len(would))
		for i, name := range would {
			lines[i] = termsafe.String(name)
		}
		if len(would) > 0 {
			if err := (confirmer{yes: *yes, stdin: stdin, stderr: stderr}).confirm(sel.match, "it would purge", lines); err != nil {
				return err
			}
		}
		for _, name := range would {
			p, err := purge(map[string]any{"tool": name})
			if err != nil {
				return err
			}
			purged = append(purged, p...)
		}
	}
	for _, name := range purged {
		fmt.Fprintln(stdout, termsafe.String(name))
	}
	fmt.Fprintf(stdout, "%d cached tool(s) purged\n", len(purged))
	return nil
}

// cmdEvents prints events from the gateway's history, one JSON object a line: the last
// --count N at once (GET /admin/events/history), or, with --follow, those and then every
// new one until interrupted (the SSE stream from the last id printed, so none is lost or
// repeated in between); --since ID starts after that id instead.
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
	n, max := 20, 0
	if *follow {
		n = 0
	}
	if len(rest) != 0 || (*count != "" && (atoiErr(*count, &n) != nil || n < 0)) || atoiErr(*stop, &max) != nil || max < 0 {
		return &exitError{code: 2, msg: usage}
	}
	if *since != "" {
		if _, err := strconv.ParseUint(*since, 10, 64); err != nil {
			return &exitError{code: 2, msg: "--since: an event id, a non-negative integer"}
		}
	}
	q := url.Values{}
	for k, v := range map[string]string{"type": *typ, "tool": *tool, "session": *session} {
		if v != "" {
			q.Set(k, v)
		}
	}
	printed := 0
	emit := func(line []byte) bool {
		stdout.Write(append(termsafe.JSON(line), '\n')) // the same JSON, no raw control for the terminal
		printed++
		return max > 0 && printed >= max
	}
	from := *since
	if n > 0 || !*follow || *since != "" {
		hq := maps.Clone(q)
		hq.Set("count", strconv.Itoa(n))
		if *since != "" {
			hq.Set("since", *since)
			if *count == "" {
				hq.Set("count", strconv.Itoa(ops.DefaultHistory))
			}
		}
		var out struct {
			Events []json.RawMessage
			Last   uint64
		}
		if err := c.call(ctx, "GET", "/admin/events/history?"+hq.Encode(), nil, &out); err != nil {
			return err
		}
		for _, e := range out.Events {
			if emit(e) {
				return nil
			}
		}
		if !*follow {
			return nil
		}
		from = strconv.FormatUint(out.Last, 10)
	}
	if from != "" {
		q.Set("since", from)
	}
	path := "/admin/events"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	resp, err := c.request(ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var e struct{ Error string }
		json.Unmarshal(b, &e)
		return &exitError{code: 1, msg: fmt.Sprintf("admin[%s]: %s (HTTP %d)%s", c.base, e.Error, resp.StatusCode, authHint(resp.StatusCode))}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if emit([]byte(d)) {
				return nil
			}
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("admin[%s]: event stream: %w", c.base, err)
	}
	return &exitError{code: 1, msg: "the event stream ended (the gateway stopped?)"}
}

func atoiErr(s string, n *int) error {
	v, err := strconv.Atoi(s)
	if err == nil {
		*n = v
	}
	return err
}

// cmdReset puts a workflow instance back in its initial state, or in --to STATE (POST
// /admin/state/reset): compare-and-set like any transition, an event, and a clear error
// for an unknown workflow, session, handle or state.
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
		return &exitError{code: 2, msg: usage}
	}
	var out struct{ Workflow, From, To string }
	body := map[string]any{"workflow": rest[0], "handle": *handle, "session": *session, "principal": *principal, "to": *to, "reason": *reason}
	if err := c.call(ctx, "POST", "/admin/state/reset", body, &out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s -> %s\n", termsafe.String(out.Workflow), termsafe.String(out.From), termsafe.String(out.To))
	return nil
}

// authHint says how to give the token when the admin API answered 401.
func authHint(status int) string {
	if status != http.StatusUnauthorized {
		return ""
	}
	return "; give the gateway's admin token with --admin-token-file FILE or " + adminTokenEnv
}

// seconds writes a latency in seconds as milliseconds ("" for none).
func seconds(v float64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatFloat(v*1000, 'f', 1, 64) + " ms"
}
