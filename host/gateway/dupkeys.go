package gateway

import "github.com/tidwall/gjson"

// maxKeyDepth bounds the duplicate-key walk (the engine refuses deeper arguments anyway).
const maxKeyDepth = 256

// hasDuplicateKeys reports whether any object in v repeats a member name. The gateway
// reads the first of repeated members (gjson) while common servers read the last
// (encoding/json), so a request like {"name":"tasks.list","name":"cart.pay"} would pass
// the gate as one tool and run as another: such requests are refused.
func hasDuplicateKeys(v gjson.Result, depth int) bool {
	if depth > maxKeyDepth {
		return false // deep documents are refused by the engine's own depth check
	}
	switch {
	case v.IsObject():
		// A short list for the usual small objects, a set once an object is large, so a
		// body of many keys costs linear time.
		var seen []string
		var set map[string]struct{}
		dup := false
		v.ForEach(func(k, val gjson.Result) bool {
			if set != nil {
				if _, ok := set[k.Str]; ok {
					dup = true
					return false
				}
				set[k.Str] = struct{}{}
			} else {
				for _, s := range seen {
					if s == k.Str {
						dup = true
						return false
					}
				}
				seen = append(seen, k.Str)
				if len(seen) > 16 {
					set = make(map[string]struct{}, 64)
					for _, s := range seen {
						set[s] = struct{}{}
					}
				}
			}
			if hasDuplicateKeys(val, depth+1) {
				dup = true
				return false
			}
			return true
		})
		return dup
	case v.IsArray():
		dup := false
		v.ForEach(func(_, val gjson.Result) bool {
			dup = hasDuplicateKeys(val, depth+1)
			return !dup
		})
		return dup
	}
	return false
}
