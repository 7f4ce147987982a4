//go:build !cgo

package mosnhost

import (
	"errors"
	"testing"

	"github.com/stategate/stategate/internal/testenv"
)

// TestMosn stands for every test of the package when cgo is off: wasmer-go needs it.
func TestMosn(t *testing.T) {
	testenv.Missing(t, errors.New("mosnhost: cgo is off (CGO_ENABLED=0 or no C compiler): mosn's wasmer VM needs it"))
}
