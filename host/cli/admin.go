package cli

import (
	"bufio"
	"context"
	"errors"
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
	"github.com/stategate/stategate/host/serve"
	"github.com/stategate/stategate/internal/termsafe"
)

// The admin commands: stategate tools | mode TARGET MODE | approve TARGET | purge TARGET |
// events | reset, each a client of a running gateway's admin API (--admin URL, the token
// from --admin-token-file or STATEGATE_ADMIN_TOKEN). TARGET is one tool by its exact name
// (--tool NAME, or a NAME without '*'), or a glob, previewed and confirmed before it acts
// (see Selection).

// Connect returns the client of the admin API at base, or, when base is "", of the running
// gateway named name (or the only one running) as its record in the state directory says,
// with its generated token when tokenFile and the environment give none. It says which
// gateway on stderr.
func Connect(base, name, tokenFile string, stderr io.Writer) (*ops.Client, error) {
	tok, err := ops.ReadToken(tokenFile)
	if err != nil {
		return nil, err
	}
	if base == "" {
		rec, err := serve.FindGateway(name)
		if err != nil {
			return nil, &ExitError{Code: 1, Msg: "stategate: " + err.Error()}
		}
		base = rec.Admin
		if tok == "" && rec.TokenFile != "" {
			if tok, err = ops.ReadToken(rec.TokenFile); err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(stderr, "stategate: gateway %s, admin %s\n", rec.Name, rec.Admin)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &ExitError{Code: 2, Msg: fmt.Sprintf("--admin %q is not an http(s) URL", base)}
	}
	return &ops.Client{Base: strings.TrimSuffix(base, "/"), Token: tok, HTTP: &http.Client{}}, nil
}

// AdminError is how an admin command reports err: an answer of the admin API other than
// 200 ends it with status 1 and the API's message, with a hint about the token for a 401.
func AdminError(err error) error {
	var ae *ops.APIError
	if !errors.As(err, &ae) {
		return err
	}
	msg := ae.Error()
	if ae.Status == http.StatusUnauthorized {
		msg += "; give the gateway's admin token with --admin-token-file FILE or " + ops.TokenEnv
	}
	return &ExitError{Code: 1, Msg: msg}
}

// Tools prints the gateway's tools: their modes with tool health, else every listed tool
// with its workflow hint, calls, latency and last refusal (what the status page shows).
func Tools(ctx context.Context, c *ops.Client, stdout, stderr io.Writer) error {
	tools, health, err := c.Overview(ctx)
	if err != nil {
		return AdminError(err)
	}
	if !health {
		fmt.Fprintln(stderr, "stategate: tool health is not configured (no \"health\" section): modes are not tracked")
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL\tWORKFLOW HINT\tCALLS\tP50\tP95\tLAST REFUSAL")
		for _, t := range tools {
			refusal := ""
			if t.LastRefusal != nil {
				refusal = t.LastRefusal.Code + " at " + t.LastRefusal.At.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", termsafe.String(t.Name), termsafe.String(t.Hint), t.Calls,
				seconds(t.P50), seconds(t.P95), termsafe.String(refusal))
		}
		return tw.Flush()
	}
	views, err := c.Tools(ctx)
	if err != nil {
		return AdminError(err)
	}
	// Names, reasons and errors come from upstreams: every cell is rendered for the
	// terminal (termsafe), so none can move the cursor, retitle the window or hide text.
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tUNIT\tMODE\tFAILURES\tFINGERPRINT\tLAST ERROR\tREASON")
	for _, t := range views {
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
		return &ExitError{Code: 1, Msg: "no known tool matches"}
	}
	if failed > 0 {
		return &ExitError{Code: 1, Msg: fmt.Sprintf("%d of %d change(s) refused", failed, len(changes))}
	}
	return nil
}

// Selection is what an acting command covers: one tool by its exact name, or a glob.
//
// # Notes
//
//   - Tool names come from upstreams: one may be named "**" or "a.*". --tool NAME always
//     means that one tool, byte for byte. A positional NAME without '*' is a name too (a
//     glob without wildcards matches only itself). One with '*' is a glob: the command
//     first previews what it would touch (dryRun), shows the count and the names, asks
//     for confirmation (or needs --yes when stdin is not a terminal), then acts on each
//     previewed tool by its exact name, so a tool that appears in between is not touched.
type Selection struct {
	tool, match string
}

// SelectionOf reads the target of an acting command from --tool or the positional.
func SelectionOf(tool, positional string) Selection {
	if tool != "" {
		return Selection{tool: tool}
	}
	if strings.Contains(positional, "*") {
		return Selection{match: positional}
	}
	return Selection{tool: positional}
}

// Confirmer asks the operator before a glob acts.
type Confirmer struct {
	Yes    bool // --yes: act without asking
	Stdin  io.Reader
	Stderr io.Writer
}

// IsTerminal reports whether r is an interactive terminal (a variable for tests).
var IsTerminal = func(r io.Reader) bool {
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
func (c Confirmer) confirm(glob, what string, lines []string) error {
	fmt.Fprintf(c.Stderr, "%s matches %d tool(s); %s:\n  %s\n", termsafe.String(glob), len(lines), what, strings.Join(lines, "\n  "))
	if c.Yes {
		return nil
	}
	if !IsTerminal(c.Stdin) {
		return &ExitError{Code: 2, Msg: "stdin is not a terminal: pass --yes to act on them (or --tool NAME for one tool)"}
	}
	fmt.Fprintf(c.Stderr, "Proceed with these %d tool(s)? [y/N] ", len(lines))
	answer, _ := bufio.NewReader(c.Stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return &ExitError{Code: 1, Msg: "cancelled: nothing changed"}
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

// actOnTools runs a mode or approve request (send, with the target and, for an approval,
// the definitions previewed): on the one tool named, or, for a glob, after a confirmed
// preview, on each previewed tool by its exact name.
func actOnTools(sel Selection, approve bool, send func(t ops.Target, pending map[string]string) ([]health.ModeChange, error), conf Confirmer) ([]health.ModeChange, error) {
	if sel.tool != "" && !approve {
		return send(ops.Target{Tool: sel.tool}, nil)
	}
	// An approval is always previewed, by name too: it sends back the definitions the
	// preview showed (pending), so one the server lists in between is not approved unseen.
	prev, err := send(ops.Target{Tool: sel.tool, Match: sel.match, DryRun: true}, nil)
	if err != nil {
		return nil, err
	}
	if sel.tool != "" {
		return send(ops.Target{Tool: sel.tool}, pendingOf(prev))
	}
	lines := make([]string, len(prev))
	for i, ch := range prev {
		lines[i] = changeLine(ch) + pendingLine(ch)
	}
	if err := conf.confirm(sel.match, "it would change", lines); err != nil {
		return nil, err
	}
	var all []health.ModeChange
	for _, ch := range prev {
		var pending map[string]string
		if approve {
			pending = pendingOf([]health.ModeChange{ch})
		}
		changes, err := send(ops.Target{Tool: ch.Name}, pending)
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

// printActed prints the changes an acting command made; those made before an error too.
func printActed(stdout io.Writer, changes []health.ModeChange, err error) error {
	if err != nil {
		if len(changes) > 0 {
			printChanges(stdout, changes)
		}
		return AdminError(err)
	}
	return printChanges(stdout, changes)
}

// Mode sets the mode of the selected tools (`stategate mode`).
func Mode(ctx context.Context, c *ops.Client, sel Selection, mode, reason string, conf Confirmer, stdout io.Writer) error {
	changes, err := actOnTools(sel, false, func(t ops.Target, _ map[string]string) ([]health.ModeChange, error) {
		return c.Mode(ctx, ops.ModeRequest{Target: t, Mode: mode, Reason: reason})
	}, conf)
	return printActed(stdout, changes, err)
}

// Approve approves the pending definitions of the selected tools (`stategate approve`).
func Approve(ctx context.Context, c *ops.Client, sel Selection, conf Confirmer, stdout io.Writer) error {
	changes, err := actOnTools(sel, true, func(t ops.Target, pending map[string]string) ([]health.ModeChange, error) {
		return c.Approve(ctx, ops.ApproveRequest{Target: t, Pending: pending})
	}, conf)
	return printActed(stdout, changes, err)
}

// Purge purges the response cache of one cached tool (by exact name) or of every cached
// tool a glob matches (previewed and confirmed like mode), on every replica, and lists the
// purged tools (`stategate purge`).
func Purge(ctx context.Context, c *ops.Client, sel Selection, conf Confirmer, stdout io.Writer) error {
	var purged []string
	if sel.tool != "" {
		p, err := c.Purge(ctx, ops.Target{Tool: sel.tool})
		if err != nil {
			return AdminError(err)
		}
		purged = p
	} else {
		would, err := c.Purge(ctx, ops.Target{Match: sel.match, DryRun: true})
		if err != nil {
			return AdminError(err)
		}
		lines := make([]string, len(would))
		for i, name := range would {
			lines[i] = termsafe.String(name)
		}
		if len(would) > 0 {
			if err := conf.confirm(sel.match, "it would purge", lines); err != nil {
				return err
			}
		}
		for _, name := range would {
			p, err := c.Purge(ctx, ops.Target{Tool: name})
			if err != nil {
				return AdminError(err)
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

// EventsOptions are what `stategate events` prints.
type EventsOptions struct {
	Filter    url.Values // type, tool, session
	Count     int        // the last Count events from history (0: none)
	CountSet  bool       // --count was given
	Since     string     // the events after this id instead ("": the last Count)
	Follow    bool       // then every new one, until ctx ends
	StopAfter int        // end after printing this many (0: never)
}

// Events prints events from the gateway's history, one JSON object a line: the last Count
// at once, or, with Follow, those and then every new one until interrupted (the stream
// from the last id printed, so none is lost or repeated in between); Since starts after
// that id instead.
func Events(ctx context.Context, c *ops.Client, o EventsOptions, stdout io.Writer) error {
	printed := 0
	emit := func(line []byte) bool {
		stdout.Write(append(termsafe.JSON(line), '\n')) // the same JSON, no raw control for the terminal
		printed++
		return o.StopAfter > 0 && printed >= o.StopAfter
	}
	q := o.Filter
	if q == nil {
		q = url.Values{}
	}
	from := o.Since
	if o.Count > 0 || !o.Follow || o.Since != "" {
		hq := maps.Clone(q)
		hq.Set("count", strconv.Itoa(o.Count))
		if o.Since != "" {
			hq.Set("since", o.Since)
			if !o.CountSet {
				hq.Set("count", strconv.Itoa(ops.DefaultHistory))
			}
		}
		events, last, err := c.History(ctx, hq)
		if err != nil {
			return AdminError(err)
		}
		for _, e := range events {
			if emit(e) {
				return nil
			}
		}
		if !o.Follow {
			return nil
		}
		from = strconv.FormatUint(last, 10)
	}
	if from != "" {
		q.Set("since", from)
	}
	err := c.Events(ctx, q, emit)
	if errors.Is(err, ops.ErrStreamEnded) {
		return &ExitError{Code: 1, Msg: err.Error()}
	}
	return AdminError(err)
}

// Reset puts a workflow instance back in its initial state, or in req.To (`stategate
// reset`): compare-and-set like any transition, an event, and a clear error for an unknown
// workflow, session, handle or state.
func Reset(ctx context.Context, c *ops.Client, req ops.ResetRequest, stdout io.Writer) error {
	out, err := c.Reset(ctx, req)
	if err != nil {
		return AdminError(err)
	}
	fmt.Fprintf(stdout, "%s: %s -> %s\n", termsafe.String(out.Workflow), termsafe.String(out.From), termsafe.String(out.To))
	return nil
}

// Approvals prints the calls held for an operator's approval, oldest first: the id
// approve-call and deny-call take, the tool, the principal, the time left and the
// arguments (every cell escaped for the terminal: names and arguments come from clients).
func Approvals(ctx context.Context, c *ops.Client, stdout io.Writer) error {
	list, err := c.Approvals(ctx)
	if err != nil {
		return AdminError(err)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no call waits for an operator")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTOOL\tPRINCIPAL\tSESSION\tLEFT\tARGUMENTS")
	for _, p := range list {
		left := time.Until(time.UnixMilli(p.Deadline)).Round(time.Second)
		if left < 0 {
			left = 0
		}
		// The tool, principal and arguments come escaped by the gateway (approval.Preview):
		// rendered again with their backslashes left alone, every control still escaped.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", termsafe.String(p.ID), oneLine(p.ToolShown), oneLine(p.Principal),
			termsafe.String(p.Session), left, oneLine(p.Arguments))
	}
	return tw.Flush()
}

// DecideCall approves (approve) or denies the held call id and says what was decided; a
// call decided already (the first decision stands), expired or unknown ends with status 1
// and the API's message.
func DecideCall(ctx context.Context, c *ops.Client, id string, approve bool, reason string, stdout io.Writer) error {
	p, err := c.DecideCall(ctx, id, approve, reason)
	if err != nil {
		return AdminError(err)
	}
	verdict, by, via := "", "", ""
	if p.Decision != nil {
		verdict, by, via = p.Decision.Verdict, p.Decision.By, p.Decision.Via
	}
	fmt.Fprintf(stdout, "%s (%s): %s by %s (%s)\n", termsafe.String(p.ID), oneLine(p.ToolShown), termsafe.String(verdict),
		termsafe.String(by), termsafe.String(via))
	return nil
}

// oneLine renders text the gateway escaped already (termsafe.String) for one line of a
// terminal: its backslashes as they are, any control (a line feed too) escaped.
func oneLine(s string) string {
	return strings.ReplaceAll(termsafe.Lines(s), "\n", `\n`)
}

// seconds writes a latency in seconds as milliseconds ("" for none).
func seconds(v float64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatFloat(v*1000, 'f', 1, 64) + " ms"
}
