// Package health holds tool health: the mode table, the per-unit record the host stores,
// and definition fingerprints.
//
// The package builds with standard Go and TinyGo: no reflection, no goroutines, and no
// input makes it panic.
package health

import (
	"github.com/stategate/stategate/plugin/internal/digest"
	"strconv"
	"strings"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/internal/decorate"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// The modes of a unit.
const (
	Active       = "active"
	Disabled     = "disabled"
	Quarantined  = "quarantined"
	AutoDisabled = "auto_disabled"
)

// ValidMode reports whether m is one of the four modes.
func ValidMode(m string) bool {
	return m == Active || m == Disabled || m == Quarantined || m == AutoDisabled
}

// OperatorMove checks an operator's change of a unit from one mode to another against
// the table, and names the rule that refuses it ("" when allowed):
//
//	active        -> disabled, quarantined        (auto_disabled only by the engine)
//	disabled      -> active, quarantined
//	quarantined   -> active (by approval only), disabled
//	auto_disabled -> active, disabled
func OperatorMove(from, to string, approve bool) string {
	switch {
	case !ValidMode(to):
		return "unknown mode " + strconv.Quote(to) + ": the modes are active, disabled, quarantined and auto_disabled"
	case to == AutoDisabled:
		return "rule operator-never-auto-disables: auto_disabled is set only by the gateway after repeated failures; set disabled instead"
	case approve && to != Active:
		return "rule approve-activates: approval makes a quarantined tool active"
	case approve && from != Quarantined:
		return "rule approve-only-quarantined: approval accepts the definition of a quarantined tool, and this one is " + from
	case from == to:
		return ""
	case from == Quarantined && to == Active && !approve:
		return "rule quarantine-needs-approval: quarantined -> active only by approving the tool's current definition"
	case from == AutoDisabled && to == Quarantined:
		return "rule no-auto-disabled-to-quarantined: an auto-disabled tool goes to active or disabled"
	}
	return ""
}

// Record is what the host stores for one unit (a tool, or a server with unit "server").
type Record struct {
	Mode       string // "" follows the configuration's start-up mode
	Failures   int
	RetryAt    int64 // unix ms: when an auto-disabled unit may be probed; 0 never
	ProbeUntil int64 // unix ms: a probe call is in flight until then
	Changed    int64 // unix ms of the last mode change
	Reason     string
	LastError  string
	Pins       []Pin    // pinned definitions, by tool name
	Pending    []Pin    // definitions seen but not approved
	Callers    []string // callers whose isError results the run of failures counted (countIsError)
	Seq        int64
}

// Pin is one tool's definition fingerprint.
type Pin struct{ Tool, Fingerprint string }

// Find returns the fingerprint pinned for tool ("" when none).
func Find(pins []Pin, tool string) string {
	for _, p := range pins {
		if p.Tool == tool {
			return p.Fingerprint
		}
	}
	return ""
}

// Set sets tool's fingerprint in pins, keeping them sorted by tool.
func Set(pins []Pin, tool, fp string) []Pin {
	i := 0
	for i < len(pins) && pins[i].Tool < tool {
		i++
	}
	if i < len(pins) && pins[i].Tool == tool {
		pins[i].Fingerprint = fp
		return pins
	}
	pins = append(pins, Pin{})
	copy(pins[i+1:], pins[i:])
	pins[i] = Pin{tool, fp}
	return pins
}

// Read reads a stored record; anything that is not a record reads as a fresh one (ok
// false), so a damaged key never fails a call.
func Read(r gjson.Result) (rec Record, ok bool) {
	if !r.IsObject() {
		return Record{}, false
	}
	if m := r.Get("mode").Str; ValidMode(m) {
		rec.Mode = m
	}
	rec.Failures = int(clamp(r.Get("failures").Int(), 0, 1<<30))
	rec.RetryAt = clamp(r.Get("retryAt").Int(), 0, 1<<53)
	rec.ProbeUntil = clamp(r.Get("probeUntil").Int(), 0, 1<<53)
	rec.Changed = clamp(r.Get("changed").Int(), 0, 1<<53)
	rec.Reason = r.Get("reason").Str
	rec.LastError = r.Get("lastError").Str
	rec.Pins = readPins(r.Get("pins"))
	rec.Pending = readPins(r.Get("pending"))
	r.Get("callers").ForEach(func(_, v gjson.Result) bool {
		if v.Type == gjson.String {
			rec.Callers = append(rec.Callers, v.Str)
		}
		return len(rec.Callers) < 256 // a damaged record cannot grow it without bound
	})
	rec.Seq = clamp(r.Get("seq").Int(), 0, 1<<53)
	return rec, true
}

func readPins(r gjson.Result) []Pin {
	var out []Pin
	r.ForEach(func(k, v gjson.Result) bool {
		if v.Type == gjson.String {
			out = Set(out, k.Str, v.Str)
		}
		return true
	})
	return out
}

func clamp(n, lo, hi int64) int64 {
	return max(lo, min(n, hi))
}

// Append appends rec as its stored JSON, with seq advanced by one.
func (rec *Record) Append(dst []byte) []byte {
	w := W{dst}
	w.Open("")
	w.Str("mode", rec.Mode)
	w.Int("failures", int64(rec.Failures))
	w.Int("retryAt", rec.RetryAt)
	w.Int("probeUntil", rec.ProbeUntil)
	w.Int("changed", rec.Changed)
	w.Str("reason", rec.Reason)
	w.Str("lastError", rec.LastError)
	w.Raw("pins", AppendPins(nil, rec.Pins))
	w.Raw("pending", AppendPins(nil, rec.Pending))
	if len(rec.Callers) > 0 {
		w.Raw("callers", jsonx.AppendStrings(nil, rec.Callers))
	}
	seq := rec.Seq + 1
	if seq <= 0 || seq > 1<<53 {
		seq = 1
	}
	w.Int("seq", seq)
	w.Close()
	return w.B
}

// AppendPins appends pins as a JSON object tool: fingerprint.
func AppendPins(dst []byte, pins []Pin) []byte {
	dst = append(dst, '{')
	for i, p := range pins {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonx.AppendString(dst, p.Tool)
		dst = append(dst, ':')
		dst = jsonx.AppendString(dst, p.Fingerprint)
	}
	return append(dst, '}')
}

// KeyPrefix starts every health key; IndexKey lists the known units.
const (
	KeyPrefix = abi.HealthKeyPrefix
	IndexKey  = abi.HealthIndexKey
)

// Key returns the storage key of unit's record: the name percent-encoded, so that no two
// units share a key.
func Key(unit string) string {
	const hexDigits = "0123456789ABCDEF"
	dst := make([]byte, 0, len(KeyPrefix)+len(unit)+8)
	dst = append(dst, KeyPrefix...)
	for i := 0; i < len(unit); i++ {
		c := unit[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', hexDigits[c>>4], hexDigits[c&0xf])
	}
	return string(dst)
}

// Unit returns the unit of tool: the tool itself, or with byServer the part of its name
// before the first sep (the whole name when it has none).
func Unit(tool, sep string, byServer bool) string {
	if byServer && sep != "" {
		if i := strings.Index(tool, sep); i >= 0 {
			return tool[:i]
		}
	}
	return tool
}

// Index is the list of known units, sorted, as stored under IndexKey.
type Index struct {
	Units  []string
	Exists bool
	Seq    int64
}

// ReadIndex reads the stored index ({"units":[...],"seq"}).
func ReadIndex(r gjson.Result) Index {
	ix := Index{Exists: r.IsObject()}
	r.Get("units").ForEach(func(_, v gjson.Result) bool {
		if v.Type == gjson.String {
			ix.Add(v.Str)
		}
		return true
	})
	ix.Seq = clamp(r.Get("seq").Int(), 0, 1<<53)
	return ix
}

// Has reports whether unit is known.
func (ix *Index) Has(unit string) bool {
	i := ix.find(unit)
	return i < len(ix.Units) && ix.Units[i] == unit
}

func (ix *Index) find(unit string) int {
	lo, hi := 0, len(ix.Units)
	for lo < hi {
		m := (lo + hi) / 2
		if ix.Units[m] < unit {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Add inserts unit; it reports whether it was new.
func (ix *Index) Add(unit string) bool {
	i := ix.find(unit)
	if i < len(ix.Units) && ix.Units[i] == unit {
		return false
	}
	ix.Units = append(ix.Units, "")
	copy(ix.Units[i+1:], ix.Units[i:])
	ix.Units[i] = unit
	return true
}

// Append appends the index as stored, seq advanced.
func (ix *Index) Append(dst []byte) []byte {
	dst = append(dst, `{"units":[`...)
	for i, u := range ix.Units {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonx.AppendString(dst, u)
	}
	dst = append(dst, `],"seq":`...)
	return append(strconv.AppendInt(dst, ix.Seq+1, 10), '}')
}

// Ambiguous is the fingerprint of a definition that repeats a member (readers disagree on
// what it is): SHA-256 of "stategate: a definition that repeats a member", which no
// canonical definition hashes to. A unit pending it cannot be approved, and it is never
// pinned.
const Ambiguous = "c0f39b40b4daae4d100292aeb933364e8abf2e795a515dc8e0a33fae687a78ae"

// HasAmbiguous reports whether pins hold Ambiguous.
func HasAmbiguous(pins []Pin) bool {
	for _, p := range pins {
		if p.Fingerprint == Ambiguous {
			return true
		}
	}
	return false
}

// fingerprinted are the members of a tool definition a fingerprint covers, sorted.
var fingerprinted = [...]string{"annotations", "description", "inputSchema", "name", "outputSchema", "title"}

// Fingerprint returns the SHA-256 (hex) of tool's canonical definition: its name, title,
// description (without stategate's own tags), inputSchema, outputSchema and annotations,
// with object members sorted and no whitespace, so that order and layout do not matter.
// tool must be valid JSON (the engine validates its input first).
func Fingerprint(tool gjson.Result) string {
	b := make([]byte, 0, 256)
	b = append(b, '{')
	n := 0
	for _, name := range fingerprinted {
		v := tool.Get(name)
		if !v.Exists() {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = jsonx.AppendString(b, name)
		b = append(b, ':')
		if name == "description" && v.Type == gjson.String {
			b = jsonx.AppendString(b, decorate.StripTags(v.Str))
			continue
		}
		b = canonical(b, v, 0)
	}
	b = append(b, '}')
	sum := digest.Sum256(b)
	const hexDigits = "0123456789abcdef"
	out := make([]byte, 64)
	for i, c := range sum {
		out[2*i], out[2*i+1] = hexDigits[c>>4], hexDigits[c&0xf]
	}
	return string(out)
}

type member struct {
	key string
	val gjson.Result
}

// sortMembers is a stable merge sort by key (n log n on hostile schemas; no generics
// from slices in the guest).
func sortMembers(ms, tmp []member) {
	if len(ms) < 2 {
		return
	}
	m := len(ms) / 2
	sortMembers(ms[:m], tmp[:m])
	sortMembers(ms[m:], tmp[m:])
	i, j, k := 0, m, 0
	for i < m && j < len(ms) {
		if ms[j].key < ms[i].key {
			tmp[k] = ms[j]
			j++
		} else {
			tmp[k] = ms[i]
			i++
		}
		k++
	}
	k += copy(tmp[k:], ms[i:m])
	copy(tmp[k:], ms[j:])
	copy(ms, tmp[:len(ms)])
}

// canonical appends v with object members sorted by name and no whitespace. Strings are
// re-encoded, so escapes spelled differently ("\u0061", "a") give the same bytes.
func canonical(dst []byte, v gjson.Result, depth int) []byte {
	if depth > 300 {
		return append(dst, "null"...)
	}
	switch {
	case v.IsObject():
		var ms []member
		v.ForEach(func(k, val gjson.Result) bool {
			ms = append(ms, member{k.Str, val})
			return true
		})
		sortMembers(ms, make([]member, len(ms)))
		dst = append(dst, '{')
		for i, m := range ms {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonx.AppendString(dst, m.key)
			dst = append(dst, ':')
			dst = canonical(dst, m.val, depth+1)
		}
		return append(dst, '}')
	case v.IsArray():
		dst = append(dst, '[')
		i := 0
		v.ForEach(func(_, val gjson.Result) bool {
			if i > 0 {
				dst = append(dst, ',')
			}
			i++
			dst = canonical(dst, val, depth+1)
			return true
		})
		return append(dst, ']')
	case v.Type == gjson.String:
		return jsonx.AppendString(dst, v.Str)
	}
	return append(dst, v.Raw...)
}

// W writes a JSON object member by member: one call per member keeps the guest small.
type W struct{ B []byte }

func (w *W) key(k string) {
	if n := len(w.B); n > 0 && w.B[n-1] != '{' && w.B[n-1] != '[' {
		w.B = append(w.B, ',')
	}
	w.B = jsonx.AppendString(w.B, k)
	w.B = append(w.B, ':')
}

// Str writes "k":"v".
func (w *W) Str(k, v string) { w.key(k); w.B = jsonx.AppendString(w.B, v) }

// Int writes "k":v.
func (w *W) Int(k string, v int64) { w.key(k); w.B = strconv.AppendInt(w.B, v, 10) }

// Bool writes "k":true|false.
func (w *W) Bool(k string, v bool) {
	w.key(k)
	if v {
		w.B = append(w.B, "true"...)
	} else {
		w.B = append(w.B, "false"...)
	}
}

// Raw writes "k":raw.
func (w *W) Raw(k string, raw []byte) { w.key(k); w.B = append(w.B, raw...) }

// Open writes "k":{ (or { when k is ""); Close writes }.
func (w *W) Open(k string) {
	if k != "" {
		w.key(k)
	} else if n := len(w.B); n > 0 && w.B[n-1] != '{' && w.B[n-1] != '[' && w.B[n-1] != ':' {
		w.B = append(w.B, ',')
	}
	w.B = append(w.B, '{')
}

// Close ends an object.
func (w *W) Close() { w.B = append(w.B, '}') }
