package filter

import (
	"errors"
	"strconv"

	"github.com/stategate/stategate/exchange/oauth"
	"github.com/tidwall/gjson"
)

// Settings are the filter's own knobs. They come from the VM configuration
// (vm_config.configuration in Envoy), a JSON object whose members are all optional:
//
//	{"maxRequestBodyBytes": 1048576, "maxResponseBodyBytes": 8388608,
//	 "maxStateKeys": 100000, "casRetries": 64, "holdRequestHeaders": false,
//	 "allowedOrigins": ["https://app.example"], "allowedHosts": ["mcp.example"],
//	 "gcHeapMiB": 64, "publicUrl": "https://mcp.example.com"}
//
// The plugin configuration stays the stategate configuration document, unchanged.
type Settings struct {
	// MaxRequestBodyBytes caps a buffered POST body; a larger tools/call, tools/list or
	// initialize request is answered with a JSON-RPC error -32600 naming the cap.
	MaxRequestBodyBytes int
	// MaxResponseBodyBytes caps a buffered JSON answer and one SSE event; larger answers
	// pass unchanged (decoration fails open).
	MaxResponseBodyBytes int
	// MaxStateKeys bounds the shared-data keys one VM (one Envoy worker) creates. Shared
	// data has no delete and no TTL, so keys never shrink; at the bound, calls that would
	// need a new key are denied with GATE_UNAVAILABLE.
	MaxStateKeys int
	// CASRetries bounds the re-read-and-transition rounds on compare-and-set conflicts.
	CASRetries int
	// HoldRequestHeaders holds a POST's headers until its body has been read, so a denied
	// tools/call never reaches the upstream at all and the per-tool timeout header can be
	// set. It needs Envoy >= 1.35 with the filter's allow_on_headers_stop_iteration: true:
	// without that option Envoy turns the pause into StopAllIteration, which also stops the
	// body callbacks and stalls every POST. Off (the default), headers go on at once and a
	// denied call's upstream request is reset before any body byte was sent.
	HoldRequestHeaders bool
	// AllowedOrigins are the browser origins allowed to call through the filter (exact, or
	// "*" for any); empty allows loopback origins only. Requests with another Origin get
	// 403 (DNS rebinding, as the MCP specification asks servers to check).
	AllowedOrigins []string
	// AllowedHosts, when set, are the only :authority names (besides loopback names) the
	// filter answers to.
	AllowedHosts []string
	// GCHeapMiB is the heap size, in MiB, at which the filter's Go runtime collects
	// garbage: in the TinyGo module the heap is grown to it at VM start (gc_tinygo.go); in
	// the standard-Go module it is runtime/debug.SetMemoryLimit with proportional
	// collection off (gc_wasm.go). 0 keeps each runtime's default; standard Go's is
	// collecting whenever the heap doubles. In a wasm VM that default collects on
	// nearly every buffered tools/list (the live heap is small, so it doubles after a few
	// MB), and a collection there costs milliseconds: docs/performance.md has the figures.
	// Set it above the largest working set one VM (one Envoy worker) holds at once: its
	// concurrent streams' buffered bodies (maxRequestBodyBytes, maxResponseBodyBytes) plus
	// a few MB; a live heap above it makes the runtime collect continually.
	GCHeapMiB int
	// PublicURL is the origin clients reach the MCP endpoint at (scheme://host[:port]).
	// When set, protected-resource metadata (RFC 9728) answered on a GET of
	// /.well-known/oauth-protected-resource[/PATH] names it as its resource, and every
	// WWW-Authenticate challenge names the metadata there (resource_metadata), as
	// oauth.Map rewrites them. Empty: both pass unchanged. Never taken from
	// :authority.
	PublicURL string
}

// DefaultSettings are the settings of an empty VM configuration.
var DefaultSettings = Settings{
	MaxRequestBodyBytes:  1 << 20,
	MaxResponseBodyBytes: 8 << 20,
	MaxStateKeys:         100000,
	CASRetries:           64,
	GCHeapMiB:            64,
}

// ParseSettings reads a VM configuration. Empty means DefaultSettings; unknown members
// and non-positive values are errors, so a typo never silently falls back to a default.
func ParseSettings(doc []byte) (Settings, error) {
	s := DefaultSettings
	if len(trimSpace(doc)) == 0 {
		return s, nil
	}
	if !gjson.ValidBytes(doc) {
		return s, errors.New("vm configuration: not valid JSON")
	}
	root := gjson.ParseBytes(doc)
	if !root.IsObject() {
		return s, errors.New("vm configuration: must be a JSON object")
	}
	var err error
	root.ForEach(func(k, v gjson.Result) bool {
		var dst *int
		switch k.Str {
		case "allowedOrigins", "allowedHosts":
			var list []string
			ok := v.IsArray()
			v.ForEach(func(_, e gjson.Result) bool {
				ok = ok && e.Type == gjson.String && e.Str != ""
				list = append(list, e.Str)
				return ok
			})
			if !ok {
				err = errors.New("vm configuration: " + k.Str + " must be an array of non-empty strings")
				return false
			}
			if k.Str == "allowedOrigins" {
				s.AllowedOrigins = list
			} else {
				s.AllowedHosts = list
			}
			return true
		case "publicUrl":
			u, perr := oauth.ParsePublicURL(v.Str)
			if v.Type != gjson.String || perr != nil {
				err = errors.New("vm configuration: publicUrl must be an http(s) origin (scheme://host[:port])")
				return false
			}
			s.PublicURL = u
			return true
		case "holdRequestHeaders":
			if v.Type != gjson.True && v.Type != gjson.False {
				err = errors.New("vm configuration: holdRequestHeaders must be true or false")
				return false
			}
			s.HoldRequestHeaders = v.Type == gjson.True
			return true
		case "maxRequestBodyBytes":
			dst = &s.MaxRequestBodyBytes
		case "maxResponseBodyBytes":
			dst = &s.MaxResponseBodyBytes
		case "maxStateKeys":
			dst = &s.MaxStateKeys
		case "casRetries":
			dst = &s.CASRetries
		case "gcHeapMiB":
			n, perr := strconv.Atoi(v.Raw)
			if v.Type != gjson.Number || perr != nil || n < 0 || n > 1<<16 {
				err = errors.New("vm configuration: gcHeapMiB must be an integer from 0 (Go's default) to 65536")
				return false
			}
			s.GCHeapMiB = n
			return true
		default:
			err = errors.New("vm configuration: unknown member " + strconv.Quote(k.Str))
			return false
		}
		n, perr := strconv.Atoi(v.Raw)
		if v.Type != gjson.Number || perr != nil || n <= 0 || n > 1<<30 {
			err = errors.New("vm configuration: " + k.Str + " must be a positive integer up to 2^30")
			return false
		}
		*dst = n
		return true
	})
	return s, err
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
