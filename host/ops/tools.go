package ops

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/health"
)

// ToolView is one tool in GET /admin/tools: its health, and its response-cache figures on
// this replica when the cache is on and the tool was looked up in it.
type ToolView struct {
	health.ToolStatus
	Cache *CacheFigures `json:"cache,omitempty"`
}

// CacheFigures are a tool's response-cache figures on this replica.
type CacheFigures struct {
	Hits          int64 `json:"hits"`
	Misses        int64 `json:"misses"`
	Entries       int64 `json:"entries"`
	Invalidations int64 `json:"invalidations"`
}

func (a *Admin) tools(w http.ResponseWriter, r *http.Request) {
	ts, err := a.operator().Tools(r.Context())
	if err != nil {
		a.operatorError(w, err)
		return
	}
	out := make([]ToolView, len(ts))
	figures, _ := a.operator().(CacheFigurer)
	for i, t := range ts {
		out[i] = ToolView{ToolStatus: t}
		if figures != nil {
			if f, ok := figures.CacheFigures(t.Name); ok {
				out[i].Cache = &CacheFigures{Hits: f.Hits, Misses: f.Misses, Entries: f.Entries, Invalidations: f.Invalidations}
			}
		}
	}
	a.reply(w, http.StatusOK, map[string]any{"tools": out})
}

// ToolOverview is one tool in GET /admin/tools/overview: every tool the upstream listed
// (and every tool health knows), with what the configuration does with it, its mode
// (when health is configured), its latency and its last refusal.
type ToolOverview struct {
	Name        string   `json:"name"`
	Hint        string   `json:"hint,omitempty"`
	Mode        string   `json:"mode,omitempty"`
	Calls       uint64   `json:"calls"`
	P50         float64  `json:"p50,omitempty"`
	P95         float64  `json:"p95,omitempty"`
	LastRefusal *Refusal `json:"lastRefusal,omitempty"`
}

func (a *Admin) overview(w http.ResponseWriter, r *http.Request) {
	byName := map[string]*ToolOverview{}
	var names []string
	add := func(n string) *ToolOverview {
		if t, ok := byName[n]; ok {
			return t
		}
		t := &ToolOverview{Name: n}
		byName[n] = t
		names = append(names, n)
		return t
	}
	if a.opts.Gateway != nil {
		for _, n := range a.opts.Gateway.Listed() {
			add(n)
		}
	}
	health := true
	if ts, err := a.operator().Tools(r.Context()); err == nil {
		for _, t := range ts {
			if t.Unit == "tool" || t.Unit == "" {
				add(t.Name).Mode = t.Mode
			}
		}
	} else {
		health = false
	}
	if a.opts.Metrics != nil {
		for n, l := range a.opts.Metrics.Latencies() {
			if t, ok := byName[n]; ok {
				t.Calls, t.P50, t.P95 = l.Calls, l.P50, l.P95
			}
		}
		for n, ref := range a.opts.Metrics.LastRefusals() {
			if t, ok := byName[n]; ok {
				ref := ref
				t.LastRefusal = &ref
			}
		}
	}
	sort.Strings(names)
	out := make([]ToolOverview, len(names))
	for i, n := range names {
		if a.opts.Gateway != nil {
			byName[n].Hint = a.opts.Gateway.ToolHint(n)
		}
		out[i] = *byName[n]
	}
	a.reply(w, http.StatusOK, map[string]any{"tools": out, "health": health})
}

// Target is what every acting endpoint's body says it acts on: one tool by its exact
// name ("tool", byte for byte: never a glob), or a glob ("match"), exactly one of them;
// "dryRun" previews the action (what it would touch) and changes nothing.
type Target struct {
	Tool   string `json:"tool"`
	Match  string `json:"match"`
	DryRun bool   `json:"dryRun"`
}

// action checks the target: a request naming both a tool and a glob, or neither, is
// refused before it reaches anything.
func (a *Admin) action(w http.ResponseWriter, t Target) (health.Action, bool) {
	switch {
	case t.Tool != "" && t.Match != "":
		a.fail(w, http.StatusBadRequest, "bad_request", `give "tool" (one tool, by its exact name) or "match" (a glob), not both`)
		return health.Action{}, false
	case t.Tool == "" && strings.TrimSpace(t.Match) == "":
		a.fail(w, http.StatusBadRequest, "bad_request", `"tool" (one tool, by its exact name) or "match" (a glob) is required`)
		return health.Action{}, false
	}
	return health.Action{Tool: t.Tool, Match: t.Match, DryRun: t.DryRun}, true
}

// ModeRequest is the body of POST /admin/tools/mode.
type ModeRequest struct {
	Target
	Mode   string `json:"mode"`
	Reason string `json:"reason"`
}

func (a *Admin) mode(w http.ResponseWriter, r *http.Request) {
	var req ModeRequest
	if !a.decode(w, r, &req) {
		return
	}
	act, ok := a.action(w, req.Target)
	if !ok {
		return
	}
	if strings.TrimSpace(req.Mode) == "" {
		a.fail(w, http.StatusBadRequest, "bad_request", `"mode" is required`)
		return
	}
	changes, err := a.operator().SetMode(r.Context(), act, req.Mode, req.Reason)
	a.log.Info("operator action", "action", "mode", "tool", req.Tool, "match", req.Match, "dryRun", req.DryRun,
		"mode", req.Mode, "reason", req.Reason, "changed", len(changes), "err", errString(err), "remote", r.RemoteAddr)
	if !req.DryRun {
		a.acted(r, "mode", actionData(req.Target, err, map[string]any{"mode": req.Mode, "reason": req.Reason, "changes": changeNames(changes)}))
	}
	if err != nil {
		a.operatorError(w, err)
		return
	}
	a.reply(w, http.StatusOK, changesAnswer(changes, req.DryRun))
}

// ApproveRequest is the body of POST /admin/tools/approve. "pending" is what the operator
// was shown (a dryRun answer's changes[].pending, merged): only those definitions are
// approved, so a server that lists another one between the preview and the click does not
// get it approved unseen. The status page and the CLI always send it.
type ApproveRequest struct {
	Target
	Pending map[string]string `json:"pending"`
}

func (a *Admin) approve(w http.ResponseWriter, r *http.Request) {
	var req ApproveRequest
	if !a.decode(w, r, &req) {
		return
	}
	act, ok := a.action(w, req.Target)
	if !ok {
		return
	}
	act.Pending = req.Pending
	changes, err := a.operator().Approve(r.Context(), act)
	a.log.Info("operator action", "action", "approve", "tool", req.Tool, "match", req.Match, "dryRun", req.DryRun,
		"changed", len(changes), "err", errString(err), "remote", r.RemoteAddr)
	if !req.DryRun {
		a.acted(r, "approve", actionData(req.Target, err, map[string]any{"changes": changeNames(changes)}))
	}
	if err != nil {
		a.operatorError(w, err)
		return
	}
	a.reply(w, http.StatusOK, changesAnswer(changes, req.DryRun))
}

// actionData is an operator_action event's data: the target, the error when it failed,
// and extra.
func actionData(t Target, err error, extra map[string]any) map[string]any {
	if t.Tool != "" {
		extra["tool"] = t.Tool
	} else {
		extra["match"] = t.Match
	}
	if err != nil {
		extra["error"] = err.Error()
	}
	return extra
}

// changeNames lists the units a mode or approve changed.
func changeNames(changes []health.ModeChange) []string {
	out := []string{}
	for _, c := range changes {
		if c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

// changesAnswer is the answer of mode and approve: each unit's change, and "dryRun": true
// when nothing was changed.
func changesAnswer(changes []health.ModeChange, dryRun bool) map[string]any {
	out := map[string]any{"changes": nonNil(changes)}
	if dryRun {
		out["dryRun"] = true
	}
	return out
}

func nonNil(c []health.ModeChange) []health.ModeChange {
	if c == nil {
		return []health.ModeChange{}
	}
	return c
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// state answers a workflow's stored state: ?key=KEY, or ?workflow=W with &session=ID or
// &handle=H (and &principal=P when the configuration scopes state by principal).
func (a *Admin) state(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key := q.Get("key")
	if key == "" {
		wf, session, handle := q.Get("workflow"), q.Get("session"), q.Get("handle")
		if wf == "" || (session == "") == (handle == "") {
			a.fail(w, http.StatusBadRequest, "bad_request", "give ?key=KEY, or ?workflow=ID with one of &session=ID or &handle=VALUE (and &principal=P)")
			return
		}
		if a.opts.Gateway == nil {
			a.fail(w, http.StatusServiceUnavailable, "starting", "the store is not open yet")
			return
		}
		var err error
		if key, err = a.opts.Gateway.StateKey(wf, q.Get("principal"), session+handle); err != nil {
			a.fail(w, http.StatusBadRequest, "bad_request", "workflow["+wf+"]: "+err.Error())
			return
		}
	}
	if !strings.HasPrefix(key, "stategate/v1/") || len(key) > 4096 {
		a.fail(w, http.StatusBadRequest, "bad_request", `a state key starts with "stategate/v1/" (see /admin/state?workflow=...)`)
		return
	}
	st := a.stateOf()
	if st == nil {
		a.fail(w, http.StatusServiceUnavailable, "starting", "the store is not open yet")
		return
	}
	slots, err := st.Load(r.Context(), []string{key}, false)
	if err != nil {
		a.fail(w, http.StatusServiceUnavailable, "store_unavailable", "the store did not answer: "+err.Error())
		return
	}
	v := slots[0].Value
	if !slots[0].Exists {
		a.fail(w, http.StatusNotFound, "not_found", "no state under key["+key+"] (never moved, forgotten, or expired)")
		return
	}
	out := map[string]any{"key": key}
	if json.Valid(v) {
		out["snapshot"] = json.RawMessage(v)
	} else {
		out["raw"] = string(v)
	}
	a.reply(w, http.StatusOK, out)
}

// CacheFigurer gives a tool's response-cache figures (exchange.Core implements it).
type CacheFigurer interface {
	CacheFigures(tool string) (cache.Figures, bool)
}

// CacheLister lists every tool's cache figures (exchange.Core implements it).
type CacheLister interface {
	AllCacheFigures() (map[string]cache.Figures, bool)
}

// cache answers GET /admin/cache: the response cache's figures on this replica for every
// tool looked up in it, whether or not tool health is configured (GET /admin/tools lists
// only the tools health knows). 409 cache_off without a cache section.
func (a *Admin) cache(w http.ResponseWriter, r *http.Request) {
	l, ok := a.operator().(CacheLister)
	var all map[string]cache.Figures
	if ok {
		all, ok = l.AllCacheFigures()
	}
	if !ok {
		a.fail(w, http.StatusConflict, "cache_off", exchange.ErrCacheOff.Error())
		return
	}
	out := make(map[string]CacheFigures, len(all))
	for tool, f := range all {
		out[tool] = CacheFigures{Hits: f.Hits, Misses: f.Misses, Entries: f.Entries, Invalidations: f.Invalidations}
	}
	a.reply(w, http.StatusOK, map[string]any{"tools": out})
}

// CachePurger is the response cache's operator surface (exchange.Core implements it).
type CachePurger interface {
	PurgeCache(ctx context.Context, a health.Action) ([]string, error)
}

// purge answers POST /admin/cache/purge {"tool": NAME} or {"match": GLOB}: the cached tool
// named (exactly), or every cached tool the glob matches, is purged on every replica (its
// generation moves), and the purged tools are listed; with "dryRun" they are listed and
// nothing is purged.
func (a *Admin) purge(w http.ResponseWriter, r *http.Request) {
	var req Target
	if !a.decode(w, r, &req) {
		return
	}
	act, ok := a.action(w, req)
	if !ok {
		return
	}
	p, ok := a.operator().(CachePurger)
	if !ok {
		a.fail(w, http.StatusConflict, "cache_off", exchange.ErrCacheOff.Error())
		return
	}
	purged, err := p.PurgeCache(r.Context(), act)
	a.log.Info("operator action", "action", "cache_purge", "tool", req.Tool, "match", req.Match, "dryRun", req.DryRun,
		"purged", len(purged), "err", errString(err), "remote", r.RemoteAddr)
	if !req.DryRun {
		a.acted(r, "purge", actionData(req, err, map[string]any{"purged": purged}))
	}
	if err != nil {
		a.operatorError(w, err)
		return
	}
	if purged == nil {
		purged = []string{}
	}
	out := map[string]any{"purged": purged}
	if req.DryRun {
		out["dryRun"] = true
	}
	a.reply(w, http.StatusOK, out)
}
