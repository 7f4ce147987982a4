// Package listcache is the gateway's copy of the upstream's tools/list answers: a list is
// answered from the copy while the upstream says it is fresh, and only then. The copy is
// the upstream's result before decoration: the decoration still runs on every answer (the
// session's workflow state may differ).
//
// When a copy is fresh:
//
//   - 2026-07-28 (CacheableResult, SEP-2549): for the result's ttlMs (> 0; absent, invalid
//     or 0: not kept), counted from when the request that filled it was sent. A "public"
//     result is shared by every caller of the upstream that sends credentials alike (an
//     Authorization header, or none); "private", absent or invalid, by the callers of one
//     credential scope only: the Authorization header, the principal header and the
//     cache's varyHeaders, folded into the key with a secret (as the response cache keys
//     calls). Each page (cursor) is a copy of its own. The answer carries the remaining
//     ttlMs.
//   - Earlier, session-era revisions (Config.Sessions): for an upstream session whose server
//     declared capabilities.tools.listChanged in its initialize result, while this replica
//     relays the session's GET stream (where the server tells of a change). The stream's
//     end, or an event too long to read on it, ends the session's copies at once.
//
// What ends every copy, on every replica: a notifications/tools/list_changed from the
// upstream on any stream the gateway reads (a GET stream, an event of a POST answer's
// stream, a subscriptions/listen stream). It replaces a generation in the shared state
// (abi.ListKeyPrefix + "gen"); a copy records the generation read before the request that
// filled it went upstream, and is served only while the generation is unchanged, so a copy
// filled across a change is never served after it.
//
// Never kept: an answer that is not a result object (an error, an upstream failure, a body
// the core could not read as the answer), a result that is not complete (input_required, a
// task), a request with params other than cursor and _meta.
//
// # Notes
//
//   - Standard Go, no I/O (the exchange module builds it with TinyGo): the shared state
//     comes through the exchange's State.
//   - Copies are bounded in entries and bytes on each replica (cache.Memory: least
//     recently used evicted first).
package listcache

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/tidwall/gjson"
)

// GenKey is the shared generation of every copy.
const GenKey = abi.ListKeyPrefix + "gen"

// CacheableVersion is the first protocol version whose lists carry ttlMs and cacheScope.
const CacheableVersion = "2026-07-28"

// Config makes a Cache.
type Config struct {
	// State is the shared state (the exchange's): the generation lives there.
	State exchange.State
	// MaxEntries and MaxBytes bound the copies on this replica (defaults 1024 and
	// 64 MiB); MaxEntryBytes one copy (default 8 MiB).
	MaxEntries, MaxBytes, MaxEntryBytes int
	// Sessions keeps copies for session-era upstream sessions too (see the package
	// comment): the host must feed every GET stream it relays to the flow to its end (the
	// Open's end tells the copy the stream is gone).
	Sessions bool
	// SessionTTL bounds a session-era copy's age (default 10 minutes): a backstop, the
	// stream's notifications are what keep it fresh.
	SessionTTL time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Fault reports a failure of the shared state (the copy is then not used).
	Fault func(err error)
}

// Cache is the copies of one gateway (across its configuration reloads); safe for
// concurrent use. A nil *Cache keeps nothing.
type Cache struct {
	cfg    Config
	mem    *cache.Memory
	secret [32]byte

	mu       sync.Mutex
	streams  map[string]*stream  // upstream session -> the GET streams relayed here
	declared map[string]struct{} // upstream sessions whose server declared listChanged
	epochs   uint64              // the last epoch given out: epochs are never reused
}

type stream struct {
	held  int
	epoch uint64 // a new one whenever one of the session's streams ends
}

// maxDeclared bounds the sessions remembered as having declared listChanged.
const maxDeclared = 10000

// New returns a Cache.
func New(cfg Config) *Cache {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 1024
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 64 << 20
	}
	if cfg.MaxEntryBytes <= 0 {
		cfg.MaxEntryBytes = 8 << 20
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 10 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Cache{cfg: cfg, streams: map[string]*stream{}, declared: map[string]struct{}{},
		mem: cache.NewMemory(cache.Limits{MaxEntries: cfg.MaxEntries, MaxSizeBytes: cfg.MaxBytes, MaxEntryBytes: cfg.MaxEntryBytes}, cfg.Now)}
	rand.Read(c.secret[:]) // never fails: crypto/rand ends the program rather than return an error
	return c
}

// Request is an admitted tools/list as the copy needs it.
type Request struct {
	Version string
	// Session is the upstream session ("" for none, or a session the gateway issued).
	Session string
	Params  gjson.Result // the request's params
	Headers cache.Headers
	// Principal and Vary name the credential headers besides Authorization
	// (exchange.Core.CredentialHeaders).
	Principal string
	Vary      []string
}

// Hit is a list answered from a copy.
type Hit struct {
	// Result is the upstream's result, as it was kept: decorate it as the upstream's answer.
	Result []byte
	// TTL is what remains of its ttlMs (2026-07-28; 0 for a session-era copy).
	TTL time.Duration
}

// Fill is a miss that may fill a copy once the upstream answered.
type Fill struct {
	era     byte // 'p': 2026-07-28; 's': a session's
	pub     string
	priv    string
	session string
	epoch   uint64
	gen     string
	sent    time.Time
}

// Lookup answers r from a copy (Hit, true), or returns the Fill its answer completes (nil:
// the answer is never kept). The generation a fill records is read here, before the
// request goes upstream.
func (c *Cache) Lookup(ctx context.Context, r Request) (Hit, *Fill, bool) {
	if c == nil || !onlyCursor(r.Params) {
		return Hit{}, nil, false
	}
	cursor := r.Params.Get("cursor")
	if cursor.Exists() && cursor.Type != gjson.String {
		return Hit{}, nil, false
	}
	f := &Fill{}
	switch {
	case r.Version >= CacheableVersion:
		f.era = 'p'
		auth := "0"
		if len(r.Headers.Values("Authorization")) > 0 {
			auth = "1"
		}
		f.pub = c.key(r, "public", r.Version, cursor.Raw, auth)
		f.priv = c.key(r, "private", r.Version, cursor.Raw)
	case c.cfg.Sessions && r.Session != "":
		epoch, ok := c.fresh(r.Session)
		if !ok {
			return Hit{}, nil, false
		}
		f.era, f.session, f.epoch = 's', r.Session, epoch
		f.priv = c.key(r, "session", r.Session, strconv.FormatUint(epoch, 10), r.Version, cursor.Raw)
	default:
		return Hit{}, nil, false
	}
	for _, k := range []string{f.pub, f.priv} {
		if k == "" {
			continue
		}
		e, ok := c.mem.Get(k)
		if !ok {
			continue
		}
		gen, err := c.readGen(ctx, true)
		if err != nil {
			c.fault(err)
			return Hit{}, nil, false
		}
		if gen != e.Gen {
			c.mem.Delete(k)
			continue
		}
		if f.era == 's' {
			if epoch, ok := c.fresh(f.session); !ok || epoch != f.epoch {
				continue
			}
			return Hit{Result: e.Result}, nil, true
		}
		if ttl := e.Expires.Sub(c.cfg.Now()); ttl >= time.Millisecond {
			return Hit{Result: e.Result, TTL: ttl}, nil, true
		}
	}
	gen, err := c.genForFill(ctx)
	if err != nil {
		c.fault(err)
		return Hit{}, nil, false
	}
	f.gen, f.sent = gen, c.cfg.Now()
	return Hit{}, f, false
}

// Store keeps result (the upstream's result member, as the core read it) for f. An answer
// that must not be kept is dropped (see the package comment).
func (c *Cache) Store(f *Fill, result string) {
	if c == nil || f == nil || result == "" {
		return
	}
	r := gjson.Parse(result)
	if !r.IsObject() {
		return
	}
	h := gjson.GetMany(result, "resultType", "ttlMs", "cacheScope")
	if h[0].Exists() && h[0].Str != "complete" {
		return // input_required, a task: not the list
	}
	var e cache.Entry
	key := f.priv
	switch f.era {
	case 'p':
		ttl := h[1]
		if ttl.Type != gjson.Number || ttl.Num < 1 || ttl.Num > 1e12 {
			return
		}
		if h[2].Type == gjson.String && h[2].Str == "public" {
			key = f.pub
		}
		e = cache.Entry{Expires: f.sent.Add(time.Duration(ttl.Num) * time.Millisecond), Result: ttlFirst(r)}
	case 's':
		if epoch, ok := c.fresh(f.session); !ok || epoch != f.epoch {
			return // the stream went while the answer came
		}
		e = cache.Entry{Tool: f.session, Expires: f.sent.Add(c.cfg.SessionTTL), Result: []byte(result)}
	default:
		return
	}
	e.Gen, e.Stored = f.gen, c.cfg.Now()
	if !e.Expires.After(e.Stored) {
		return
	}
	c.mem.Put(key, e)
}

// ttlFirst is result with its ttlMs the first member, so that a hit can set the remaining
// ttlMs of the decorated answer without a walk over the list (SetTTL).
func ttlFirst(r gjson.Result) []byte {
	raw := r.Raw
	out := make([]byte, 0, len(raw)+16)
	out = append(out, `{"ttlMs":`...)
	out = append(out, r.Get("ttlMs").Raw...)
	r.ForEach(func(k, v gjson.Result) bool {
		if k.Str == "ttlMs" {
			return true
		}
		out = append(out, ',')
		out = append(out, k.Raw...)
		out = append(out, ':')
		out = append(out, v.Raw...)
		return true
	})
	return append(out, '}')
}

// SetTTL sets the ttlMs of the result of msg (a JSON-RPC response) to ms: in place when it
// is the result's first member (as a copy keeps it), else through a walk; false when msg
// has no such result.
func SetTTL(msg []byte, ms int64, set func(doc, raw []byte, path ...string) ([]byte, bool)) ([]byte, bool) {
	const head = `"result":{"ttlMs":`
	num := strconv.AppendInt(nil, ms, 10)
	if i := bytes.Index(msg[:min(len(msg), 512)], []byte(head)); i >= 0 && !inString(msg[:i]) {
		at := i + len(head)
		end := at
		for end < len(msg) && strings.IndexByte("0123456789+-.eE", msg[end]) >= 0 {
			end++
		}
		if end > at && end < len(msg) && (msg[end] == ',' || msg[end] == '}') {
			out := make([]byte, 0, len(msg)+len(num))
			out = append(append(append(out, msg[:at]...), num...), msg[end:]...)
			return out, true
		}
	}
	return set(msg, num, "result", "ttlMs")
}

// inString reports whether the end of b lies within a JSON string.
func inString(b []byte) bool {
	in := false
	for i := 0; i < len(b); i++ {
		switch {
		case in && b[i] == '\\':
			i++
		case b[i] == '"':
			in = !in
		}
	}
	return in
}

// Observe reads a message the upstream sent outside any answer the core rewrites
// (exchange.Options.Observed): a notifications/tools/list_changed ends every copy, on
// every replica, before the message goes on to the client. So does data that names it and
// is not one message (a batch, a body no one can read): it may be one.
func (c *Cache) Observe(ctx context.Context, msg []byte) {
	if c == nil {
		return
	}
	switch m := gjson.GetBytes(msg, "method"); {
	case m.Str == methodListChanged:
	case m.Exists():
		return // another request or notification
	case !bytes.Contains(msg, []byte("list_changed")) && !bytes.Contains(msg, []byte(`\u`)):
		return // names no list_changed, even escaped
	case gjson.ValidBytes(msg) && gjson.ParseBytes(msg).IsObject():
		return // a response
	}
	c.Invalidate(ctx)
}

const methodListChanged = "notifications/tools/list_changed"

// Invalidate ends every copy: this replica's at once, every other's through the shared
// generation.
func (c *Cache) Invalidate(ctx context.Context) {
	if c == nil {
		return
	}
	c.mem.PurgeAll()
	if err := c.bump(ctx); err != nil {
		c.fault(err)
	}
}

// Declared records that the server declared capabilities.tools.listChanged for upstream
// session sid (its initialize result is result).
func (c *Cache) Declared(sid, result string) {
	if c == nil || !c.cfg.Sessions || sid == "" || gjson.Get(result, "capabilities.tools.listChanged").Type != gjson.True {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.declared) >= maxDeclared {
		c.declared = map[string]struct{}{} // forgotten sessions are merely not kept
	}
	c.declared[sid] = struct{}{}
}

// Hold records that this replica relays a GET stream of upstream session sid; the release
// it returns (call it once) records the stream's end, which ends the session's copies.
func (c *Cache) Hold(sid string) (release func()) {
	if c == nil || !c.cfg.Sessions || sid == "" {
		return func() {}
	}
	c.mu.Lock()
	s := c.streams[sid]
	if s == nil {
		c.epochs++
		s = &stream{epoch: c.epochs}
		c.streams[sid] = s
	}
	s.held++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			s.held--
			c.epochs++
			s.epoch = c.epochs
			if s.held == 0 {
				delete(c.streams, sid)
			}
			c.mu.Unlock()
			c.mem.PurgeTools([]string{sid})
		})
	}
}

// fresh reports whether sid's copies may be used now: it declared listChanged and its
// stream is relayed here; epoch tells one holding of the stream from the next.
func (c *Cache) fresh(sid string) (epoch uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.declared[sid]; !ok {
		return 0, false
	}
	s := c.streams[sid]
	if s == nil || s.held == 0 {
		return 0, false
	}
	return s.epoch, true
}

// Stats returns the copies and their bytes on this replica.
func (c *Cache) Stats() (entries, bytes int) {
	if c == nil {
		return 0, 0
	}
	return c.mem.Stats()
}

// key folds the parts and the caller's credentials (private copies) under the secret.
func (c *Cache) key(r Request, scope string, parts ...string) string {
	m := hmac.New(sha256.New, c.secret[:])
	var n [8]byte
	field := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		m.Write(n[:])
		m.Write([]byte(s))
	}
	field(scope)
	for _, p := range parts {
		field(p)
	}
	if scope != "public" {
		names := append([]string{"authorization", r.Principal}, r.Vary...)
		for i, name := range names {
			name = strings.ToLower(name)
			if name == "" || containsBefore(names, i, name) {
				continue
			}
			field(name)
			var values []string
			if r.Headers != nil {
				values = r.Headers.Values(name)
			}
			binary.BigEndian.PutUint64(n[:], uint64(len(values))) // 0: absent, unlike one empty value
			m.Write(n[:])
			for _, v := range values {
				field(v)
			}
		}
	}
	return hex.EncodeToString(m.Sum(nil))
}

func containsBefore(names []string, i int, name string) bool {
	for _, x := range names[:i] {
		if strings.EqualFold(x, name) {
			return true
		}
	}
	return false
}

// onlyCursor reports whether params hold nothing but cursor and _meta.
func onlyCursor(p gjson.Result) bool {
	if !p.Exists() || p.Type == gjson.Null {
		return true
	}
	if !p.IsObject() {
		return false
	}
	ok := true
	p.ForEach(func(k, _ gjson.Result) bool {
		ok = k.Str == "cursor" || k.Str == "_meta"
		return ok
	})
	return ok
}

func (c *Cache) fault(err error) {
	if c.cfg.Fault != nil {
		c.cfg.Fault(err)
	}
}

// readGen reads the generation (near: from the store's near cache where it has one).
func (c *Cache) readGen(ctx context.Context, near bool) (string, error) {
	slots, err := c.cfg.State.Load(ctx, []string{GenKey}, near)
	if err != nil {
		return "", err
	}
	if len(slots) != 1 {
		return "", errors.New("listcache: the state answered no slot")
	}
	return string(slots[0].Value), nil
}

// casRetries bounds the compare-and-set rounds on the generation.
const casRetries = 16

// genForFill reads the generation for a fill, creating one where there is none: a copy
// never records an absent generation, so a key that expires and comes back cannot make a
// copy from before a change current again.
func (c *Cache) genForFill(ctx context.Context) (string, error) {
	for range casRetries {
		slots, err := c.cfg.State.Load(ctx, []string{GenKey}, false)
		if err != nil {
			return "", err
		}
		if len(slots) == 1 && slots[0].Exists && len(slots[0].Value) > 0 {
			return string(slots[0].Value), nil
		}
		var prev exchange.Slot
		if len(slots) == 1 {
			prev = slots[0]
		}
		gen := newGen()
		switch err := c.cfg.State.Store(ctx, "", GenKey, gen, prev, nil); {
		case err == nil:
			return string(gen), nil
		case !errors.Is(err, exchange.ErrConflict):
			return "", err
		}
	}
	return "", errors.New("listcache: too many compare-and-set conflicts on the generation")
}

// bump replaces the generation, so no replica serves a copy filled before now.
func (c *Cache) bump(ctx context.Context) error {
	for range casRetries {
		slots, err := c.cfg.State.Load(ctx, []string{GenKey}, false)
		if err != nil {
			return err
		}
		var prev exchange.Slot
		if len(slots) == 1 {
			prev = slots[0]
		}
		switch err := c.cfg.State.Store(ctx, "", GenKey, newGen(), prev, nil); {
		case err == nil:
			return nil
		case !errors.Is(err, exchange.ErrConflict):
			return err
		}
	}
	return errors.New("listcache: too many compare-and-set conflicts on the generation")
}

// newGen returns a generation no store has held before (128 random bits).
func newGen() []byte {
	var b [16]byte
	rand.Read(b[:])
	return hex.AppendEncode(nil, b[:])
}
