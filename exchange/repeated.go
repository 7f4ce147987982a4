package exchange

import "strconv"

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
var identityHeaders = [...]string{hdrSession, hdrVersion, hdrMethod, hdrName, hdrAuthorization}

const hdrAuthorization = "Authorization"

// RepeatedHeader returns the name of an identity header that h repeats ("" for none).
func (c *Core) RepeatedHeader(h Headers) string {
	if h == nil {
		return ""
	}
	for _, name := range identityHeaders {
		if len(h.Values(name)) > 1 {
			return name
		}
	}
	if p := c.facts.principal; p != "" && len(h.Values(p)) > 1 {
		return p
	}
	return ""
}

// repeatedHeaderText is the message of the refusal of a request repeating header name
// (never its values: they may be credentials).
func repeatedHeaderText(name string, n int) string {
	return "invalid request: the " + name + " header is sent " + strconv.Itoa(n) +
		" times; the gateway and the server could read different values: send it once"
}
