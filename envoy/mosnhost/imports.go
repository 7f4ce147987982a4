//go:build cgo

package mosnhost

import (
	"strings"
	"sync"

	"mosn.io/proxy-wasm-go-host/proxywasm/common"
	v1 "mosn.io/proxy-wasm-go-host/proxywasm/v1"
)

// imports is what mosn's host functions reach for one context (the root, or a stream):
// its headers and bodies, and the proxy's configuration, shared data and metrics. What it
// does not override is mosn's default.
type imports struct {
	v1.DefaultImportsHandler
	p *Proxy

	reqHeaders, respHeaders *headerMap
	reqBody, respBody       *common.CommonBuffer
	local                   *Response
}

func (im *imports) Log(level v1.LogLevel, msg string) v1.WasmResult {
	if im.p.o.Log != nil {
		im.p.o.Log(int32(level), msg)
	}
	return v1.WasmResultOk
}

func (im *imports) GetVmConfig() common.IoBuffer {
	return common.NewIoBufferBytes(im.p.o.VMConfig)
}

func (im *imports) GetPluginConfig() common.IoBuffer {
	return common.NewIoBufferBytes(im.p.o.PluginConfig)
}

// The header maps and bodies are nil (NotFound) outside the phase that has them.

func (im *imports) GetHttpRequestHeader() common.HeaderMap {
	if im.reqHeaders == nil {
		return nil
	}
	return im.reqHeaders
}

func (im *imports) GetHttpResponseHeader() common.HeaderMap {
	if im.respHeaders == nil {
		return nil
	}
	return im.respHeaders
}

func (im *imports) GetHttpRequestBody() common.IoBuffer {
	if im.reqBody == nil {
		return nil
	}
	return im.reqBody
}

func (im *imports) GetHttpResponseBody() common.IoBuffer {
	if im.respBody == nil {
		return nil
	}
	return im.respBody
}

func (im *imports) SendHttpResp(code int32, _ common.IoBuffer, body common.IoBuffer, headers common.HeaderMap, _ int32) v1.WasmResult {
	r := &Response{Status: int(code), Body: append([]byte(nil), body.Bytes()...)}
	headers.Range(func(k, v string) bool {
		r.Header = append(r.Header, [2]string{strings.ToLower(k), v})
		return true
	})
	im.local = r
	return v1.WasmResultOk
}

func (im *imports) GetSharedData(key string) (string, uint32, v1.WasmResult) {
	return im.p.shared.get(key)
}

func (im *imports) SetSharedData(key, value string, cas uint32) v1.WasmResult {
	return im.p.shared.set(key, value, cas)
}

func (im *imports) DefineMetric(_ v1.MetricType, name string) (int32, v1.WasmResult) {
	return im.p.metrics.define(name), v1.WasmResultOk
}

func (im *imports) IncrementMetric(id int32, offset int64) v1.WasmResult {
	return im.p.metrics.add(id, offset)
}

func (im *imports) RecordMetric(id int32, value int64) v1.WasmResult {
	return im.p.metrics.set(id, value)
}

func (im *imports) GetMetric(id int32) (int64, v1.WasmResult) {
	return im.p.metrics.get(id)
}

// sharedData is one VM id's shared data with Envoy's rules: the cas counter starts at 1; a
// write with cas 0 is unconditional; an absent key is created whatever the cas; a present
// one is written only with the cas it holds. (mosn's own store is one per process and
// refuses cas 0 on a present key.)
type sharedData struct {
	mu  sync.Mutex
	m   map[string]*sharedItem
	cas uint32
}

type sharedItem struct {
	value string
	cas   uint32
}

func (s *sharedData) get(key string) (string, uint32, v1.WasmResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it, ok := s.m[key]; ok {
		return it.value, it.cas, v1.WasmResultOk
	}
	return "", 0, v1.WasmResultNotFound
}

func (s *sharedData) set(key, value string, cas uint32) v1.WasmResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.m[key]
	if ok && cas != 0 && cas != it.cas {
		return v1.WasmResultCasMismatch
	}
	if !ok {
		it = &sharedItem{}
		s.m[key] = it
	}
	s.cas++
	it.value, it.cas = value, s.cas
	return v1.WasmResultOk
}

// Keys is how many keys the filter has written to shared data.
func (p *Proxy) Keys() int {
	p.shared.mu.Lock()
	defer p.shared.mu.Unlock()
	return len(p.shared.m)
}

type metrics struct {
	mu     sync.Mutex
	names  []string
	values []int64
}

func (m *metrics) define(name string) int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, n := range m.names {
		if n == name {
			return int32(i)
		}
	}
	m.names, m.values = append(m.names, name), append(m.values, 0)
	return int32(len(m.names) - 1)
}

func (m *metrics) add(id int32, d int64) v1.WasmResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id < 0 || int(id) >= len(m.values) {
		return v1.WasmResultNotFound
	}
	m.values[id] += d
	return v1.WasmResultOk
}

func (m *metrics) set(id int32, v int64) v1.WasmResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id < 0 || int(id) >= len(m.values) {
		return v1.WasmResultNotFound
	}
	m.values[id] = v
	return v1.WasmResultOk
}

func (m *metrics) get(id int32) (int64, v1.WasmResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id < 0 || int(id) >= len(m.values) {
		return 0, v1.WasmResultNotFound
	}
	return m.values[id], v1.WasmResultOk
}

// headerMap keeps every field line as its own pair, in order. mosn's host functions still
// fold them: proxy_get_header_map_pairs hands the guest one pair per name (the last
// value), and proxy_add_header_map_value replaces.
type headerMap struct{ pairs [][2]string }

func (h *headerMap) Get(key string) (string, bool) {
	for _, kv := range h.pairs {
		if kv[0] == key {
			return kv[1], true
		}
	}
	return "", false
}

func (h *headerMap) Set(key, value string) {
	out, done := h.pairs[:0], false
	for _, kv := range h.pairs {
		if kv[0] != key {
			out = append(out, kv)
		} else if !done {
			out, done = append(out, [2]string{key, value}), true
		}
	}
	if !done {
		out = append(out, [2]string{key, value})
	}
	h.pairs = out
}

func (h *headerMap) Add(key, value string) { h.pairs = append(h.pairs, [2]string{key, value}) }

func (h *headerMap) Del(key string) {
	out := h.pairs[:0]
	for _, kv := range h.pairs {
		if kv[0] != key {
			out = append(out, kv)
		}
	}
	h.pairs = out
}

func (h *headerMap) Range(f func(key, value string) bool) {
	for _, kv := range h.pairs {
		if !f(kv[0], kv[1]) {
			return
		}
	}
}

func (h *headerMap) Clone() common.HeaderMap {
	return &headerMap{pairs: append([][2]string(nil), h.pairs...)}
}

func (h *headerMap) ByteSize() uint64 {
	var n uint64
	for _, kv := range h.pairs {
		n += uint64(len(kv[0]) + len(kv[1]))
	}
	return n
}

// getBufferBytes and getSharedData copy an empty value as Envoy does, with no allocation
// (a null pointer and size 0): mosn asks the guest's malloc for 0 bytes, which the SDK's
// proxy_on_memory_allocate cannot answer (it indexes its empty buffer and panics). Other
// values go to mosn's own functions.
func getBufferBytes(ins common.WasmInstance, bufferType, start, length, retPtr, retSize int32) int32 {
	buf := v1.GetBuffer(ins, v1.BufferType(bufferType))
	if buf != nil && start >= 0 && length >= 0 && (length == 0 || int(start) >= buf.Len()) {
		return emptyValue(ins, retPtr, retSize)
	}
	return v1.ProxyGetBufferBytes(ins, bufferType, start, length, retPtr, retSize)
}

func (p *Proxy) getSharedData(ins common.WasmInstance, keyPtr, keySize, valuePtr, valueSizePtr, casPtr int32) int32 {
	key, err := ins.GetMemory(uint64(keyPtr), uint64(keySize))
	if err != nil {
		return v1.WasmResultInvalidMemoryAccess.Int32()
	}
	v, cas, res := p.shared.get(string(key))
	if res != v1.WasmResultOk || v != "" {
		return v1.ProxyGetSharedData(ins, keyPtr, keySize, valuePtr, valueSizePtr, casPtr)
	}
	if ins.PutUint32(uint64(casPtr), cas) != nil {
		return v1.WasmResultInvalidMemoryAccess.Int32()
	}
	return emptyValue(ins, valuePtr, valueSizePtr)
}

func emptyValue(ins common.WasmInstance, retPtr, retSize int32) int32 {
	if ins.PutUint32(uint64(retPtr), 0) != nil || ins.PutUint32(uint64(retSize), 0) != nil {
		return v1.WasmResultInvalidMemoryAccess.Int32()
	}
	return v1.WasmResultOk.Int32()
}
