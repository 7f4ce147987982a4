package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Shared is the state every replica shares, as the generations use it (the exchange's
// State, one key at a time, never leased).
type Shared interface {
	// Read returns key's value (nil when absent) and a token for Write.
	Read(ctx context.Context, key string) (value []byte, token any, err error)
	// Write stores value under key if it still holds what token was read as; false (and
	// no error) when it does not: re-read and re-apply.
	Write(ctx context.Context, key string, value []byte, token any) (stored bool, err error)
}

// Tally names what the service counts; the core counts each with its own counter.
type Tally int

// The tallies.
const (
	Hits      Tally = iota // a call answered from the cache
	Misses                 // a cacheable call that went to the upstream
	Coalesced              // a miss answered by an identical call's upstream answer
	Stored                 // a result stored
	Purged                 // a tool whose entries a mutation or an operator purged
)

// Config makes a Service.
type Config struct {
	Limits     Limits
	Memory     Cache  // this replica's entries
	Shared     Shared // the generations and the index
	CASRetries int    // compare-and-set rounds before giving up
	// Principal and Vary name the headers that, with Authorization, make up a caller's
	// credentials: every key is folded with them (callers.go).
	Principal string
	Vary      []string
	Count     func(t Tally, n int)
	Fault     func(err error, tool string) // a cache fault (abi.FaultCache) about tool
}

// Service is the response cache of one configuration's exchange; safe for concurrent use.
// A nil *Service is a cache that is off: Finish and Footprint do nothing.
type Service struct {
	cfg     Config
	flights flights
	callers *callerKeys
	figures toolFigures
}

// New returns the Service of cfg.
func New(cfg Config) *Service {
	return &Service{cfg: cfg, flights: flights{m: map[string]*flight{}}, callers: newCallerKeys(cfg.Principal, cfg.Vary)}
}

func (s *Service) count(t Tally, n int) {
	if s.cfg.Count != nil {
		s.cfg.Count(t, n)
	}
}

func (s *Service) fault(err error, tool string) {
	if s.cfg.Fault != nil {
		s.cfg.Fault(err, tool)
	}
}

// Key returns the cache key of a call the engine keyed engineKey, made by the caller whose
// request headers are h: never shared across credentials.
func (s *Service) Key(engineKey string, h Headers) string { return s.callers.key(engineKey, h) }

// Lookup answers an admitted cacheable call (call.Key set) from the cache when it can,
// else makes it the leader of its flight or waits for the leader, each until wait. A
// cache that fails never fails the call: it goes to the upstream (call.Key cleared). A
// miss joins the flight of the generation it reads (flight.go).
func (s *Service) Lookup(ctx context.Context, call *Call, tool string, wait time.Duration) (Hit, bool) {
	if e, ok := s.cfg.Memory.Get(call.Key); ok {
		gen, _, err := s.cfg.Shared.Read(ctx, GenPrefix+e.Tool)
		switch {
		case err != nil:
			s.fault(err, tool)
			call.Key = ""
			return Hit{}, false
		case string(gen) == e.Gen:
			s.count(Hits, 1)
			s.figures.add(tool, func(f *Figures) { f.Hits++ })
			return Hit{Result: e.Result, Age: time.Since(e.Stored)}, true
		}
		s.cfg.Memory.Delete(call.Key)
	}
	gen, err := s.indexedGen(ctx, tool)
	if err != nil {
		s.missed(tool)
		s.fault(err, tool)
		call.Key = ""
		return Hit{}, false
	}
	return s.join(ctx, call, tool, gen, wait)
}

func (s *Service) missed(tool string) {
	s.count(Misses, 1)
	s.figures.add(tool, func(f *Figures) { f.Misses++ })
}

// Store keeps a successful result of a cacheable call (result: the answer's result object)
// and hands it to the calls waiting for it.
func (s *Service) Store(call *Call, tool string, result []byte) {
	if call.Key == "" || call.flight == nil {
		return
	}
	if len(result) > s.cfg.Limits.MaxEntryBytes {
		s.Finish(call, nil)
		return
	}
	result = append([]byte(nil), result...)
	now := time.Now()
	if s.cfg.Memory.Put(call.Key, Entry{Tool: tool, Result: result, Gen: call.gen, Stored: now, Expires: now.Add(call.TTL)}) {
		s.count(Stored, 1)
	}
	s.Finish(call, result)
}

// indexedGen lists tool in the index of cached tools and reads its generation, for a call
// that may fill an entry: both before its upstream call begins, so a mutation that does
// not see the tool in the index finished its upstream call first, and one that bumps the
// generation later makes the entry stale.
//
// A tool without a generation (never cached, or its key expired in the store) gets a new
// one here: an entry never records an absent generation, so a key that expires and comes
// back cannot make an entry older than a mutation current again.
func (s *Service) indexedGen(ctx context.Context, tool string) (string, error) {
	if err := s.indexTool(ctx, tool); err != nil {
		return "", err
	}
	key := GenPrefix + tool
	for range s.cfg.CASRetries {
		v, tok, err := s.cfg.Shared.Read(ctx, key)
		if err != nil {
			return "", err
		}
		if len(v) > 0 {
			return string(v), nil
		}
		gen := newGen()
		switch ok, err := s.cfg.Shared.Write(ctx, key, gen, tok); {
		case err != nil:
			return "", err
		case ok:
			return string(gen), nil
		}
	}
	return "", errors.New("too many compare-and-set conflicts on a cache generation")
}

// newGen returns a generation no store has held before (128 random bits): generations are
// never reused, so no entry can match a generation that came back.
func newGen() []byte {
	var b [16]byte
	rand.Read(b[:]) // never fails: crypto/rand ends the program rather than return an error
	return hex.AppendEncode(nil, b[:])
}

// Tools reads the index of tools that were ever cached.
func (s *Service) Tools(ctx context.Context) ([]string, error) {
	tools, _, err := s.index(ctx)
	return tools, err
}

func (s *Service) index(ctx context.Context) ([]string, any, error) {
	v, tok, err := s.cfg.Shared.Read(ctx, IndexKey)
	if err != nil {
		return nil, nil, err
	}
	var tools []string
	gjson.ParseBytes(v).ForEach(func(_, v gjson.Result) bool {
		tools = append(tools, v.Str)
		return true
	})
	return tools, tok, nil
}

// indexTool lists tool in the index of cached tools (compare-and-set).
func (s *Service) indexTool(ctx context.Context, tool string) error {
	for range s.cfg.CASRetries {
		tools, tok, err := s.index(ctx)
		if err != nil {
			return err
		}
		if slices.Contains(tools, tool) {
			return nil
		}
		if len(tools) >= MaxTools {
			return errors.New("the index of cached tools is full")
		}
		switch ok, err := s.cfg.Shared.Write(ctx, IndexKey, jsonx.AppendStrings(nil, append(tools, tool)), tok); {
		case err != nil:
			return err
		case ok:
			return nil
		}
	}
	return errors.New("too many compare-and-set conflicts on the cache index")
}

// bumpGen moves a tool's generation on to a new one (compare-and-set), so no replica
// serves an entry filled before now.
func (s *Service) bumpGen(ctx context.Context, tool string) error {
	key := GenPrefix + tool
	for range s.cfg.CASRetries {
		_, tok, err := s.cfg.Shared.Read(ctx, key)
		if err != nil {
			return err
		}
		switch ok, err := s.cfg.Shared.Write(ctx, key, newGen(), tok); {
		case err != nil:
			return err
		case ok:
			return nil
		}
	}
	return errors.New("too many compare-and-set conflicts on a cache generation")
}

// Purge bumps the generations of tools and drops this replica's entries of them. A
// generation that cannot be moved is an error; this replica then drops its whole cache.
func (s *Service) Purge(ctx context.Context, tools []string) error {
	var failed error
	for _, t := range tools {
		if err := s.bumpGen(ctx, t); err != nil {
			failed = err
		}
	}
	s.cfg.Memory.PurgeTools(tools)
	s.count(Purged, len(tools))
	for _, t := range tools {
		s.figures.add(t, func(f *Figures) { f.Invalidations++ })
	}
	if failed != nil {
		s.cfg.Memory.PurgeAll()
	}
	return failed
}

// DropAll drops every entry of this replica (other replicas keep theirs).
func (s *Service) DropAll() { s.cfg.Memory.PurgeAll() }

// Select returns the indexed tools pick selects (the operator's purge: one tool by its
// exact name, or a glob); pick's error ends the selection.
func (s *Service) Select(ctx context.Context, pick func(tool string) (bool, error)) ([]string, error) {
	tools, err := s.Tools(ctx)
	if err != nil {
		return nil, err
	}
	var hit []string
	for _, t := range tools {
		ok, err := pick(t)
		if err != nil {
			return nil, err
		}
		if ok {
			hit = append(hit, t)
		}
	}
	return hit, nil
}

// appendJSONStrings appends list as a JSON array of strings.

// UnionTools adds names to a JSON array of tool names.
func UnionTools(known []byte, names []string) []byte {
	var all []string
	gjson.ParseBytes(known).ForEach(func(_, v gjson.Result) bool {
		all = append(all, v.Str)
		return true
	})
	for _, n := range names {
		if !slices.Contains(all, n) {
			all = append(all, n)
		}
	}
	return jsonx.AppendStrings(nil, all)
}

// toolEntries is implemented by caches that can count a tool's entries (Memory).
type toolEntries interface {
	ToolEntries(tool string) int
}

// toolFigures counts per tool, bounded like the index of cached tools.
type toolFigures struct {
	mu sync.Mutex
	m  map[string]*Figures
}

func (f *toolFigures) add(tool string, fn func(*Figures)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*Figures{}
	}
	t := f.m[tool]
	if t == nil {
		if len(f.m) >= MaxTools {
			return
		}
		t = &Figures{}
		f.m[tool] = t
	}
	fn(t)
}

// Figures returns a tool's cache figures on this replica; false when the tool was never
// looked up in the cache.
func (s *Service) Figures(tool string) (Figures, bool) {
	s.figures.mu.Lock()
	t := s.figures.m[tool]
	var out Figures
	if t != nil {
		out = *t
	}
	s.figures.mu.Unlock()
	if t == nil {
		return Figures{}, false
	}
	return s.withEntries(tool, out), true
}

// AllFigures returns the cache figures of every tool looked up in the cache on this
// replica (what GET /admin/cache lists).
func (s *Service) AllFigures() map[string]Figures {
	s.figures.mu.Lock()
	out := make(map[string]Figures, len(s.figures.m))
	for tool, f := range s.figures.m {
		out[tool] = *f
	}
	s.figures.mu.Unlock()
	for tool, f := range out {
		out[tool] = s.withEntries(tool, f)
	}
	return out
}

// withEntries fills f's Entries from the cache, when it can count a tool's entries.
func (s *Service) withEntries(tool string, f Figures) Figures {
	if te, ok := s.cfg.Memory.(toolEntries); ok {
		f.Entries = int64(te.ToolEntries(tool))
	}
	return f
}

// Footprint returns how many tools have figures and how many fetches are in flight.
func (s *Service) Footprint() (figures, flights int) {
	if s == nil {
		return 0, 0
	}
	s.figures.mu.Lock()
	figures = len(s.figures.m)
	s.figures.mu.Unlock()
	s.flights.mu.Lock()
	flights = len(s.flights.m)
	s.flights.mu.Unlock()
	return figures, flights
}
