//go:build tinygo

package buf

// Unzeroed returns an empty buffer of capacity n (TinyGo's allocator zeroes every
// allocation: unzeroed.go's strings.Builder would only cost module size).
//
//go:inline
func Unzeroed(n int) []byte { return make([]byte, 0, n) }
