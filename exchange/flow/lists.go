package flow

import (
	"context"
	"time"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/listcache"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/tidwall/gjson"
)

// fromCopy answers an admitted tools/list from the gateway's copy of the upstream's list
// (Options.Lists) when it is fresh: the copy is decorated as the upstream's answer would
// be, and carries the remaining ttlMs. Otherwise it returns the fill the upstream's answer
// completes (nil: the answer is not kept).
func (f *Flow) fromCopy(ctx context.Context, ex *exchange.Exchange, r Request) (Decision, *listcache.Fill, bool) {
	c := f.o.Core
	sid := ex.Session
	if ex.OwnSession() {
		sid = "" // the gateway's session: the upstream has none
	}
	p, vary := c.CredentialHeaders()
	hit, fill, ok := f.o.Lists.Lookup(ctx, listcache.Request{Version: ex.Version(), Session: sid,
		Params: gjson.GetBytes(r.Body, "params"), Headers: r.Headers, Principal: p, Vary: vary})
	if !ok {
		if fill != nil {
			c.Count(stats.CountListCacheMisses)
		}
		return Decision{}, fill, false
	}
	c.Count(stats.CountListCacheHits)
	msg := jsonrpc.AppendResult(nil, ex.UpstreamID(), hit.Result)
	ex.Answer().Classify(ctx, 200, "application/json", "")
	out, before := ex.Answer().RewriteJSON(ctx, msg)
	if hit.TTL > 0 {
		out, _ = listcache.SetTTL(out, int64(hit.TTL/time.Millisecond), answer.Set)
	}
	for _, m := range before {
		f.o.Notify(Notice{To: ex.Session, Msg: m})
	}
	ex.Close()
	d := jsonAnswer(200, out)
	d.Exchange = ex
	return d, nil, true
}

// kept is an answer's end for the copies: a tools/list answer fills its copy, an
// initialize answer tells whether the session's server declared listChanged.
func (o *Open) kept() {
	l := o.f.o.Lists
	if l == nil || o.ex == nil || o.ex.Upstream == "" {
		return
	}
	switch o.ex.Method {
	case exchange.MethodToolsList:
		l.Store(o.fill, o.ex.Upstream)
	case exchange.MethodInitialize:
		l.Declared(o.upSession, o.ex.Upstream)
	}
}

// unhold ends this Open's holding of its session's GET stream (the copies' freshness).
func (o *Open) unhold() {
	if o.release != nil {
		o.release()
		o.release = nil
	}
}
