package mosnhost

import (
	"errors"
	"fmt"
)

// aliasExport returns the module with one more function export, alias, naming the function
// that name exports; the module is unchanged when it already exports alias. The host uses it
// to meet mosn's expectations without touching the guest's code: `_start` for a reactor's
// `_initialize` (mosn starts every module with `_start`), and `malloc` for
// `proxy_on_memory_allocate` where a module has no `malloc` (mosn copies into the guest
// through `malloc` only).
func aliasExport(module []byte, name, alias string) ([]byte, error) {
	if len(module) < 8 || string(module[:4]) != "\x00asm" {
		return nil, errors.New("not a wasm module")
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
			return nil, fmt.Errorf("section[%d] at %d: size %d past the end", id, p, size)
		}
		if id != 7 { // the export section
			p = end
			continue
		}
		count, n, err := uleb(module, body)
		if err != nil {
			return nil, err
		}
		entriesAt := body + n
		q, index, found := entriesAt, uint64(0), false
		for range count {
			nameLen, n, err := uleb(module, q)
			if err != nil {
				return nil, err
			}
			q += n
			if q+int(nameLen)+1 > end {
				return nil, errors.New("export section: entry past the end")
			}
			exported, kind := string(module[q:q+int(nameLen)]), module[q+int(nameLen)]
			q += int(nameLen) + 1
			idx, n, err := uleb(module, q)
			if err != nil {
				return nil, err
			}
			q += n
			if kind != 0 { // not a function
				continue
			}
			if exported == alias {
				return module, nil
			}
			if exported == name {
				index, found = idx, true
			}
		}
		if !found {
			return nil, fmt.Errorf("export[%s]: not a function export of the module", name)
		}
		entries := append([]byte(nil), module[entriesAt:end]...)
		entries = putUleb(entries, uint64(len(alias)))
		entries = append(entries, alias...)
		entries = append(entries, 0)
		entries = putUleb(entries, index)
		section := putUleb(nil, count+1)
		section = append(section, entries...)
		out := append([]byte(nil), module[:p]...)
		out = append(out, 7)
		out = putUleb(out, uint64(len(section)))
		out = append(out, section...)
		return append(out, module[end:]...), nil
	}
	return nil, errors.New("the module has no export section")
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
	return 0, 0, fmt.Errorf("bad LEB128 number at %d", p)
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
