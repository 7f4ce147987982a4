package policy

import (
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stategate/stategate/plugin/internal/config"
)

func parse(t testing.TB, doc string) *config.Config {
	t.Helper()
	c, problems := config.Parse([]byte(doc))
	if c == nil {
		t.Fatalf("config.Parse: %v", problems)
	}
	return c
}

func sampleConfig(t testing.TB) *config.Config {
	t.Helper()
	data, err := os.ReadFile("../../../abi/testdata/config/sample.json")
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, string(data))
}

// overlapping has policies where order decides: the specific one first, then a general
// one, then one the general one shadows.
const overlapping = `{
  "version": 1,
  "names": {"separator": "__"},
  "stateSync": {
    "defaults": {"cacheControl": "immutable"},
    "policies": [
      {"match": "crm__contacts__get", "cacheControl": "none"},
      {"match": "crm__**", "cacheControl": "no-store", "invalidates": ["crm__**"]},
      {"match": "crm__contacts__*", "cacheControl": "immutable"},
      {"match": "*__list", "invalidates": ["x"]}
    ]
  }
}`

// reference resolves without the cache.
func reference(c *config.Config, name string) (config.CacheControl, *config.Policy) {
	for i := range c.Policies {
		if c.Policies[i].Match.Match(name) {
			return c.Policies[i].CacheControl, &c.Policies[i]
		}
	}
	return c.Default, nil
}

func TestResolver(t *testing.T) {
	sample := sampleConfig(t)
	over := parse(t, overlapping)
	tests := []struct {
		name       string
		cfg        *config.Config
		tool       string
		wantCache  config.CacheControl
		wantPolicy int // index into cfg.Policies, -1 for the defaults
	}{
		{"immutable policy", sample, "countries.list", config.CacheImmutable, 0},
		{"policy without cacheControl takes the default", sample, "tasks.update", config.CacheNoStore, 1},
		{"star matches one segment only", sample, "countries.eu.list", config.CacheNoStore, -1},
		{"no policy falls back to the defaults", sample, "weather.get", config.CacheNoStore, -1},
		{"empty name", sample, "", config.CacheNoStore, -1},
		{"case-sensitive", sample, "Countries.list", config.CacheNoStore, -1},
		{"cart policy", sample, "cart.pay", config.CacheNoStore, 3},
		{"first match wins over a later specific one", over, "crm__contacts__get", config.CacheNone, 0},
		{"general before shadowed", over, "crm__contacts__list", config.CacheNoStore, 1},
		{"later policy when earlier ones miss", over, "hr__list", config.CacheImmutable, 3},
		{"defaults of the second config", over, "hr__get", config.CacheImmutable, -1},
		{"separator is the configured one", over, "crm.contacts.get", config.CacheImmutable, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.cfg)
			for round := 0; round < 2; round++ { // uncached, then cached
				cc, p := r.Resolve(tt.tool)
				if cc != tt.wantCache {
					t.Errorf("round %d: cache control = %v, want %v", round, cc, tt.wantCache)
				}
				var want *config.Policy
				if tt.wantPolicy >= 0 {
					want = &tt.cfg.Policies[tt.wantPolicy]
				}
				if p != want {
					t.Errorf("round %d: policy = %p, want %p (index %d)", round, p, want, tt.wantPolicy)
				}
			}
			if n := r.CacheLen(); n != 1 {
				t.Errorf("CacheLen = %d, want 1", n)
			}
		})
	}
}

func TestResolver_noPolicies(t *testing.T) {
	c := parse(t, `{"version":1,"stateSync":{"defaults":{"cacheControl":"immutable"}}}`)
	r := New(c)
	for i := 0; i < 100; i++ {
		if cc, p := r.Resolve("t" + strconv.Itoa(i)); cc != config.CacheImmutable || p != nil {
			t.Fatalf("Resolve = %v, %v", cc, p)
		}
	}
	if n := r.CacheLen(); n != 0 {
		t.Errorf("CacheLen = %d: nothing to memoise without policies", n)
	}
	if cc, p := New(parse(t, `{"version":1}`)).Resolve("x"); cc != config.CacheNone || p != nil {
		t.Errorf("empty config: %v, %v", cc, p)
	}
}

func TestResolver_cacheBounded(t *testing.T) {
	c := sampleConfig(t)
	r := New(c)
	// Hostile names: all distinct, many matching a policy.
	for i := 0; i < 10000; i++ {
		name := "countries." + strconv.Itoa(i)
		if i%2 == 1 {
			name = "x" + strconv.Itoa(i) + strings.Repeat("y", i%200)
		}
		wantCC, wantP := reference(c, name)
		if cc, p := r.Resolve(name); cc != wantCC || p != wantP {
			t.Fatalf("Resolve(%q) = %v, %p; want %v, %p", name, cc, p, wantCC, wantP)
		}
		if n := r.CacheLen(); n > ResolveCacheSize {
			t.Fatalf("after %d names CacheLen = %d, over %d", i+1, n, ResolveCacheSize)
		}
	}
	if n := r.CacheLen(); n != ResolveCacheSize {
		t.Errorf("CacheLen = %d, want %d", n, ResolveCacheSize)
	}
	// Evicted names still resolve right.
	for _, name := range []string{"countries.0", "x1", "countries.9998"} {
		wantCC, wantP := reference(c, name)
		if cc, p := r.Resolve(name); cc != wantCC || p != wantP {
			t.Errorf("Resolve(%q) after eviction = %v, %p", name, cc, p)
		}
	}
	if n := r.CacheLen(); n != ResolveCacheSize {
		t.Errorf("CacheLen = %d, want %d", n, ResolveCacheSize)
	}
}

func TestResolver_longNames(t *testing.T) {
	c := sampleConfig(t)
	r := New(c)
	longest := "countries." + strings.Repeat("z", MaxNameBytes-len("countries."))
	tooLong := longest + "z"
	if cc, p := r.Resolve(longest); cc != config.CacheImmutable || p != &c.Policies[0] {
		t.Errorf("Resolve(longest) = %v, %p", cc, p)
	}
	if n := r.CacheLen(); n != 1 {
		t.Errorf("a %d-byte name should be cached: CacheLen = %d", len(longest), n)
	}
	for i := 0; i < 3000; i++ {
		name := tooLong + strconv.Itoa(i)
		if cc, p := r.Resolve(name); cc != config.CacheImmutable || p != &c.Policies[0] {
			t.Fatalf("Resolve(long) = %v, %p", cc, p)
		}
		if cc, p := r.Resolve(strings.Repeat("q", MaxNameBytes+1+i)); cc != config.CacheNoStore || p != nil {
			t.Fatalf("Resolve(long, unmatched) = %v, %p", cc, p)
		}
	}
	if n := r.CacheLen(); n != 1 {
		t.Errorf("names over %d bytes were cached: CacheLen = %d", MaxNameBytes, n)
	}
}

// TestResolver_noAlias resolves names that are views of a reused buffer (as the engine's
// names are views of its input), then overwrites the buffer: cached keys must be copies.
func TestResolver_noAlias(t *testing.T) {
	c := sampleConfig(t)
	r := New(c)
	buf := []byte("countries.list")
	view := unsafe.String(&buf[0], len(buf))
	if cc, p := r.Resolve(view); cc != config.CacheImmutable || p != &c.Policies[0] {
		t.Fatalf("Resolve(view) = %v, %p", cc, p)
	}
	copy(buf, "weather.report") // same length, no policy
	if cc, p := r.Resolve("countries.list"); cc != config.CacheImmutable || p != &c.Policies[0] {
		t.Errorf("after the buffer changed, countries.list resolves to %v, %p", cc, p)
	}
	if cc, p := r.Resolve("weather.report"); cc != config.CacheNoStore || p != nil {
		t.Errorf("weather.report resolves to %v, %p", cc, p)
	}
	if n := r.CacheLen(); n != 2 {
		t.Errorf("CacheLen = %d, want 2", n)
	}

	// Fill the cache through one reused buffer, then evict everything: keys that aliased
	// the buffer could not be found to delete, and the cache would grow past its bound.
	r = New(c)
	big := make([]byte, 32)
	for i := 0; i < ResolveCacheSize; i++ {
		n := copy(big, "countries."+strconv.Itoa(i))
		r.Resolve(unsafe.String(&big[0], n))
	}
	for i := range big {
		big[i] = 'x'
	}
	for i := 0; i < 2*ResolveCacheSize; i++ {
		name := "other." + strconv.Itoa(i)
		if cc, p := r.Resolve(name); cc != config.CacheNoStore || p != nil {
			t.Fatalf("Resolve(%q) = %v, %p", name, cc, p)
		}
	}
	if n := r.CacheLen(); n != ResolveCacheSize {
		t.Errorf("CacheLen = %d, want %d", n, ResolveCacheSize)
	}
	if cc, p := r.Resolve("countries.7"); cc != config.CacheImmutable || p != &c.Policies[0] {
		t.Errorf("Resolve(countries.7) = %v, %p", cc, p)
	}
}

func TestResolver_concurrent(t *testing.T) {
	c := parse(t, overlapping)
	r := New(c)
	names := []string{"crm__contacts__get", "crm__contacts__list", "crm__x", "hr__list", "hr__get", "", "crm"}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for i := 0; i < 5000; i++ {
				name := names[rng.Intn(len(names))]
				if rng.Intn(2) == 0 {
					name += "__" + strconv.Itoa(rng.Intn(3000)) // churn the cache
				}
				wantCC, wantP := reference(c, name)
				if cc, p := r.Resolve(name); cc != wantCC || p != wantP {
					errs <- "Resolve(" + strconv.Quote(name) + ") disagrees with the reference"
					return
				}
				if rng.Intn(100) == 0 && r.CacheLen() > ResolveCacheSize {
					errs <- "cache over its bound"
					return
				}
			}
		}(int64(g))
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := r.CacheLen(); n > ResolveCacheSize {
		t.Errorf("CacheLen = %d", n)
	}
}

func TestResolver_cachedHitDoesNotAllocate(t *testing.T) {
	r := New(sampleConfig(t))
	r.Resolve("countries.list")
	if n := testing.AllocsPerRun(100, func() { r.Resolve("countries.list") }); n != 0 {
		t.Errorf("a cached Resolve allocates %v times", n)
	}
}

func BenchmarkResolve(b *testing.B) {
	r := New(sampleConfig(b))
	names := make([]string, 4096)
	for i := range names {
		names[i] = "tasks." + strconv.Itoa(i)
	}
	b.Run("cached", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r.Resolve(names[i%64])
		}
	})
	b.Run("churn", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r.Resolve(names[i%len(names)])
		}
	})
}
