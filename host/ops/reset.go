package ops

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/host/store"
	"github.com/tidwall/gjson"
)

// resetRequest is the body of POST /admin/state/reset: the instance (workflow and one of
// session or handle, with principal when state is scoped by principal), the state to put
// it in ("" for the workflow's initial state), and why.
type resetRequest struct {
	Workflow  string `json:"workflow"`
	Session   string `json:"session"`
	Handle    string `json:"handle"`
	Principal string `json:"principal"`
	To        string `json:"to"`
	Reason    string `json:"reason"`
}

// resetWait bounds how long a reset waits for a moving call holding the instance's state.
const resetWait = 5 * time.Second

// reset answers POST /admin/state/reset: the instance's stored snapshot is replaced, by
// compare-and-set under the state's lease like any transition, with the snapshot of the
// state asked for; the answer and a workflow_reset event say from and to.
//
// # Notes
//
//   - 400 for an unknown workflow or state, 404 when nothing is stored for the session or
//     handle (it never moved, or was forgotten: it is in its initial state already), 409
//     when a moving call holds the state past resetWait or the state moved meanwhile.
//   - The event names the session or handle by a digest (exchange.SessionDigest): a
//     session id acts as a credential.
func (a *Admin) reset(w http.ResponseWriter, r *http.Request) {
	var req resetRequest
	if !a.decode(w, r, &req) {
		return
	}
	if req.Workflow == "" || (req.Session == "") == (req.Handle == "") {
		a.fail(w, http.StatusBadRequest, "bad_request", `give "workflow" and one of "session" or "handle" (and "principal" when state is scoped by principal)`)
		return
	}
	if a.opts.ResetSnapshot == nil || a.opts.StateKey == nil {
		a.fail(w, http.StatusNotImplemented, "reset_unavailable", "this gateway cannot reset workflow state")
		return
	}
	key, err := a.opts.StateKey(req.Workflow, req.Principal, req.Session+req.Handle)
	if err != nil {
		a.fail(w, http.StatusBadRequest, "bad_request", "workflow["+req.Workflow+"]: "+err.Error())
		return
	}
	st := a.opts.Store()
	if st == nil {
		a.fail(w, http.StatusServiceUnavailable, "starting", "the store is not open yet")
		return
	}
	lctx, cancel := context.WithTimeout(r.Context(), resetWait)
	release, err := st.Lock(lctx, []string{key}, 2*resetWait)
	cancel()
	if errors.Is(err, store.ErrBusy) {
		a.fail(w, http.StatusConflict, "busy", "a moving call holds this workflow's state: try again when it ends")
		return
	} else if err != nil {
		a.fail(w, http.StatusServiceUnavailable, "store_unavailable", "the store did not answer: "+err.Error())
		return
	}
	defer release()
	old, err := st.Get(r.Context(), key)
	if err != nil {
		a.fail(w, http.StatusServiceUnavailable, "store_unavailable", "the store did not answer: "+err.Error())
		return
	}
	who := "session"
	if req.Handle != "" {
		who = "handle"
	}
	if old == nil {
		a.fail(w, http.StatusNotFound, "not_found", "workflow["+req.Workflow+"]: nothing is stored for that "+who+
			" (it never moved, was forgotten or expired: it is in its initial state)")
		return
	}
	snap, from, err := a.opts.ResetSnapshot(req.Workflow, req.To, old)
	if err != nil {
		a.fail(w, http.StatusBadRequest, "bad_request", "workflow["+req.Workflow+"]: "+err.Error())
		return
	}
	ok, err := st.CompareAndSwap(r.Context(), req.Session, key, old, snap)
	if err != nil {
		a.fail(w, http.StatusServiceUnavailable, "store_unavailable", "the store did not answer: "+err.Error())
		return
	}
	if !ok {
		a.fail(w, http.StatusConflict, "conflict", "the state moved meanwhile: look it up and try again")
		return
	}
	to := gjson.GetBytes(snap, "state").Str
	digest := exchange.SessionDigest(req.Session + req.Handle)
	a.log.Info("operator action", "action", "reset", "workflow", req.Workflow, who, digest, "from", from, "to", to,
		"reason", req.Reason, "remote", r.RemoteAddr)
	data := map[string]any{"workflow": req.Workflow, who: digest, "reason": req.Reason, "via": viaOf(r)}
	pub := a.opts.Publisher
	if pub == nil && a.opts.Bus != nil {
		pub = a.opts.Bus
	}
	if pub != nil {
		pub.Publish(exchange.Event{Type: exchange.EventWorkflowReset, OldState: from, NewState: to, Data: data})
	}
	a.acted(r, "reset", map[string]any{"workflow": req.Workflow, who: digest, "from": from, "to": to, "reason": req.Reason})
	a.reply(w, http.StatusOK, map[string]any{"workflow": req.Workflow, "from": from, "to": to})
}
