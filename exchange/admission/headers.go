package admission

import (
	"mime"
	"strconv"
	"strings"

	"github.com/stategate/stategate/exchange/jsonrpc"
)

// Refusal is a request refused at admission: the HTTP status, the JSON-RPC error code and
// the message the client is answered with.
type Refusal struct {
	Status int
	Code   int
	Text   string
}

// Headers are a request's headers: Get gives a name's first field line, Values every one,
// each as it came.
type Headers interface {
	Get(name string) string
	Values(name string) []string
}

// Headers that say which session and protocol version a request belongs to.
const (
	HeaderSession = "Mcp-Session-Id"
	HeaderVersion = "MCP-Protocol-Version"
)

// HeaderAuthorization carries a request's credentials.
const HeaderAuthorization = "Authorization"

const (
	hdrMethod        = "Mcp-Method"
	hdrName          = "Mcp-Name"
	hdrAuthorization = HeaderAuthorization
	hdrEncoding      = "Content-Encoding"
	hdrType          = "Content-Type"
)

// Identity headers: the headers that say who sends a request or what it is, which the core
// reads with Get (the first value) and the upstream, or an authenticating proxy in front,
// may read otherwise (the last value, or all joined). A request that repeats one of them is
// refused, 400 with jsonrpc.CodeInvalidRequest, before anything else and on every method (Admit for
// a POST, CheckSession for the rest): the gateway must read exactly what the server reads
// (issue 25, finding 7).
//
// # Notes
//
//   - Repeated means more than one field line of the name, whatever the values: two equal
//     values, or one empty, are refused too (a proxy that strips one copy leaves the other).
//   - The headers: Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, the
//     configured principal header and Authorization. Authorization is not a list field
//     (RFC 9110 section 11.6.2 allows one credential), so a second one can only mean two
//     readers picking different ones: the token a proxy checked and the token the server
//     acts on could differ.
//   - cache.varyHeaders are not refused: an operator may vary on a list field, and the
//     cache keys every value in order (callerKeys), so no two callers share an entry.
//   - One field line holding a comma is one value: the core cannot tell a joined pair from
//     a value with a comma, so hosts must hand over each field line as it came (Headers).
var identityHeaders = [...]string{HeaderSession, HeaderVersion, hdrMethod, hdrName, hdrAuthorization}

// RepeatedHeader returns the name of an identity header that h repeats ("" for none);
// principal is the configured principal header ("" for none).
func RepeatedHeader(h Headers, principal string) string {
	if h == nil {
		return ""
	}
	for _, name := range identityHeaders {
		if len(h.Values(name)) > 1 {
			return name
		}
	}
	if principal != "" && len(h.Values(principal)) > 1 {
		return principal
	}
	return ""
}

// RefuseRepeated is the refusal of a request repeating header name (its message never
// holds the values: they may be credentials).
func RefuseRepeated(h Headers, name string) *Refusal {
	return &Refusal{400, jsonrpc.CodeInvalidRequest, "invalid request: the " + name + " header is sent " +
		strconv.Itoa(len(h.Values(name))) + " times; the gateway and the server could read different values: send it once"}
}

// Encoding refuses a body the core cannot read byte for byte as the server will: a
// compressed body, a charset not UTF-8 (refused, not passed on ungated).
func Encoding(h Headers) *Refusal {
	if ce := h.Get(hdrEncoding); ce != "" && !strings.EqualFold(ce, "identity") {
		return &Refusal{415, jsonrpc.CodeInvalidRequest, "compressed request bodies (" + ce + ") are not accepted by the gateway"}
	}
	if ct := h.Get(hdrType); ct != "" {
		if _, params, err := mime.ParseMediaType(ct); err == nil {
			if cs := params["charset"]; cs != "" && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
				return &Refusal{415, jsonrpc.CodeInvalidRequest, "request charset " + strconv.Quote(cs) + " is not accepted; send UTF-8"}
			}
		}
	}
	return nil
}
