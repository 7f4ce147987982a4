package admission

import (
	"bytes"
	"strconv"

	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// MaxDepth bounds a request's nesting at admission, and every later reading of the same
// bytes; arguments deeper than the engine's limit are its own denial (ARGUMENTS_TOO_DEEP).
const MaxDepth = 4096

// CodeHeaderMismatch is the 2026-07-28 error for Mcp-Method / Mcp-Name headers that
// disagree with the body.
const CodeHeaderMismatch = -32020

const (
	batchVersion = "2025-06-18" // batches were removed in this version
	maxBatch     = 100
)

// Body parses body as one JSON-RPC message or batch, refusing one over limit bytes, not
// JSON, or repeating a member name. An oversized body's refusal comes with the id the start
// of the body shows (nil for none), so the client can match the error.
func Body(body []byte, limit int) (doc gjson.Result, id []byte, r *Refusal) {
	if len(body) > limit {
		if id := gjson.GetBytes(body[:min(len(body), 4096)], "id"); id.Type == gjson.String || id.Type == gjson.Number {
			return gjson.Result{}, []byte(id.Raw), tooLarge(limit)
		}
		return gjson.Result{}, nil, tooLarge(limit)
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') || jsonx.Validate(body, MaxDepth) != nil {
		return gjson.Result{}, nil, &Refusal{400, jsonrpc.CodeParseError, "parse error: the body is not one JSON-RPC message or batch"}
	}
	doc = gjson.ParseBytes(body)
	if jsonrpc.RepeatsMember(doc, 0) {
		return gjson.Result{}, nil, &Refusal{400, jsonrpc.CodeInvalidRequest, "request repeats a member name in an object; the gateway and the server could read different values"}
	}
	return doc, nil, nil
}

func tooLarge(limit int) *Refusal {
	return &Refusal{413, jsonrpc.CodeInvalidRequest, "request body over the gateway's limit of " + strconv.Itoa(limit) + " bytes"}
}

// Agree refuses a message whose headers name another protocol version, method or target
// than its body, read as e (a misleading header cannot steer a gate, or a server, that
// trusts it). version is the MCP-Protocol-Version header; the version in effect is
// returned (the body's params._meta one when the header is absent).
func Agree(h Headers, e *jsonrpc.Envelope, version, method string) (string, *Refusal) {
	if version == "" {
		version = e.Version.Str
	} else if v := e.Version; v.Exists() && v.Str != version {
		return version, &Refusal{400, CodeHeaderMismatch, "MCP-Protocol-Version header " + strconv.Quote(version) + " does not match the body's _meta protocolVersion " + strconv.Quote(v.Str)}
	}
	// 2026-07-28 requests name their method and target in headers.
	if hm := h.Get(hdrMethod); hm != "" && hm != method {
		return version, &Refusal{400, CodeHeaderMismatch, "Mcp-Method header " + strconv.Quote(hm) + " does not match the body's method " + strconv.Quote(method)}
	}
	if hn := h.Get(hdrName); hn != "" {
		// The value may be Base64-wrapped (=?base64?...?=): decoded before comparing.
		var target gjson.Result
		switch method {
		case "tools/call", "prompts/get":
			target = e.Call.Name
		case "resources/read":
			target = e.Call.URI
		default:
			return version, nil
		}
		if name, ok := DecodeHeaderValue(hn); !ok {
			return version, &Refusal{400, CodeHeaderMismatch, "Mcp-Name header holds invalid characters or an invalid =?base64?...?= value"}
		} else if name != target.Str || target.Type != gjson.String {
			return version, &Refusal{400, CodeHeaderMismatch, "Mcp-Name header " + strconv.Quote(hn) + " does not match the body's " + nameMember(method) + " " + strconv.Quote(target.Str)}
		}
	}
	return version, nil
}

// nameMember is the params member Mcp-Name mirrors for method.
func nameMember(method string) string {
	if method == "resources/read" {
		return "uri"
	}
	return "name"
}

// Batch applies the batch rule: batches exist only before 2025-06-18, do not nest, hold at
// most 100 messages, and never carry a method gated reports the core acts on (one JSON-RPC
// request could otherwise fan out past the gate, or slip a tools/call past a host that
// cannot split it). Other batches pass as they are (nil).
func Batch(doc gjson.Result, version string, gated func(method string) bool) *Refusal {
	if version >= batchVersion {
		return &Refusal{400, jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not part of protocol version " + version}
	}
	n := 0
	var refuse string
	doc.ForEach(func(_, m gjson.Result) bool {
		n++
		switch {
		case !m.IsObject():
			refuse = "a batch element must be a JSON-RPC message object"
		case jsonrpc.CaseVariantIn(m, &refuse):
		case gated(m.Get("method").Str):
			refuse = "batches holding " + m.Get("method").Str + " are not accepted by the gateway; send it as a request of its own"
		case n > maxBatch:
			refuse = "a batch holds at most " + strconv.Itoa(maxBatch) + " messages"
		}
		return refuse == ""
	})
	if n == 0 {
		refuse = "empty batch"
	}
	if refuse != "" {
		return &Refusal{400, jsonrpc.CodeInvalidRequest, refuse}
	}
	return nil
}
