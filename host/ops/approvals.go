package ops

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/internal/termsafe"
)

// Operator approval (approvals entries with "by": "operator"): the calls the gateway
// holds are records in the store (approval.Hold), so every replica lists them and any
// replica's admin API decides them; the replica holding the call sees the decision there.

// DecideRequest is the body of POST /admin/approvals/approve and /admin/approvals/deny:
// the held call's id (GET /admin/approvals, the approval_requested event), and why (kept
// in the approval_decided event).
type DecideRequest struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// DecidedBy is who decides through the admin API: the admin token names nobody, so every
// decision is the admin's.
const DecidedBy = "admin"

// hold is the store's held calls (nil while starting).
func (a *Admin) hold() *approval.Hold {
	st := a.stateOf()
	if st == nil {
		return nil
	}
	return approval.NewHold(st, rand.Read)
}

// approvals answers GET /admin/approvals: the calls held for an operator on every replica
// of the store, oldest first ({"approvals": [approval.Pending]}).
func (a *Admin) approvals(w http.ResponseWriter, r *http.Request) {
	h := a.hold()
	if h == nil {
		a.fail(w, http.StatusServiceUnavailable, "starting", "the store is not open yet")
		return
	}
	list, err := h.List(r.Context())
	if err != nil {
		a.fail(w, http.StatusServiceUnavailable, "store", "the held calls could not be read: "+err.Error())
		return
	}
	a.replySafe(w, map[string]any{"approvals": list})
}

// replySafe answers 200 with v as JSON in which every control, bidi or invisible
// character is a \u escape (termsafe.JSON): the same JSON, and a record's raw tool name
// (a client's, a server's) cannot act on a terminal that prints the answer.
func (a *Admin) replySafe(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		a.fail(w, http.StatusInternalServerError, "internal", "the answer could not be encoded")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(append(termsafe.JSON(b), '\n'))
}

// howOf names how an operator decided, for the record and the event: "cli", "status
// page" or "api".
func howOf(r *http.Request) string {
	if v := viaOf(r); v != "page" {
		return v
	}
	return "status page"
}

// decideCall answers POST /admin/approvals/approve (verdict approved) and .../deny: the
// decision is written once, in the store; the answer is the record with it
// ({"approval": approval.Pending}).
//
// # Notes
//
//   - 400 for an id that is not one (24 hex digits), 404 for an unknown one, 409 when the
//     call was decided already (the answer names the first decision: the first wins) or
//     its deadline passed (it is expired then, and never runs).
//   - An approval_decided event says who (DecidedBy) and how (howOf); the replica that
//     holds the call answers it.
func (a *Admin) decideCall(verdict string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req DecideRequest
		if !a.decode(w, r, &req) {
			return
		}
		h := a.hold()
		if h == nil {
			a.fail(w, http.StatusServiceUnavailable, "starting", "the store is not open yet")
			return
		}
		d := approval.Decision{Verdict: verdict, By: DecidedBy, Via: howOf(r)}
		p, err := h.Decide(r.Context(), req.ID, d)
		switch {
		case errors.Is(err, approval.ErrBadID):
			a.fail(w, http.StatusBadRequest, "bad_request", `"id" must be a held call's id (24 hexadecimal digits, from stategate approvals)`)
			return
		case errors.Is(err, approval.ErrUnknown):
			a.fail(w, http.StatusNotFound, "not_found", "no call with id "+req.ID+" is held (it may have been held on a store this gateway does not use)")
			return
		case errors.Is(err, approval.ErrDecided) && p.Decision != nil:
			a.fail(w, http.StatusConflict, "decided", "call "+req.ID+" ("+p.ToolShown+") was "+p.Decision.Verdict+" already, by "+
				p.Decision.By+" ("+p.Decision.Via+") at "+time.UnixMilli(p.Decision.At).UTC().Format(time.RFC3339)+": the first decision stands")
			return
		case errors.Is(err, approval.ErrHoldExpired):
			a.published(p, "")
			a.fail(w, http.StatusConflict, "expired", "call "+req.ID+" ("+p.ToolShown+") waited past its deadline: it expired and was not run")
			return
		case err != nil:
			a.fail(w, http.StatusServiceUnavailable, "store", "the decision could not be stored: "+err.Error())
			return
		}
		a.log.Info("operator action", "action", "decide-call", "id", req.ID, "verdict", verdict, "via", d.Via, "remote", r.RemoteAddr)
		a.published(p, req.Reason)
		a.replySafe(w, map[string]any{"approval": p})
	}
}

// published publishes approval_decided for p's decision.
func (a *Admin) published(p approval.Pending, reason string) {
	pub := a.opts.Publisher
	if pub == nil {
		if a.opts.Bus == nil {
			return
		}
		pub = a.opts.Bus
	}
	if p.Decision == nil {
		return
	}
	data := map[string]any{"id": p.ID, "verdict": p.Decision.Verdict, "by": p.Decision.By, "via": p.Decision.Via}
	if reason != "" {
		data["reason"] = reason
	}
	pub.Publish(events.Event{Type: events.EventApprovalDecided, Tool: p.Tool, Data: data})
}
