package gateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tidwall/gjson"
)

// serveBatch handles a 2025-03-26 JSON-RPC batch message by message: each element goes
// through the same path as a single request (gate, limits, decoration, transitions), and
// the responses are answered together as one JSON array. Notifications produced along
// the way go to the session's GET stream, since a JSON batch answer cannot carry them.
func (g *Gateway) serveBatch(w http.ResponseWriter, r *http.Request, body []byte) {
	elems := gjson.ParseBytes(body).Array()
	if len(elems) == 0 {
		writeRPCError(w, http.StatusBadRequest, "null", -32600, "empty batch")
		return
	}
	var responses []string
	for _, e := range elems {
		if !e.IsObject() {
			// Batches do not nest: answering element by element must not recurse.
			responses = append(responses, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"a batch element must be a JSON-RPC message object"}}`)
			continue
		}
		sub := r.Clone(r.Context())
		sub.Body = nopCloser{bytes.NewReader([]byte(e.Raw))}
		sub.ContentLength = int64(len(e.Raw))
		sub.Header.Set("Accept", "application/json, text/event-stream")
		rec := httptest.NewRecorder()
		g.servePost(rec, sub)
		res := rec.Result()
		if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			rd := newSSEReader(res.Body)
			for {
				ev, err := rd.next()
				if err != nil {
					break
				}
				if len(ev.data) == 0 {
					continue
				}
				if gjson.GetBytes(ev.data, "id").Exists() && !gjson.GetBytes(ev.data, "method").Exists() {
					responses = append(responses, string(ev.data))
				} else if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
					g.streams.send(sid, [][]byte{append([]byte(nil), ev.data...)})
				}
			}
			continue
		}
		if b := bytes.TrimSpace(rec.Body.Bytes()); len(b) > 0 && gjson.ValidBytes(b) {
			responses = append(responses, string(b))
		}
		for k, v := range res.Header {
			if strings.EqualFold(k, "Mcp-Session-Id") {
				w.Header()[k] = v
			}
		}
	}
	if len(responses) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	out := "[" + strings.Join(responses, ",") + "]"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(out))
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
