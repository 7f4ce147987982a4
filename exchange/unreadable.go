package exchange

import (
	"context"
	"errors"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/exchange/health"
)

// Messages the core cannot read (issue 38; exchange/answer, unreadable.go, says why): an
// event whose payload is not one JSON value is withheld, and when it, or a JSON answer body
// that is not one JSON value, may hold the answer to the request, the client gets the
// gateway's error in its place (UnreadableAnswer); a second answer on one stream is
// withheld.

// InBatch reports whether data, one JSON value, is an array that holds an answer to the
// request (answer.InBatch). Such an answer is withheld like an unreadable one (Withhold).
func (ex Answer) InBatch(data []byte) bool { return answer.InBatch(data, ex.upstreamID) }

var errUnreadableEvent = errors.New("an SSE event whose data is not one JSON-RPC message: withheld")

// UnreadableAnswer is the client's answer in place of an answer the core could not read
// (see above): a JSON-RPC error (-32603) whose data carries UPSTREAM_UNAVAILABLE, counted
// as a broken answer for tool health. The exchange stays unanswered: a moving call's
// outcome is unknown and its lease is kept until it lapses (Close).
func (ex Answer) UnreadableAnswer(ctx context.Context) []byte {
	return ex.errorAnswer(ctx, health.Error, "the MCP server's answer could not be read")
}

// Withhold counts an event whose payload, data, is not one JSON value (answer.Unreadable),
// or is a batch holding the answer (InBatch), as withheld, and reports whether it may carry
// the answer to the request (answer.Carries): then, unless a readable answer follows on the
// stream, the client gets UnreadableAnswer when it ends.
func (ex Answer) Withhold(data []byte) (mayAnswer bool) {
	mayAnswer = answer.Carries(data, ex.upstreamID)
	ex.core.Fault(abi.FaultUpstreamBody, errUnreadableEvent, "method", ex.Method, "mayAnswer", mayAnswer)
	return mayAnswer
}
