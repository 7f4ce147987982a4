package ops

import (
	"errors"
	"net/http"
	"time"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/events"
	"github.com/tidwall/gjson"
)

// ResetRequest is the body of POST /admin/state/reset: the instance (workflow and one of
// session or handle, with principal when state is scoped by principal), the state to put
// it in ("" for the workflow's initial state), and why.
type ResetRequest struct {
	Workflow  string `json:"workflow"`
	Session   string `json:"session"`
	Handle    string `json:"handle"`
	Principal string `json:"principal"`
	To        string `json:"to"`
	Reason    string `json:"reason"`
}

// resetWait bounds how long a reset waits for a moving call holding the instance's state.
// The reset goes through the core's state protocol (exchange.Replace): a lease, a read, a
// compare-and-set under it, as a transition.
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
//   - The event names the session or handle by a digest (events.SessionDigest): a
//     session id acts as a credential.
func (a *Admin) reset(w http.ResponseWriter, r *http.Request) {
	var req ResetRequest
	if !a.decode(w, r, &req) {
		return
	}
	if req.Workflow == "" || (req.Session == "") == (req.Handle == "") {
		a.fail(w, http.StatusBadRequest, "bad_request", `give "workflow" and one of "session" or "handle" (and "principal" when state is scoped by principal)`)
		return
	}
	rs, ok := a.opts.Gateway.(Resetter)
	if !ok {
		a.fail(w, http.StatusNotImplemented, "reset_unavailable", "this gateway cannot reset workflow state")
		return
	}
	key, err := a.opts.Gateway.StateKey(req.Workflow, req.Principal, req.Session+req.Handle)
	if err != nil {
		a.fail(w, http.StatusBadRequest, "bad_request", "workflow["+req.Workflow+"]: "+err.Error())
		return
	}
	st := a.stateOf()
	if st == nil {
		a.fail(w, http.StatusServiceUnavailable, "starting", "the store is not open yet")
		return
	}
	who := "session"
	if req.Handle != "" {
		who = "handle"
	}
	var snap []byte
	var from string
	errNotFound, errBadState := errors.New("not found"), errors.New("bad state")
	var badState error
	err = exchange.Replace(r.Context(), st, req.Session, key, resetWait, func(old exchange.Slot) ([]byte, error) {
		if !old.Exists {
			return nil, errNotFound
		}
		var err error
		if snap, from, err = rs.ResetSnapshot(req.Workflow, req.To, old.Value); err != nil {
			badState = err
			return nil, errBadState
		}
		return snap, nil
	})
	switch {
	case err == nil:
	case errors.Is(err, errNotFound):
		a.fail(w, http.StatusNotFound, "not_found", "workflow["+req.Workflow+"]: nothing is stored for that "+who+
			" (it never moved, was forgotten or expired: it is in its initial state)")
		return
	case errors.Is(err, errBadState):
		a.fail(w, http.StatusBadRequest, "bad_request", "workflow["+req.Workflow+"]: "+badState.Error())
		return
	case errors.Is(err, exchange.ErrBusy):
		a.fail(w, http.StatusConflict, "busy", "a moving call holds this workflow's state: try again when it ends")
		return
	case errors.Is(err, exchange.ErrConflict):
		a.fail(w, http.StatusConflict, "conflict", "the state moved meanwhile: look it up and try again")
		return
	default:
		a.fail(w, http.StatusServiceUnavailable, "store_unavailable", "the store did not answer: "+err.Error())
		return
	}
	to := gjson.GetBytes(snap, "state").Str
	digest := events.SessionDigest(req.Session + req.Handle)
	a.log.Info("operator action", "action", "reset", "workflow", req.Workflow, who, digest, "from", from, "to", to,
		"reason", req.Reason, "remote", r.RemoteAddr)
	data := map[string]any{"workflow": req.Workflow, who: digest, "reason": req.Reason, "via": viaOf(r)}
	pub := a.opts.Publisher
	if pub == nil && a.opts.Bus != nil {
		pub = a.opts.Bus
	}
	if pub != nil {
		pub.Publish(events.Event{Type: events.EventWorkflowReset, OldState: from, NewState: to, Data: data})
	}
	a.acted(r, "reset", map[string]any{"workflow": req.Workflow, who: digest, "from": from, "to": to, "reason": req.Reason})
	a.reply(w, http.StatusOK, map[string]any{"workflow": req.Workflow, "from": from, "to": to})
}
