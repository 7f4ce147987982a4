// Package abi is the contract between the stategate plugin and every host that runs it:
// export names, error and denial codes, the _meta key prefix and the message shapes.
//
// The guest, the Go host, the Envoy filter and the documentation all derive from this
// package; nothing else spells an export name or a code as a string literal.
//
// # Notes
//
//   - Every export takes one JSON document and answers one JSON document. A document with a
//     top-level "error" member ({"code","message"}) is a failure; anything else is a result.
//     The Extism exports always return 0, so that hosts in any language read one shape.
//   - ABI.md beside this file is the reference for people writing hosts.
package abi

import "strings"

// Function identifies one engine export.
type Function uint32

// The engine exports, in ABI order. The numeric values are the function ids of the raw
// export ExportRawCall and never change.
const (
	FuncDecorateTools  Function = 1
	FuncDecorateResult Function = 2
	FuncTransition     Function = 3
	FuncCheckLimits    Function = 4
	FuncCheckConfig    Function = 5
	FuncToolHealth     Function = 6
)

// The exchange module's own exports (ABI.md, "The exchange exports"): their function ids
// for its raw and stdio entries. The engine module answers them UNKNOWN_FUNCTION.
const (
	FuncHTTPRequest Function = 16
	FuncHTTPAnswer  Function = 17
	FuncHTTPTimeout Function = 18
)

// ExchangeFunctions lists the exchange module's own Functions.
var ExchangeFunctions = []Function{FuncHTTPRequest, FuncHTTPAnswer, FuncHTTPTimeout}

// Functions lists every Function, in ABI order.
var Functions = []Function{FuncDecorateTools, FuncDecorateResult, FuncTransition, FuncCheckLimits, FuncCheckConfig, FuncToolHealth}

// Required lists the Functions every build of the plugin must export.
var Required = []Function{FuncDecorateTools, FuncDecorateResult, FuncTransition, FuncCheckLimits}

// Name returns the Extism export name of f, or "" for an unknown Function.
func (f Function) Name() string {
	switch f {
	case FuncDecorateTools:
		return "decorate_tools"
	case FuncDecorateResult:
		return "decorate_result"
	case FuncTransition:
		return "transition"
	case FuncCheckLimits:
		return "check_limits"
	case FuncCheckConfig:
		return "check_config"
	case FuncToolHealth:
		return "tool_health"
	case FuncHTTPRequest:
		return "http_request"
	case FuncHTTPAnswer:
		return "http_answer"
	case FuncHTTPTimeout:
		return "http_timeout"
	}
	return ""
}

// FunctionByName returns the engine Function whose export name is name.
func FunctionByName(name string) (Function, bool) {
	for _, f := range Functions {
		if f.Name() == name {
			return f, true
		}
	}
	return 0, false
}

// Raw exports: a zero-copy entry used by the project's own wazero host, and the stdio entry
// for Extism hosts that give a module its stdin and stdout. Generic Extism hosts ignore them
// and call the named exports above. Both modules carry both (plugin/exports).
const (
	// ExportRawAlloc is `(size i32) -> (ptr i32)`: a guest buffer of size bytes for the next
	// stategate_call, or 0 when size is negative or over 256 MiB. Call it before every
	// stategate_call: the buffer may be released or moved by the call.
	ExportRawAlloc = "stategate_alloc"
	// ExportRawCall is `(fn i32, ptr i32, len i32) -> (i64)`: runs Function fn on the input at
	// ptr (which must be the last stategate_alloc's) and answers (outPtr << 32 | outLen). The
	// output stays valid until the next raw call.
	ExportRawCall = "stategate_call"
	// ExportStdioCall is an Extism export, `() -> i32`, whose Extism input is the export
	// name of a Function: it runs that Function on the whole of WASI stdin and writes the
	// output to WASI stdout (the Extism output stays empty). For Extism hosts that set a
	// module's stdin and stdout but cannot write its memory (the Extism Go SDK). A stdin
	// that cannot be read answers an INVALID_INPUT document; a stdout that refuses the
	// output makes the call return 1 (the host treats the call as failed).
	ExportStdioCall = "stategate_stdio"
	// ExportInitialize is the WASI reactor initializer a host calls once after instantiation.
	ExportInitialize = "_initialize"
)

// ConfigKey is the Extism manifest config key that holds the stategate configuration.
const ConfigKey = "config"

// ExtismModule is the import module of the Extism host functions.
const ExtismModule = "extism:host/env"

// MetaPrefix is the reverse-DNS prefix of every _meta key the gateway adds.
const MetaPrefix = "dev.stategate/"

// _meta keys the engine and hosts add to results.
const (
	MetaError     = MetaPrefix + "error"     // {code, retryable, details} on a denial
	MetaTruncated = MetaPrefix + "truncated" // {originalBytes, limitBytes, ...} on a cut result
	MetaDuration  = MetaPrefix + "durationMs"
	MetaCache     = MetaPrefix + "cache" // {"hit": true, "ageMs": N} on a result answered from the cache
	// MetaDenial is a one-time token on a hook host's own denials, so that its after-hook,
	// seeing one again, never takes it for the answer of another call.
	MetaDenial = MetaPrefix + "denial"
)

// Error codes of a failed export call: the "code" of the "error" member.
const (
	ErrInvalidJSON   = "INVALID_JSON"   // the input is not one valid JSON document
	ErrInvalidInput  = "INVALID_INPUT"  // valid JSON of the wrong shape
	ErrTooDeep       = "TOO_DEEP"       // nesting deeper than MaxDepth
	ErrInvalidConfig = "INVALID_CONFIG" // the configuration did not validate
	ErrConfigMissing = "CONFIG_MISSING" // no configuration under ConfigKey
	ErrUnknownExport = "UNKNOWN_FUNCTION"
	ErrTruncation    = "TRUNCATION_IMPOSSIBLE" // not even a minimal result fits maxResponseBytes
	ErrHealthOff     = "HEALTH_OFF"            // tool_health on a configuration without a health section
	ErrNoMatch       = "NO_MATCH"              // tool_health: the name or glob names no known unit
)

// Denial codes: the "code" of a refused tools/call, in the result's _meta and in the
// check_limits answer.
const (
	DenyToolNotAvailable = "TOOL_NOT_AVAILABLE"   // the workflow is not in a state that allows the tool
	DenyArrayTooLarge    = "ARRAY_TOO_LARGE"      // an argument array is over its limit
	DenyMissingHandle    = "MISSING_STATE_HANDLE" // the state-handle argument is absent or not a string/number
	DenyToolTimeout      = "TOOL_TIMEOUT"         // the upstream did not answer within timeoutMs (host)
	DenyGateUnavailable  = "GATE_UNAVAILABLE"     // state could not be read or written (host)
	DenyTooDeep          = "ARGUMENTS_TOO_DEEP"   // arguments nested deeper than MaxDepth
	// DenyUpstreamUnavailable is in the data of the JSON-RPC error a host answers when the
	// upstream could not be reached or broke off its answer (host).
	DenyUpstreamUnavailable = "UPSTREAM_UNAVAILABLE"
	// Tool health: the unit's mode is not active. TOOL_AUTO_DISABLED is retryable only
	// when a probe time is set (details.retryAt, unix ms).
	DenyToolDisabled     = "TOOL_DISABLED"
	DenyToolQuarantined  = "TOOL_QUARANTINED"
	DenyToolAutoDisabled = "TOOL_AUTO_DISABLED"
	// Human approval (approvals): the call needs a yes the gateway cannot ask for here
	// (an operator's, a 2025-11-25 client, a task); the person declined or dismissed the
	// question; the requestState carried is forged, expired, bound to another call or used.
	DenyApprovalRequired  = "APPROVAL_REQUIRED"
	DenyApprovalDeclined  = "APPROVAL_DECLINED"
	DenyApprovalCancelled = "APPROVAL_CANCELLED"
	DenyApprovalInvalid   = "APPROVAL_INVALID"
)

// State keys: every key the engine names for a workflow, tool health or the cache starts
// with StateKeyPrefix; the response cache's own records live under CacheKeyPrefix, and the
// tool-list copies' (exchange/listcache) under ListKeyPrefix, within it: neither is a
// workflow key.
const (
	StateKeyPrefix = "stategate/v1/"
	CacheKeyPrefix = StateKeyPrefix + "cache/"
	ListKeyPrefix  = CacheKeyPrefix + "lists/"
)

// IsWorkflowKey reports whether key holds a workflow's snapshot: under StateKeyPrefix, and
// neither tool health (compare-and-set counters, never leased) nor the cache's records.
// The principal's annotation record lives outside StateKeyPrefix.
func IsWorkflowKey(key string) bool {
	return len(key) > len(StateKeyPrefix) && key[:len(StateKeyPrefix)] == StateKeyPrefix && !IsHealthKey(key) &&
		!(len(key) >= len(CacheKeyPrefix) && key[:len(CacheKeyPrefix)] == CacheKeyPrefix)
}

// Human approval storage keys (exchange/approval): the gateway's approval key (the HMAC
// key of every requestState, created once and shared by every replica), one key per
// requestState used, claimed by compare-and-set so that a yes is spent once, and the
// calls held for an operator. They live
// outside StateKeyPrefix: never a workflow key (IsWorkflowKey), never leased.
const (
	ApprovalKeyPrefix  = "stategate/approval/v1/"
	ApprovalSecretKey  = ApprovalKeyPrefix + "key"
	ApprovalUsedPrefix = ApprovalKeyPrefix + "used/"
	// Operator approval (exchange/approval/hold.go): one record per call held for an
	// operator, its decision (created once: the first decision wins), and the bounded
	// index of the records still pending (the state contract has no key scan).
	ApprovalPendingPrefix  = ApprovalKeyPrefix + "pending/"
	ApprovalDecisionPrefix = ApprovalKeyPrefix + "decision/"
	ApprovalIndexKey       = ApprovalKeyPrefix + "index"
)

// IsSessionKey reports whether an engine state key belongs to a session
// (stategate/v1/<workflow>/session/...) rather than to a state handle.
func IsSessionKey(key string) bool {
	for range 3 { // the fourth part, followed by a fifth (strings.SplitN(key, "/", 5)[3])
		i := strings.IndexByte(key, '/')
		if i < 0 {
			return false
		}
		key = key[i+1:]
	}
	return strings.HasPrefix(key, "session/")
}

// Tool health storage keys: a unit's record lives under HealthKeyPrefix + the unit name
// percent-encoded, and HealthIndexKey lists the known units. Hosts never build them (the
// engine names them in needState); they recognise them to keep them out of leases.
const (
	HealthKeyPrefix = "stategate/v1/health/"
	HealthIndexKey  = "stategate/v1/health-index"
)

// IsHealthKey reports whether key holds tool health rather than a workflow's state.
func IsHealthKey(key string) bool {
	if key == HealthIndexKey {
		return true
	}
	if len(key) <= len(HealthKeyPrefix) || key[:len(HealthKeyPrefix)] != HealthKeyPrefix {
		return false
	}
	// A workflow named "health" has keys under the same prefix, with more segments.
	for i := len(HealthKeyPrefix); i < len(key); i++ {
		if key[i] == '/' {
			return false
		}
	}
	return true
}

// Retryable reports whether retrying the identical call, unchanged, can succeed. Only
// transient faults are retryable: a denied or oversized call fails the same way again.
func Retryable(code string) bool {
	switch code {
	case DenyToolTimeout, DenyGateUnavailable, DenyUpstreamUnavailable:
		return true
	}
	return false
}

// MaxDepth is the deepest JSON nesting any export accepts, shared by every host and the
// guest.
const MaxDepth = 256
