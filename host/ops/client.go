package ops

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/exchange/health"
)

// Client calls a gateway's admin API over the routes NewAdmin registers (the stategate
// admin commands are its users: each request says so in ViaHeader).
type Client struct {
	Base  string       // the admin listener's URL, http(s)://HOST:PORT
	Token string       // the bearer token ("": none, a loopback listener)
	HTTP  *http.Client // nil: http.DefaultClient
}

// APIError is an answer of the admin API other than 200: its status and the message of its
// error body ("" when it had none).
type APIError struct {
	Base    string
	Status  int
	Message string
}

func (e *APIError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("admin[%s]: %s (HTTP %d)", e.Base, e.Message, e.Status)
	}
	return fmt.Sprintf("admin[%s]: HTTP %d", e.Base, e.Status)
}

// ErrStreamEnded is Events' error when the gateway ended the event stream.
var ErrStreamEnded = errors.New("the event stream ended (the gateway stopped?)")

// Open sends a request on route (query appended, body as JSON when not nil) and returns a
// 200 answer for the caller to read and close; any other status is an *APIError.
func (c *Client) Open(ctx context.Context, r Route, query url.Values, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	u := strings.TrimSuffix(c.Base, "/") + r.Path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	req.Header.Set(ViaHeader, "cli")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin[%s]: %w", c.Base, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		var e struct{ Error string }
		json.Unmarshal(b, &e)
		return nil, &APIError{Base: c.Base, Status: resp.StatusCode, Message: e.Error}
	}
	return resp, nil
}

// Do sends a request on route and decodes its 200 answer into out.
func (c *Client) Do(ctx context.Context, r Route, query url.Values, body, out any) error {
	resp, err := c.Open(ctx, r, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return json.Unmarshal(b, out)
}

// Overview lists every tool the upstream listed with what the status page shows of it,
// and whether tool health is configured (GET /admin/tools/overview).
func (c *Client) Overview(ctx context.Context) (tools []ToolOverview, health bool, err error) {
	var out struct {
		Tools  []ToolOverview
		Health bool
	}
	err = c.Do(ctx, RouteToolsOverview, nil, nil, &out)
	return out.Tools, out.Health, err
}

// Tools lists the tools tool health knows (GET /admin/tools).
func (c *Client) Tools(ctx context.Context) ([]ToolView, error) {
	var out struct{ Tools []ToolView }
	err := c.Do(ctx, RouteTools, nil, nil, &out)
	return out.Tools, err
}

// Mode sets the mode of the tools req names (POST /admin/tools/mode); with DryRun it
// previews.
func (c *Client) Mode(ctx context.Context, req ModeRequest) ([]health.ModeChange, error) {
	var out struct{ Changes []health.ModeChange }
	err := c.Do(ctx, RouteMode, nil, req, &out)
	return out.Changes, err
}

// Approve approves the pending definitions of the tools req names (POST
// /admin/tools/approve); with DryRun it previews.
func (c *Client) Approve(ctx context.Context, req ApproveRequest) ([]health.ModeChange, error) {
	var out struct{ Changes []health.ModeChange }
	err := c.Do(ctx, RouteApprove, nil, req, &out)
	return out.Changes, err
}

// Purge purges the response cache of the tools t names on every replica and lists them
// (POST /admin/cache/purge); with DryRun it lists them only.
func (c *Client) Purge(ctx context.Context, t Target) ([]string, error) {
	var out struct{ Purged []string }
	err := c.Do(ctx, RoutePurge, nil, t, &out)
	return out.Purged, err
}

// ResetAnswer is the answer of a reset: the workflow and the states it left and entered.
type ResetAnswer struct{ Workflow, From, To string }

// Reset puts a workflow instance in a state (POST /admin/state/reset).
func (c *Client) Reset(ctx context.Context, req ResetRequest) (ResetAnswer, error) {
	var out ResetAnswer
	err := c.Do(ctx, RouteReset, nil, req, &out)
	return out, err
}

// History returns events from the gateway's history, as JSON, and the last id it holds
// (GET /admin/events/history; query: count, since, type, tool, session).
func (c *Client) History(ctx context.Context, query url.Values) (events []json.RawMessage, last uint64, err error) {
	var out struct {
		Events []json.RawMessage
		Last   uint64
	}
	err = c.Do(ctx, RouteHistory, query, nil, &out)
	return out.Events, out.Last, err
}

// Events follows the event stream (GET /admin/events; query: since, type, tool, session)
// and hands emit each event's JSON until emit returns true (nil), ctx ends (nil) or the
// stream ends (ErrStreamEnded, or the read's error).
func (c *Client) Events(ctx context.Context, query url.Values, emit func([]byte) bool) error {
	resp, err := c.Open(ctx, RouteEvents, query, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
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
		return fmt.Errorf("admin[%s]: event stream: %w", c.Base, err)
	}
	return ErrStreamEnded
}

// Approvals lists the calls held for an operator (GET /admin/approvals).
func (c *Client) Approvals(ctx context.Context) ([]approval.Pending, error) {
	var out struct{ Approvals []approval.Pending }
	err := c.Do(ctx, RouteApprovals, nil, nil, &out)
	return out.Approvals, err
}

// DecideCall approves (approve true) or denies the held call id (POST
// /admin/approvals/approve or /admin/approvals/deny) and returns its record with the
// decision.
func (c *Client) DecideCall(ctx context.Context, id string, approve bool, reason string) (approval.Pending, error) {
	route := RouteDenyCall
	if approve {
		route = RouteApproveCall
	}
	var out struct{ Approval approval.Pending }
	err := c.Do(ctx, route, nil, DecideRequest{ID: id, Reason: reason}, &out)
	return out.Approval, err
}
