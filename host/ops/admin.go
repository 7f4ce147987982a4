package ops

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/exchange/toollist"
)

// Operator is the health feature's operator surface (exchange.Core implements it).
type Operator interface {
	Tools(ctx context.Context) ([]health.ToolStatus, error)
	SetMode(ctx context.Context, a health.Action, mode, reason string) ([]health.ModeChange, error)
	Approve(ctx context.Context, a health.Action) ([]health.ModeChange, error)
}

// ReloadResult is the answer to a reload.
type ReloadResult struct {
	OK       bool     `json:"ok"`
	Errors   []string `json:"errors,omitempty"` // every error of a refused configuration
	Warnings []string `json:"warnings,omitempty"`
}

// AdminOptions configures the admin handler.
type AdminOptions struct {
	// Token is the bearer token every endpoint but the probes and the page requires; ""
	// only on a loopback listener (Listen refuses otherwise), where requests must then
	// come from loopback names and origins (no cross-site requests from a browser).
	Token string
	App   *App
	Bus   *Bus
	// Publisher receives the operator_action and workflow_reset events (metrics and the
	// bus); nil: the Bus.
	Publisher events.Publisher
	Metrics   *Metrics
	// Gateway is the gateway the API reads and acts on; nil: none (every route that needs
	// it answers as a gateway still starting would).
	Gateway Gateway
	Logger  *slog.Logger
}

// Gateway is what the admin API reads of the gateway and acts on. Each method answers for
// what serves at the time of the call: a reload swaps the configuration and the exchange
// core. A Gateway that is also a Reloader can reload (POST /admin/reload) and one that is a
// Resetter can reset workflow state (POST /admin/state/reset); without, those answer 501.
type Gateway interface {
	// Operator is the exchange core serving now (nil while starting: health is off then).
	Operator() Operator
	// State is the gateway's state, as the exchange core keeps it (nil while starting):
	// read for GET /admin/state, replaced by the core's state protocol (exchange.Replace)
	// for POST /admin/state/reset.
	State() exchange.State
	// StateKey derives a workflow's state key from its session id or handle (the engine's
	// StateKey for the configuration serving now).
	StateKey(workflow, principal, value string) (string, error)
	// For the status page: the exchange counters; the tool names the upstream listed
	// (exchange.Core.ListedNames); what the configuration does with a tool; the
	// configuration's tool names no listed tool meets; its workflows as diagrams (the
	// graph command's output).
	Stats() map[string]int64
	Listed() []string
	ToolHint(name string) string
	UnknownTools() []toollist.UnknownTool
	Workflows() any
}

// Reloader is a Gateway whose configuration can be re-read.
type Reloader interface {
	Reload(ctx context.Context) ReloadResult
}

// Resetter is a Gateway that can reset a workflow instance: ResetSnapshot builds the
// snapshot that puts an instance, stored as old, in state to ("" for the initial state)
// and names the state it leaves (engine.ResetSnapshot).
type Resetter interface {
	ResetSnapshot(workflow, to string, old []byte) ([]byte, string, error)
}

// Admin is the admin listener's handler.
type Admin struct {
	opts  AdminOptions
	token [sha256.Size]byte
	log   *slog.Logger
	mux   *http.ServeMux
}

// maxAdminBody caps an admin request body.
const maxAdminBody = 64 << 10

// NewAdmin returns the admin handler.
func NewAdmin(o AdminOptions) *Admin {
	a := &Admin{opts: o, log: o.Logger, mux: http.NewServeMux()}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if o.Token != "" {
		a.token = sha256.Sum256([]byte(o.Token))
	}
	m := a.mux
	m.HandleFunc(RouteHealthz.pattern(), a.healthz)
	m.HandleFunc(RouteReadyz.pattern(), a.readyz)
	m.HandleFunc(RoutePage.pattern(), a.page)
	m.HandleFunc(RouteAdminPage.pattern(), a.page)
	m.HandleFunc(RouteStatic.pattern(), a.asset)
	m.Handle(RouteMetrics.pattern(), a.auth(a.metrics))
	m.Handle(RouteInfo.pattern(), a.auth(a.info))
	m.Handle(RouteLatency.pattern(), a.auth(a.latency))
	m.Handle(RouteTools.pattern(), a.auth(a.tools))
	m.Handle(RouteToolsOverview.pattern(), a.auth(a.overview))
	m.Handle(RouteWorkflows.pattern(), a.auth(a.workflows))
	m.Handle(RouteMode.pattern(), a.auth(a.mode))
	m.Handle(RouteApprove.pattern(), a.auth(a.approve))
	m.Handle(RoutePurge.pattern(), a.auth(a.purge))
	m.Handle(RouteCache.pattern(), a.auth(a.cache))
	m.Handle(RouteState.pattern(), a.auth(a.state))
	m.Handle(RouteReset.pattern(), a.auth(a.reset))
	m.Handle(RouteReload.pattern(), a.auth(a.reload))
	m.Handle(RouteApprovals.pattern(), a.auth(a.approvals))
	m.Handle(RouteApproveCall.pattern(), a.auth(a.decideCall(approval.VerdictApproved)))
	m.Handle(RouteDenyCall.pattern(), a.auth(a.decideCall(approval.VerdictDenied)))
	m.Handle(RouteEvents.pattern(), a.auth(a.sse))
	m.Handle(RouteHistory.pattern(), a.auth(a.history))
	m.Handle(RouteWSEvents.pattern(), a.auth(a.ws))
	return a
}

// ServeHTTP implements http.Handler.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Listen opens the admin listener on addr. Without a token only a loopback address is
// accepted: anything else is refused before a socket is opened.
func Listen(addr, token string) (net.Listener, error) {
	if token == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("admin: address[%s]: %w", addr, err)
		}
		if !isLoopbackHost(host) {
			return nil, fmt.Errorf("admin: address[%s] is not loopback: a non-loopback admin listener needs a token (--admin-token-file or STATEGATE_ADMIN_TOKEN)", addr)
		}
	}
	return net.Listen("tcp", addr)
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// auth wraps an endpoint: with a token, a request without "Authorization: Bearer TOKEN"
// gets 401 and reaches nothing; without one (loopback only), requests must come from
// loopback names and origins, so a web page cannot drive the admin API from a browser.
func (a *Admin) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.opts.Token == "" {
			p := admission.OriginPolicy{Loopback: true}
			if err := p.Check(r.Header.Get("Origin"), r.Host); err != nil {
				a.fail(w, http.StatusForbidden, "forbidden", err.Error())
				return
			}
		} else if !a.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="stategate admin"`)
			a.fail(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required (Authorization: Bearer TOKEN)")
			return
		}
		h(w, r)
	})
}

// authorized compares the request's bearer token with the configured one in constant
// time (over SHA-256 digests, so the length does not leak either).
func (a *Admin) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(h[len(prefix):])))
	return subtle.ConstantTimeCompare(got[:], a.token[:]) == 1
}

func (a *Admin) healthz(w http.ResponseWriter, r *http.Request) {
	s, _ := a.opts.App.State()
	status := http.StatusOK
	if s == StateStopped {
		status = http.StatusServiceUnavailable
	}
	a.reply(w, status, map[string]string{"state": string(s)})
}

func (a *Admin) readyz(w http.ResponseWriter, r *http.Request) {
	s, _ := a.opts.App.State()
	status := http.StatusOK
	if !a.opts.App.Ready() {
		status = http.StatusServiceUnavailable
	}
	a.reply(w, status, map[string]string{"state": string(s)})
}

func (a *Admin) metrics(w http.ResponseWriter, r *http.Request) {
	if a.opts.Metrics == nil {
		a.fail(w, http.StatusNotFound, "not_found", "metrics are off")
		return
	}
	a.opts.Metrics.Handler().ServeHTTP(w, r)
}

// info is the status page's summary: the gateway's state, counters and bus figures.
func (a *Admin) info(w http.ResponseWriter, r *http.Request) {
	s, parts := a.opts.App.State()
	_, reload := a.opts.Gateway.(Reloader)
	out := map[string]any{"state": s, "parts": parts, "reload": reload}
	unknown := []toollist.UnknownTool{}
	if g := a.opts.Gateway; g != nil {
		out["counters"] = g.Stats()
		unknown = append(unknown, g.UnknownTools()...)
	}
	out["unknownTools"] = unknown
	if a.opts.Bus != nil {
		out["subscribers"] = a.opts.Bus.Subscribers()
		out["eventsDropped"] = a.opts.Bus.Dropped()
	}
	a.reply(w, http.StatusOK, out)
}

// latency answers each tool's call count and p50/p95 in seconds, from the histogram.
func (a *Admin) latency(w http.ResponseWriter, r *http.Request) {
	out := map[string]Latency{}
	if a.opts.Metrics != nil {
		out = a.opts.Metrics.Latencies()
	}
	a.reply(w, http.StatusOK, map[string]any{"tools": out})
}

func (a *Admin) workflows(w http.ResponseWriter, r *http.Request) {
	var out any = []any{}
	if a.opts.Gateway != nil {
		out = a.opts.Gateway.Workflows()
	}
	a.reply(w, http.StatusOK, map[string]any{"workflows": out})
}

func (a *Admin) reload(w http.ResponseWriter, r *http.Request) {
	rl, ok := a.opts.Gateway.(Reloader)
	if !ok {
		a.fail(w, http.StatusNotImplemented, "reload_unavailable", "this gateway has no configuration file to reload")
		return
	}
	res := rl.Reload(r.Context())
	a.log.Info("operator action", "action", "reload", "ok", res.OK, "errors", len(res.Errors), "remote", r.RemoteAddr)
	a.acted(r, "reload", map[string]any{"ok": res.OK})
	status := http.StatusOK
	if !res.OK {
		status = http.StatusUnprocessableEntity
	}
	a.reply(w, status, res)
}

// ViaHeader says which client sent an admin request: "cli" (the stategate commands),
// "page" (the status page); anything else, or none, is "api".
const ViaHeader = "X-Stategate-Via"

// viaOf names where a request came from, for operator_action events.
func viaOf(r *http.Request) string {
	switch v := r.Header.Get(ViaHeader); v {
	case "cli", "page":
		return v
	}
	return "api"
}

// acted publishes an operator_action event: the action, where it came from, and what it
// acted on (data). A dry run is not an action.
func (a *Admin) acted(r *http.Request, action string, data map[string]any) {
	pub := a.opts.Publisher
	if pub == nil {
		if a.opts.Bus == nil {
			return
		}
		pub = a.opts.Bus
	}
	if data == nil {
		data = map[string]any{}
	}
	data["action"], data["via"] = action, viaOf(r)
	pub.Publish(events.Event{Type: events.EventOperatorAction, Data: data})
}

// apiError is every admin error's body.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func (a *Admin) fail(w http.ResponseWriter, status int, code, msg string) {
	a.reply(w, status, apiError{Error: msg, Code: code})
}

func (a *Admin) reply(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"the answer could not be encoded","code":"internal"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decode reads a JSON request body into v: only application/json (a browser cannot send
// it cross-site without a preflight the admin listener never grants), at most
// maxAdminBody bytes, one object with known members.
func (a *Admin) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		a.fail(w, http.StatusUnsupportedMediaType, "bad_request", "the body must be JSON (Content-Type: application/json)")
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAdminBody+1))
	if err != nil {
		a.fail(w, http.StatusBadRequest, "bad_request", "the body could not be read: "+err.Error())
		return false
	}
	if len(body) > maxAdminBody {
		a.fail(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes", maxAdminBody))
		return false
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		a.fail(w, http.StatusBadRequest, "bad_request", "the body is not the expected JSON object: "+err.Error())
		return false
	}
	if dec.More() {
		a.fail(w, http.StatusBadRequest, "bad_request", "the body holds more than one JSON value")
		return false
	}
	return true
}

// operatorError answers an error of the health operator methods.
func (a *Admin) operatorError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, health.ErrOff):
		a.fail(w, http.StatusConflict, "health_off", err.Error())
		return
	case errors.Is(err, exchange.ErrCacheOff):
		a.fail(w, http.StatusConflict, "cache_off", err.Error())
		return
	case errors.Is(err, health.ErrInvalidOperation):
		a.fail(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	a.fail(w, http.StatusInternalServerError, "internal", err.Error())
}

// stateOf is the gateway's state (nil while starting or when the host gives none).
func (a *Admin) stateOf() exchange.State {
	if a.opts.Gateway == nil {
		return nil
	}
	return a.opts.Gateway.State()
}

// operator is the exchange core serving now (one whose health is off while starting).
func (a *Admin) operator() Operator {
	if a.opts.Gateway != nil {
		if op := a.opts.Gateway.Operator(); op != nil {
			return op
		}
	}
	return offOperator{}
}

// offOperator answers while the gateway is starting: health is not available yet.
type offOperator struct{}

func (offOperator) Tools(context.Context) ([]health.ToolStatus, error) {
	return nil, health.ErrOff
}
func (offOperator) SetMode(context.Context, health.Action, string, string) ([]health.ModeChange, error) {
	return nil, health.ErrOff
}
func (offOperator) Approve(context.Context, health.Action) ([]health.ModeChange, error) {
	return nil, health.ErrOff
}
