package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/host/ops"
)

// The admin CLI: stategate tools | mode GLOB MODE | approve GLOB | purge GLOB | events, each a client
// of a running gateway's admin API (--admin URL, the token from --admin-token-file or
// STATEGATE_ADMIN_TOKEN).

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
	var out struct{ Tools []ops.ToolView }
	if err := c.call(ctx, "GET", "/admin/tools", nil, &out); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tUNIT\tMODE\tFAILURES\tFINGERPRINT\tLAST ERROR")
	for _, t := range out.Tools {
		fp := t.Fingerprint
		if len(fp) > 12 {
			fp = fp[:12]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", t.Name, t.Unit, t.Mode, t.Failures, fp, t.LastError)
	}
	return tw.Flush()
}

func printChanges(stdout io.Writer, changes []exchange.ModeChange) error {
	failed := 0
	for _, ch := range changes {
		if ch.OK {
			fmt.Fprintf(stdout, "%s: %s -> %s\n", ch.Name, ch.From, ch.To)
		} else {
			failed++
			fmt.Fprintf(stdout, "%s: %s -> %s refused: %s\n", ch.Name, ch.From, ch.To, ch.Error)
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

func cmdMode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: stategate mode GLOB MODE [--reason TEXT] [--admin URL] [--admin-token-file FILE]"
	var reason *string
	c, rest, err := adminFlags("mode", args, stderr, usage, func(fs flagSet) { reason = fs.String("reason", "", "why (logged, shown with the mode)") })
	if err != nil {
		return err
	}
	if len(rest) != 2 {
		return &exitError{code: 2, msg: usage}
	}
	var out struct{ Changes []exchange.ModeChange }
	if err := c.call(ctx, "POST", "/admin/tools/mode", map[string]string{"match": rest[0], "mode": rest[1], "reason": *reason}, &out); err != nil {
		return err
	}
	return printChanges(stdout, out.Changes)
}

func cmdApprove(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: stategate approve GLOB [--admin URL] [--admin-token-file FILE]"
	c, rest, err := adminFlags("approve", args, stderr, usage, nil)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return &exitError{code: 2, msg: usage}
	}
	var out struct{ Changes []exchange.ModeChange }
	if err := c.call(ctx, "POST", "/admin/tools/approve", map[string]string{"match": rest[0]}, &out); err != nil {
		return err
	}
	return printChanges(stdout, out.Changes)
}

// cmdPurge purges the response cache of every cached tool matching GLOB, on every replica
// (POST /admin/cache/purge), and lists the purged tools.
func cmdPurge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: stategate purge GLOB [--admin URL] [--admin-token-file FILE]"
	c, rest, err := adminFlags("purge", args, stderr, usage, nil)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return &exitError{code: 2, msg: usage}
	}
	var out struct{ Purged []string }
	if err := c.call(ctx, "POST", "/admin/cache/purge", map[string]string{"match": rest[0]}, &out); err != nil {
		return err
	}
	for _, name := range out.Purged {
		fmt.Fprintln(stdout, name)
	}
	fmt.Fprintf(stdout, "%d cached tool(s) purged\n", len(out.Purged))
	return nil
}

// cmdEvents tails the event stream (SSE), one JSON object a line, until interrupted (or
// --count events).
func cmdEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: stategate events [--type TYPE] [--tool NAME] [--count N] [--admin URL] [--admin-token-file FILE]"
	var typ, tool, count *string
	c, rest, err := adminFlags("events", args, stderr, usage, func(fs flagSet) {
		typ = fs.String("type", "", "only events of this type")
		tool = fs.String("tool", "", "only events of this tool")
		count = fs.String("count", "0", "stop after this many events (0: until interrupted)")
	})
	if err != nil {
		return err
	}
	n := 0
	if _, err := fmt.Sscan(*count, &n); err != nil || len(rest) != 0 || n < 0 {
		return &exitError{code: 2, msg: usage}
	}
	q := url.Values{}
	if *typ != "" {
		q.Set("type", *typ)
	}
	if *tool != "" {
		q.Set("tool", *tool)
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
	seen := 0
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			fmt.Fprintln(stdout, d)
			if seen++; n > 0 && seen >= n {
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

// authHint says how to give the token when the admin API answered 401.
func authHint(status int) string {
	if status != http.StatusUnauthorized {
		return ""
	}
	return "; give the gateway's admin token with --admin-token-file FILE or " + adminTokenEnv
}
