// Package built carries the plugin module as `make build` makes it (TinyGo, then
// wasm-opt), so a lone stategate binary, including one from `go install`, runs without a
// build tree.
//
// # Notes
//
//   - stategate.wasm here is a committed artifact: `make build` copies its output here
//     whenever it differs, and `make check.embedded` (part of `make test`, so CI) fails when
//     the committed file is not what the source builds to. RATIONALE.md says why it is
//     committed rather than generated.
//   - Nothing in the module imports this package: the TinyGo build of ./plugin never
//     compiles it.
package built

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
)

// Module is the plugin module's bytes. Callers must not modify it.
//
//go:embed stategate.wasm
var Module []byte

// Name names the embedded module in errors and version output.
const Name = "stategate.wasm (embedded)"

// SHA256 returns the module's SHA-256 in hex.
func SHA256() string {
	sum := sha256.Sum256(Module)
	return hex.EncodeToString(sum[:])
}
