//go:build cgo

package mosnhost

import (
	"encoding/binary"
	"time"

	"mosn.io/proxy-wasm-go-host/proxywasm/common"
)

// pollOneoff replaces wasmer's WASI poll_oneoff, which panics on a clock subscription
// ("Polling not implemented for clocks yet", wasmer 2.0's lib/wasi): a Rust panic aborts the
// whole Go process. The standard-Go filter's runtime polls a clock whenever it waits for a
// timer, so without this it cannot run here; the TinyGo filter never imports poll_oneoff.
// Clock subscriptions (relative or absolute) sleep until the earliest one is due, which is
// then reported; fd subscriptions are reported ready at once (the filter has no fds to wait on).
func pollOneoff(ins common.WasmInstance, in, out, nsubs, neventsPtr int32) int32 {
	const subSize, eventSize = 48, 32
	const errnoInval, errnoFault = 28, 21
	if nsubs <= 0 {
		return errnoInval
	}
	subs, err := ins.GetMemory(uint64(in), uint64(nsubs)*subSize)
	if err != nil {
		return errnoFault
	}
	type due struct {
		userdata uint64
		kind     byte
		wait     time.Duration
	}
	var all []due
	earliest := time.Duration(-1)
	for i := range int(nsubs) {
		s := subs[i*subSize:]
		d := due{userdata: binary.LittleEndian.Uint64(s), kind: s[8]}
		if d.kind == 0 { // clock: id u32 @16, timeout u64 @24, flags u16 @40 (1: absolute)
			timeout := time.Duration(binary.LittleEndian.Uint64(s[24:]))
			if binary.LittleEndian.Uint16(s[40:])&1 != 0 {
				timeout -= time.Duration(time.Now().UnixNano())
			}
			d.wait = max(timeout, 0)
		}
		if earliest < 0 || d.wait < earliest {
			earliest = d.wait
		}
		all = append(all, d)
	}
	time.Sleep(earliest)
	n := 0
	for _, d := range all {
		if d.wait > earliest {
			continue
		}
		ev := make([]byte, eventSize)
		binary.LittleEndian.PutUint64(ev, d.userdata)
		ev[10] = d.kind // error 0 @8, type @10
		if err := ins.PutMemory(uint64(out)+uint64(n)*eventSize, eventSize, ev); err != nil {
			return errnoFault
		}
		n++
	}
	if err := ins.PutUint32(uint64(neventsPtr), uint32(n)); err != nil {
		return errnoFault
	}
	return 0
}
