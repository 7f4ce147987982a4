// Package wasmexport edits a wasm module's export section: one export more, or one export
// naming another function. The Envoy filter's build points `malloc` at
// `proxy_on_memory_allocate` with it (envoy/envoy.mk), and the mosn test host gives a reactor
// the `_start` mosn calls (envoy/mosnhost).
package wasmexport

import (
	"errors"
	"fmt"
)

// Alias returns the module with one more function export, alias, naming the function that
// target exports; the module is returned as it is when it already exports alias.
func Alias(module []byte, target, alias string) ([]byte, error) {
	return set(module, target, alias, false)
}

// Point returns the module with its export name naming the function that target exports:
// replaced when it exists (it must be a function), added when not.
func Point(module []byte, name, target string) ([]byte, error) {
	return set(module, target, name, true)
}

func set(module []byte, target, name string, replace bool) ([]byte, error) {
	if len(module) < 8 || string(module[:4]) != "\x00asm" {
		return nil, errors.New("wasmexport: not a wasm module")
	}
	for p := 8; p < len(module); {
		id := module[p]
		size, n, err := uleb(module, p+1)
		if err != nil {
			return nil, err
		}
		body := p + 1 + n
		end := body + int(size)
		if end > len(module) || end < body {
			return nil, fmt.Errorf("wasmexport: section[%d] at %d: size %d past the end", id, p, size)
		}
		if id != 7 { // the export section
			p = end
			continue
		}
		count, n, err := uleb(module, body)
		if err != nil {
			return nil, err
		}
		var kept []byte // the entries, without name's
		index, found, had := uint64(0), false, false
		for q := body + n; q < end; {
			at := q
			nameLen, n, err := uleb(module, q)
			if err != nil {
				return nil, err
			}
			q += n
			if q+int(nameLen)+1 > end {
				return nil, errors.New("wasmexport: export section: entry past the end")
			}
			exported, kind := string(module[q:q+int(nameLen)]), module[q+int(nameLen)]
			q += int(nameLen) + 1
			idx, n, err := uleb(module, q)
			if err != nil {
				return nil, err
			}
			q += n
			if exported == name {
				if !replace {
					return module, nil
				}
				if kind != 0 {
					return nil, fmt.Errorf("wasmexport: export[%s]: not a function", name)
				}
				had = true
				continue
			}
			if kind == 0 && exported == target {
				index, found = idx, true
			}
			kept = append(kept, module[at:q]...)
		}
		if !found {
			return nil, fmt.Errorf("wasmexport: export[%s]: not a function export of the module", target)
		}
		if !had {
			count++
		}
		kept = putUleb(kept, uint64(len(name)))
		kept = append(kept, name...)
		kept = append(kept, 0)
		kept = putUleb(kept, index)
		section := append(putUleb(nil, count), kept...)
		out := append([]byte(nil), module[:p]...)
		out = append(out, 7)
		out = putUleb(out, uint64(len(section)))
		out = append(out, section...)
		return append(out, module[end:]...), nil
	}
	return nil, errors.New("wasmexport: the module has no export section")
}

// uleb reads an unsigned LEB128 number at b[p:], returning it and its length.
func uleb(b []byte, p int) (uint64, int, error) {
	var v uint64
	for i := 0; i < 10 && p+i < len(b); i++ {
		v |= uint64(b[p+i]&0x7f) << (7 * i)
		if b[p+i]&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	return 0, 0, fmt.Errorf("wasmexport: bad LEB128 number at %d", p)
}

func putUleb(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
