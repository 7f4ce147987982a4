// Package engine is the stategate core: pure functions from one JSON document to another,
// shared by the Wasm plugin, the Envoy filter and the native conformance runs.
//
// # Notes
//
//   - An Engine is built once per configuration (New) and is safe for concurrent use.
//   - Every method answers every input: malformed JSON, wrong types, huge or deep documents
//     come back as an *Error, never as a panic (a panic traps the Wasm guest).
package engine

import (
	"github.com/stategate/stategate/plugin/internal/glob"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/internal/chart"
	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/internal/decorate"
	"github.com/stategate/stategate/plugin/internal/policy"
	"github.com/stategate/stategate/plugin/jsonx"
)

// Error is a failed call: a code from abi and a message for people.
type Error struct {
	Code    string
	Message string
	Details []string // every configuration problem, for INVALID_CONFIG
}

func (e *Error) Error() string { return strings.ToLower(e.Code) + ": " + e.Message }

// AppendJSON appends {"error":{"code","message"[,"errors"]}}.
func (e *Error) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"error":{"code":`...)
	dst = jsonx.AppendString(dst, e.Code)
	dst = append(dst, `,"message":`...)
	dst = jsonx.AppendString(dst, e.Message)
	if len(e.Details) > 0 {
		dst = append(dst, `,"errors":`...)
		dst = jsonx.AppendStrings(dst, e.Details)
	}
	return append(dst, "}}"...)
}

// Engine applies one validated configuration.
type Engine struct {
	cfg      *config.Config
	warnings []config.Problem
	resolver *policy.Resolver
	marks    map[*config.Binding]string // availability marks, rendered once

	// scratch holds a result with its invalidation block between calls (takeScratch).
	scratch     []byte
	scratchBusy atomic.Bool
	// index holds a tools/list's index between calls (takeIndex).
	index     decorate.Index
	indexBusy atomic.Bool
	// req is the parsed input of a call, reused (takeRequest).
	req     request
	reqBusy atomic.Bool
}

// mark returns the availability mark of a workflow-bound tool.
func (e *Engine) mark(ref config.Ref) string {
	return e.marks[ref.Binding]
}

// New validates config and returns an Engine for it. On invalid configuration the error
// is an *Error with code INVALID_CONFIG listing every problem.
func New(cfg []byte) (*Engine, error) {
	if len(strings.TrimSpace(string(cfg))) == 0 {
		return nil, &Error{Code: abi.ErrConfigMissing, Message: "no configuration under the config key " + `"` + abi.ConfigKey + `"`}
	}
	c, problems := config.Parse(cfg)
	if c == nil {
		var errs []string
		for _, p := range problems {
			if !p.Warning {
				errs = append(errs, p.String())
			}
		}
		return nil, &Error{Code: abi.ErrInvalidConfig, Message: itoa(len(errs)) + " configuration error(s): " + strings.Join(errs, "; "), Details: errs}
	}
	e := &Engine{cfg: c, warnings: problems, resolver: policy.New(c), marks: map[*config.Binding]string{}}
	for _, w := range c.Workflows {
		for i := range w.Tools {
			e.marks[&w.Tools[i]] = decorate.Mark(w.ID, w.Tools[i].States)
		}
		// The initial configuration is what XState starts in: with the done events of
		// final states entered by default taken.
		w.SetStart(chart.Start(w))
	}
	return e, nil
}

// Config returns the validated configuration.
func (e *Engine) Config() *config.Config { return e.cfg }

// Warnings returns the configuration's warnings.
func (e *Engine) Warnings() []config.Problem { return e.warnings }

// Call runs fn on in and always answers a JSON document: the result, or an error object.
func (e *Engine) Call(fn abi.Function, in []byte) []byte {
	return e.AppendCall(nil, fn, in)
}

// AppendCall is Call appending to dst.
func (e *Engine) AppendCall(dst []byte, fn abi.Function, in []byte) []byte {
	out, err := e.run(dst, fn, in)
	if err != nil {
		if ee, ok := err.(*Error); ok {
			return ee.AppendJSON(dst)
		}
		return (&Error{Code: abi.ErrInvalidInput, Message: err.Error()}).AppendJSON(dst)
	}
	return out
}

// run runs fn on in, appending its answer to dst, with the call's request (takeRequest).
func (e *Engine) run(dst []byte, fn abi.Function, in []byte) (out []byte, err error) {
	r := e.takeRequest()
	switch fn {
	case abi.FuncDecorateTools:
		out, err = e.decorateTools(dst, in, r)
	case abi.FuncDecorateResult:
		out, err = e.decorateResult(dst, in, r)
	case abi.FuncTransition:
		out, err = e.transition(dst, in, r)
	case abi.FuncCheckLimits:
		out, err = e.checkLimits(dst, in, r)
	case abi.FuncCheckConfig:
		out, err = e.checkConfigFor(dst, in)
	case abi.FuncToolHealth:
		out, err = e.healthOp(dst, in, r)
	default:
		err = &Error{Code: abi.ErrUnknownExport, Message: "unknown function id " + strconv.FormatUint(uint64(fn), 10)}
	}
	e.putRequest(r)
	return out, err
}

// DecorateTools rewrites a tools/list response. See ABI.md.
func (e *Engine) DecorateTools(in []byte) ([]byte, error) {
	return e.run(nil, abi.FuncDecorateTools, in)
}

// DecorateResult inserts the invalidation block into, and truncates, a tools/call response.
func (e *Engine) DecorateResult(in []byte) ([]byte, error) {
	return e.run(nil, abi.FuncDecorateResult, in)
}

// Transition advances the workflows a successful tools/call is bound to.
func (e *Engine) Transition(in []byte) ([]byte, error) { return e.run(nil, abi.FuncTransition, in) }

// CheckLimits admits or denies a tools/call before the upstream runs.
func (e *Engine) CheckLimits(in []byte) ([]byte, error) { return e.run(nil, abi.FuncCheckLimits, in) }

// ConfigError answers every call of a plugin whose configuration is invalid.
func ConfigError(err error) []byte {
	if ee, ok := err.(*Error); ok {
		return ee.AppendJSON(nil)
	}
	return (&Error{Code: abi.ErrInvalidConfig, Message: err.Error()}).AppendJSON(nil)
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// str views b as a string without copying; the engine never mutates its input.
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// view sees s as bytes without copying, for readers that never write (limits scans):
// []byte(s) copies, once per admitted call in check_limits.
func view(s string) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// MatchName reports whether name matches the configuration glob pattern under the names
// separator sep (hosts use it for an operator's purge by glob, with the engine's rules).
func MatchName(pattern, sep, name string) (bool, error) {
	g, err := glob.Compile(pattern, sep)
	if err != nil {
		return false, err
	}
	return g.Match(name), nil
}
