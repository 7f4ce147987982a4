//go:build wasip1

package exports

import (
	"unsafe"

	"github.com/extism/go-pdk"
)

// The stdio entry (abi.ExportStdioCall): an Extism export whose Extism input is only the
// name of the function to run; the function's input is read from WASI stdin to its end
// and its output written to WASI stdout, each in one copy by the host's WASI (fd_read and
// fd_write straight into and out of the module's memory). For Extism hosts that can give
// a module its stdin and stdout per call but cannot reach its memory or call an export
// with arguments (the Extism Go SDK: Plugin.Memory is the kernel's memory, and Call takes
// exports without parameters). The input buffer is rawIn, kept as the raw entry's is.

//go:wasmexport stategate_stdio
func stdioCall() int32 {
	fn := byName(pdk.Input())
	in, ok := readStdin()
	if !ok {
		rawIn = rawIn[:0]
		return writeStdout(append(rawOut[:0], `{"error":{"code":"INVALID_INPUT","message":"stategate_stdio: stdin could not be read"}}`...))
	}
	rawOut = answer(int32(fn), in)
	return writeStdout(rawOut)
}

// readStdin reads stdin to its end into rawIn, growing it as needed (at most rawMax).
func readStdin() ([]byte, bool) {
	buf := rawIn[:0]
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= rawMax {
				return nil, false
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, ok := fdIO(false, 0, buf[len(buf):cap(buf)])
		if !ok {
			return nil, false
		}
		if n == 0 {
			rawIn = buf
			return buf, true
		}
		buf = buf[:len(buf)+n]
	}
}

// writeStdout writes out whole to stdout: 0, or 1 when stdout refused it.
func writeStdout(out []byte) int32 {
	for len(out) > 0 {
		n, ok := fdIO(true, 1, out)
		if !ok || n == 0 {
			return 1
		}
		out = out[n:]
	}
	return 0
}

// WASI's fd_read and fd_write, imported directly (the syscall package would bring
// wasi-libc's file layer into the module).

//go:wasmimport wasi_snapshot_preview1 fd_read
func fdRead(fd int32, iovs unsafe.Pointer, iovsLen int32, n unsafe.Pointer) int32

//go:wasmimport wasi_snapshot_preview1 fd_write
func fdWrite(fd int32, iovs unsafe.Pointer, iovsLen int32, n unsafe.Pointer) int32

// iovec is WASI's: a wasm32 address and a length.
type iovec struct{ buf, len uint32 }

// fdIO reads b from fd (or writes it) in one call: the bytes moved.
func fdIO(write bool, fd int32, b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, true
	}
	v := iovec{uint32(uintptr(unsafe.Pointer(&b[0]))), uint32(len(b))}
	var n uint32
	var errno int32
	if write {
		errno = fdWrite(fd, unsafe.Pointer(&v), 1, unsafe.Pointer(&n))
	} else {
		errno = fdRead(fd, unsafe.Pointer(&v), 1, unsafe.Pointer(&n))
	}
	if errno != 0 {
		return 0, false
	}
	return int(n), true
}
