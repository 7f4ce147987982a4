package engine

import (
	"strconv"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/internal/decorate"
	"github.com/stategate/stategate/plugin/internal/glob"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// decorateResult: {"tool", "message", "knownTools"?, "principal"?, "states"?} ->
// {"message", "invalidated", "truncated"} or {"needState"} (the annotation record, for a
// tool no policy matches under fromAnnotations).
func (e *Engine) decorateResult(dst []byte, in []byte, r *request) ([]byte, error) {
	if err := parse(r, in, true, true); err != nil {
		return nil, err
	}
	msg := r.message.Raw
	read := decorate.ReadMessage(msg)
	if read.Ambiguous {
		return nil, errAmbiguous
	}
	success := read.Succeeded()
	var patterns []string
	var inserted bool
	var inv []glob.Pattern
	var text string
	if success {
		_, p := e.resolver.Resolve(r.tool)
		class := config.ClassUnknown
		if p == nil {
			var need string
			if class, need = e.classOf(r, r.tool); need != "" {
				return appendNeedState(dst, []string{need}), nil
			}
		}
		if inv = e.invalidates(r.tool, p, class); len(inv) > 0 {
			for _, g := range inv {
				patterns = append(patterns, g.String())
			}
			text = decorate.Block(patterns, decorate.SanitizeName(r.tool, e.cfg.Separator))
		}
	}
	_, maxResp, _ := e.cfg.Limits.For(r.tool)
	dst = append(dst, `{"message":`...)
	// The message is written once, into dst: with the block where there is one, and cut
	// only when it comes out over the limit (then the written message is moved to the
	// scratch buffer and cut from there: the rare case pays the copy).
	mark := len(dst)
	if len(patterns) > 0 {
		if dst, inserted = read.InsertBlock(dst, text); !inserted {
			patterns = nil
		}
	} else {
		dst = append(dst, msg...)
	}
	var tr *decorate.Truncation
	if maxResp > 0 && len(dst)-mark > maxResp {
		buf, owned := e.takeScratch(len(dst) - mark)
		buf = append(buf, dst[mark:]...)
		if owned {
			defer e.putScratch(buf)
		}
		var terr error
		dst, tr, terr = decorate.TruncateRead(dst[:mark], str(buf), maxResp, inserted, success)
		if terr != nil {
			dst = dst[:mark]
			return nil, &Error{Code: abi.ErrTruncation, Message: terr.Error()}
		}
	}
	dst = append(dst, `,"invalidated":{"patterns":`...)
	dst = jsonx.AppendStrings(dst, patterns)
	dst = append(dst, `,"tools":[`...)
	if len(patterns) > 0 && r.knownTools.IsArray() {
		first := true
		r.knownTools.ForEach(func(_, v gjson.Result) bool {
			if v.Type != gjson.String {
				return true
			}
			for _, g := range inv {
				if g.Match(v.Str) {
					if !first {
						dst = append(dst, ',')
					}
					first = false
					dst = jsonx.AppendString(dst, v.Str)
					break
				}
			}
			return true
		})
	}
	dst = append(dst, "]}"...)
	dst = append(dst, `,"truncated":`...)
	if tr == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, `{"originalBytes":`...)
		dst = strconv.AppendInt(dst, int64(tr.OriginalBytes), 10)
		dst = append(dst, `,"limitBytes":`...)
		dst = strconv.AppendInt(dst, int64(tr.LimitBytes), 10)
		dst = append(dst, `,"droppedItems":`...)
		dst = strconv.AppendInt(dst, int64(tr.DroppedItems), 10)
		dst = append(dst, `,"structuredContentDropped":`...)
		dst = appendBool(dst, tr.DroppedStructuredContent)
		dst = append(dst, `,"resultWithheld":`...)
		dst = appendBool(dst, tr.ResultWithheld)
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

// Undecorated is decorate_result's message for msg (a valid JSON document) when it decorates
// nothing (check_config's decoratesResults false): msg itself, without the whitespace
// around it, which the message member of the answer does not carry. A host that skips the
// call sends this.
func Undecorated(msg []byte) []byte {
	i, j := 0, len(msg)
	for i < j && isWS(msg[i]) {
		i++
	}
	for j > i && isWS(msg[j-1]) {
		j--
	}
	return msg[i:j]
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// scratchKeep bounds the scratch buffer an engine keeps between calls. It is high for the
// reason plugin/main.go's rawKeep is: in the guest, a large buffer allocated on every call
// fragments the heap until the memory limit is reached, and a released one returns no
// memory to the host anyway.
const scratchKeep = 64 << 20

// takeScratch returns an empty buffer of at least n bytes: the engine's own when no other
// call holds it (in the guest, always), so that a large result is not allocated afresh on
// every call (in TinyGo each such allocation soon costs a collection that scans the heap).
// owned says whether it must be given back with putScratch.
func (e *Engine) takeScratch(n int) (buf []byte, owned bool) {
	if !e.scratchBusy.CompareAndSwap(false, true) {
		return make([]byte, 0, n), false
	}
	if cap(e.scratch) < n {
		e.scratch = make([]byte, 0, n)
	}
	return e.scratch[:0], true
}

// putScratch gives back the engine's buffer (possibly grown by append).
func (e *Engine) putScratch(buf []byte) {
	e.scratch = nil
	if cap(buf) <= scratchKeep {
		e.scratch = buf[:0]
	}
	e.scratchBusy.Store(false)
}
