package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/events"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing (Options.Tracer): a server span per MCP POST request, named and attributed per
// OpenTelemetry's MCP semantic conventions, with child spans for the engine, the store
// and the upstream. W3C trace context comes from the client (the traceparent header, or
// params._meta.traceparent when the header is absent) and goes on to the upstream (the
// header, and params._meta where the client put it). Without a Tracer nothing here runs.

// MCP semantic convention attribute names (OpenTelemetry semconv, gen-ai/mcp).
const (
	attrMethod    = "mcp.method.name"
	attrTool      = "gen_ai.tool.name"
	attrOperation = "gen_ai.operation.name"
	attrSession   = "mcp.session.id"
	attrRequestID = "jsonrpc.request.id"
	attrErrorType = "error.type"
)

var propagator = propagation.TraceContext{}

// metaCarrier reads trace context from params._meta of a JSON-RPC request.
type metaCarrier struct{ meta gjson.Result }

func (m metaCarrier) Get(key string) string { return m.meta.Get(key).Str }
func (m metaCarrier) Set(string, string)    {}
func (m metaCarrier) Keys() []string        { return []string{"traceparent", "tracestate"} }

// startRequest starts the request's server span, a child of the client's trace context,
// and hands the gateway's span on to the upstream in the request's headers.
func (g *Gateway) startRequest(r *http.Request, body []byte) (*http.Request, trace.Span) {
	ctx := r.Context()
	if r.Header.Get("traceparent") != "" {
		ctx = propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	} else if meta := gjson.GetBytes(body, "params._meta"); meta.Get("traceparent").Exists() {
		ctx = propagator.Extract(ctx, metaCarrier{meta})
	}
	ctx, span := g.opts.Tracer.Start(ctx, "mcp", trace.WithSpanKind(trace.SpanKindServer))
	propagator.Inject(ctx, propagation.HeaderCarrier(r.Header))
	return r.WithContext(ctx), span
}

// describeRequest names the span after the admitted request and sets its attributes.
func describeRequest(span trace.Span, ex *exchange.Exchange) {
	name := ex.Method
	if name == "" {
		name = "mcp"
	}
	attrs := []attribute.KeyValue{attribute.String(attrMethod, ex.Method)}
	if ex.Tool != "" {
		name += " " + ex.Tool
		attrs = append(attrs, attribute.String(attrTool, ex.Tool), attribute.String(attrOperation, "execute_tool"))
	}
	if ex.Session != "" {
		attrs = append(attrs, attribute.String(attrSession, events.SessionDigest(ex.Session)))
	}
	if id := ex.ClientID(); len(id) > 0 {
		attrs = append(attrs, attribute.String(attrRequestID, gjson.ParseBytes(id).String()))
	}
	span.SetName(name)
	span.SetAttributes(attrs...)
}

// endRequest records the refusal the gateway answered with, if any, and ends the span.
func endRequest(span trace.Span, ex *exchange.Exchange) {
	if ex == nil {
		span.End()
		return
	}
	if code := ex.Refusal(); code != "" {
		span.SetAttributes(attribute.String(attrErrorType, code))
		span.SetStatus(codes.Error, code)
	}
	span.End()
}

// startUpstream starts the upstream call's client span and puts its context in the
// upstream request: the traceparent header, and params._meta.traceparent when the client
// sent one there (the body is rewritten; the original is left as it was).
func (g *Gateway) startUpstream(ctx context.Context, req *http.Request, ex *exchange.Exchange, body []byte) (context.Context, trace.Span, []byte) {
	if g.opts.Tracer == nil {
		return ctx, nil, body
	}
	ctx, span := g.opts.Tracer.Start(ctx, "upstream "+ex.Method, trace.WithSpanKind(trace.SpanKindClient))
	propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	if gjson.GetBytes(body, "params._meta.traceparent").Exists() {
		if out, err := sjson.SetBytes(body, "params._meta.traceparent", req.Header.Get("traceparent")); err == nil {
			body = out
		}
	}
	return ctx, span, body
}

// tracedPlugin gives each engine call a span.
type tracedPlugin struct {
	p  exchange.Plugin
	tr trace.Tracer
}

func (t tracedPlugin) Call(ctx context.Context, fn abi.Function, in []byte) ([]byte, error) {
	ctx, span := t.tr.Start(ctx, "stategate.engine "+fn.Name())
	out, err := t.p.Call(ctx, fn, in)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return out, err
}

// tracedState gives each state operation a span ("stategate.store load", "load_near",
// "store", "lock", "forget"): a decorator around any exchange.State.
type tracedState struct {
	next exchange.State
	tr   trace.Tracer
}

// traceState wraps st with spans when tr is set.
func traceState(st exchange.State, tr trace.Tracer) exchange.State {
	if tr == nil {
		return st
	}
	return tracedState{next: st, tr: tr}
}

func (t tracedState) span(ctx context.Context, op string) (context.Context, func(error)) {
	ctx, span := t.tr.Start(ctx, "stategate.store "+op)
	return ctx, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

func (t tracedState) Capabilities() exchange.Capabilities { return t.next.Capabilities() }

func (t tracedState) Load(ctx context.Context, keys []string, near bool) ([]exchange.Slot, error) {
	op := "load"
	if near {
		op = "load_near"
	}
	ctx, end := t.span(ctx, op)
	out, err := t.next.Load(ctx, keys, near)
	end(err)
	return out, err
}

func (t tracedState) Store(ctx context.Context, owner, key string, value []byte, prev exchange.Slot, lease exchange.Lease) error {
	ctx, end := t.span(ctx, "store")
	err := t.next.Store(ctx, owner, key, value, prev, lease)
	end(err)
	return err
}

func (t tracedState) Lock(ctx context.Context, keys []string, ttl time.Duration, load bool) (exchange.Lease, []exchange.Slot, error) {
	ctx, end := t.span(ctx, "lock")
	lease, slots, err := t.next.Lock(ctx, keys, ttl, load)
	end(err)
	return lease, slots, err
}

func (t tracedState) Forget(ctx context.Context, session string, keys []string) error {
	ctx, end := t.span(ctx, "forget")
	err := t.next.Forget(ctx, session, keys)
	end(err)
	return err
}
