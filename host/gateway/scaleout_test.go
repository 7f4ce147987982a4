package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/store/storetest"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/stategate/stategate/internal/testenv"
)

// Scaling out: gateway replicas on a real Redis Cluster and on a real Sentinel-managed
// primary whose master is killed under load.

// scaleConfig has two session-keyed workflows: "counter", whose every tasks.update moves
// to the next of n states (a lost transition shows in the final state), and the demo's
// "checkout", whose cart.pay may run once per session.
func scaleConfig(n int) []byte {
	var states, allowed []string
	for i := 0; i < n; i++ {
		states = append(states, fmt.Sprintf(`"s%d":{"on":{"NEXT":"s%d"}}`, i, i+1))
		allowed = append(allowed, fmt.Sprintf(`"s%d"`, i))
	}
	states = append(states, fmt.Sprintf(`"s%d":{"type":"final"}`, n))
	return []byte(fmt.Sprintf(`{"version":1,"workflows":[
	 {"id":"counter","initial":"s0","key":"session","states":{%s},
	  "tools":{"tasks.update":{"states":[%s],"event":"NEXT"},"users.get":{"states":["s%d"]}}},
	 {"id":"checkout","initial":"empty","key":"session",
	  "states":{"empty":{"on":{"ADD_ITEM":"has_items"}},"has_items":{"on":{"ADD_ITEM":"has_items","CHECKOUT":"payment"}},
	   "payment":{"on":{"PAY":"confirmed"}},"confirmed":{"type":"final"}},
	  "tools":{"cart.add_item":{"states":["empty","has_items"],"event":"ADD_ITEM"},
	   "cart.checkout":{"states":["has_items"],"event":"CHECKOUT"},"cart.pay":{"states":["payment"],"event":"PAY"}}}]}`,
		strings.Join(states, ","), strings.Join(allowed, ","), n))
}

// ackStore counts, per key, the compare-and-sets its store acknowledged and those that
// failed with an error (which may or may not have been written).
type ackStore struct {
	store.Store
	mu            sync.Mutex
	acked, failed map[string]int
	apart         atomic.Int64 // leases releaseApart took and has not released yet
}

func newAckStore(s store.Store) *ackStore {
	return &ackStore{Store: s, acked: map[string]int{}, failed: map[string]int{}}
}

func (a *ackStore) CompareAndSwap(ctx context.Context, session, key string, old, new []byte) (bool, error) {
	ok, err := a.Store.CompareAndSwap(ctx, session, key, old, new)
	a.count(key, ok, err)
	return ok, err
}

func (a *ackStore) count(key string, ok bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err != nil:
		a.failed[key]++
	case ok:
		a.acked[key]++
	}
}

// State makes ackStore a store.Stater: the state of the store underneath (its round trips,
// its releasing writes on Redis), with every write counted as CompareAndSwap is.
func (a *ackStore) State() exchange.State { return ackState{State: store.StateOf(a.Store), a: a} }

// ackState counts the writes of a store's exchange.State.
type ackState struct {
	exchange.State
	a *ackStore
}

func (s ackState) Store(ctx context.Context, owner, key string, value []byte, prev exchange.Slot, lease exchange.Lease) error {
	err := s.State.Store(ctx, owner, key, value, prev, lease)
	if errors.Is(err, exchange.ErrConflict) {
		s.a.count(key, false, nil) // not written, and known not to be
	} else {
		s.a.count(key, err == nil, err)
	}
	return err
}

// releaseApart is an ackStore without the write that releases leases: the gateway then
// releases a moving call's leases in a round trip of their own after its writes, as it did
// before that write existed (the "before" of TestRoundTrips and BenchmarkRoundTrips).
type releaseApart struct{ store.Store } // an *ackStore

// State implements store.Stater: the ackStore's state, declaring no releasing writes, with
// the leases it takes counted until released.
func (s releaseApart) State() exchange.State {
	a := s.Store.(*ackStore)
	return apartState{State: a.State(), a: a}
}

type apartState struct {
	exchange.State
	a *ackStore
}

func (s apartState) Capabilities() exchange.Capabilities { return exchange.Capabilities{} }

func (s apartState) Lock(ctx context.Context, keys []string, ttl time.Duration, load bool) (exchange.Lease, []exchange.Slot, error) {
	lease, slots, err := s.State.Lock(ctx, keys, ttl, load)
	if err != nil {
		return lease, slots, err
	}
	s.a.apart.Add(1)
	var once sync.Once
	return exchange.LeaseFunc(func() { once.Do(func() { lease.Release(); s.a.apart.Add(-1) }) }), slots, nil
}

func (a *ackStore) counts(key string) (acked, failed int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.acked[key], a.failed[key]
}

// sessionCalls counts tools/call requests reaching the upstream per session and tool.
type sessionCalls struct {
	mu    sync.Mutex
	calls map[string]int // "<session> <tool>"
}

func (u *sessionCalls) wrap(h http.Handler) http.Handler {
	return testenv.OnToolCall(h, func(r *http.Request, tool string) {
		u.mu.Lock()
		u.calls[r.Header.Get("Mcp-Session-Id")+" "+tool]++
		u.mu.Unlock()
	})
}

func (u *sessionCalls) count(session, tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[session+" "+tool]
}

// scaleEnv is two gateway replicas, each with its own connection to one store deployment,
// in front of one demo upstream, behind a load balancer without affinity.
type scaleEnv struct {
	lb       *alternating
	stores   []*ackStore
	upstream *sessionCalls
}

func newScaleEnv(t testing.TB, spec string, cfg []byte) *scaleEnv {
	t.Helper()
	return newScaleEnvOf(t, spec, cfg, func(a *ackStore) store.Store { return a })
}

// newScaleEnvOf is newScaleEnv with the store each replica's gateway is given made by wrap.
func newScaleEnvOf(t testing.TB, spec string, cfg []byte, wrap func(*ackStore) store.Store) *scaleEnv {
	t.Helper()
	ctx := context.Background()
	rt := pluginRuntime(t)
	e := &scaleEnv{upstream: &sessionCalls{calls: map[string]int{}}}
	up := httptest.NewServer(e.upstream.wrap(demo.Handler(demo.Options{JSONResponse: true})))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL + "/mcp")
	var targets []*url.URL
	for range 2 {
		st, err := store.Open(ctx, spec, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		as := newAckStore(st)
		e.stores = append(e.stores, as)
		pool, err := wasmrt.NewPool(ctx, rt, cfg, wasmrt.PoolOptions{Size: 8})
		if err != nil {
			t.Fatal(err)
		}
		// Calls queue on a session's lease: 50 of them, on a 2-core machine shared with
		// other test packages, may take longer than the default 5 s wait.
		gw, err := gateway.New(gateway.Options{Upstream: upURL, Plugin: pool, Config: cfg, Store: wrap(as), LeaseWait: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		targets = append(targets, u)
	}
	e.lb = &alternating{targets: targets}
	return e
}

func (e *scaleEnv) connect(t testing.TB) *mcp.ClientSession {
	t.Helper()
	mc := mcp.NewClient(&mcp.Implementation{Name: "scale", Version: "1"}, nil)
	cs, err := mc.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://lb/mcp", HTTPClient: &http.Client{Transport: e.lb}},
		&mcp.ClientSessionOptions{ProtocolVersion: sessionEra})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// connectTo opens a client session on replica i alone.
func (e *scaleEnv) connectTo(t testing.TB, i int) *mcp.ClientSession {
	t.Helper()
	mc := mcp.NewClient(&mcp.Implementation{Name: "scale", Version: "1"}, nil)
	lb := &alternating{targets: e.lb.targets[i : i+1]}
	cs, err := mc.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://lb/mcp", HTTPClient: &http.Client{Transport: lb}},
		&mcp.ClientSessionOptions{ProtocolVersion: sessionEra})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// acked sums the compare-and-sets on key both replicas' stores acknowledged, and failed.
func (e *scaleEnv) acked(key string) (acked, failed int) {
	for _, s := range e.stores {
		a, f := s.counts(key)
		acked, failed = acked+a, failed+f
	}
	return acked, failed
}

// counterState reads the counter workflow's state index for session sid from the store.
func (e *scaleEnv) counterState(t *testing.T, sid string) int {
	t.Helper()
	// Right after a failover a replica's store may not have learnt the new primary yet
	// (Sentinel's notice reaches each client in its own time): read again until it has.
	v, err := e.stores[0].Get(context.Background(), counterKey(sid))
	for deadline := time.Now().Add(15 * time.Second); err != nil && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		v, err = e.stores[0].Get(context.Background(), counterKey(sid))
	}
	if err != nil {
		t.Fatal(err)
	}
	var snap struct{ State string }
	if err := json.Unmarshal(v, &snap); err != nil || !strings.HasPrefix(snap.State, "s") {
		t.Fatalf("session %s: counter snapshot %q: %v", sid, v, err)
	}
	n, err := strconv.Atoi(snap.State[1:])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func counterKey(sid string) string { return "stategate/v1/counter/session//" + sid }

// callRetrying calls tool, calling again (after a pause) while the gate refuses it as
// retryable, as a client that honours "retryable" does; it returns the retries made.
func callRetrying(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, int, error) {
	for n := 0; ; n++ {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || metaCode(res) != abi.DenyGateUnavailable || n == 20 {
			return res, n, err
		}
		time.Sleep(time.Duration(10*(n+1)) * time.Millisecond)
	}
}

// prepareCart moves a session's checkout workflow to payment.
func prepareCart(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	if err := toPayment(cs); err != nil {
		t.Fatal(err)
	}
}

// toPayment moves a session's checkout workflow to payment (retrying refusals that say
// they are retryable).
func toPayment(cs *mcp.ClientSession) error {
	for _, step := range []struct {
		tool string
		args map[string]any
	}{{"cart.add_item", map[string]any{"sku": "tea"}}, {"cart.checkout", map[string]any{}}} {
		res, _, err := callRetrying(context.Background(), cs, step.tool, step.args)
		if err != nil {
			return fmt.Errorf("%s: %w", step.tool, err)
		}
		if res.IsError {
			return fmt.Errorf("%s: %q", step.tool, texts(res))
		}
	}
	return nil
}

// TestScaleOut_redisCluster: two replicas on a real 3-master Redis Cluster. Many sessions
// each send 50 concurrent moving calls: every transition is kept. Racing cart.pay calls in
// many sessions are admitted once each. The sessions' keys land on all three masters.
func TestScaleOut_redisCluster(t *testing.T) {
	spec, masters := storetest.Cluster(t, 3)
	const sessions, perSession = 12, 50
	e := newScaleEnv(t, spec, scaleConfig(perSession))
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make(chan string, 2*sessions*perSession)
	var counters, carts []*mcp.ClientSession
	for range sessions {
		counters = append(counters, e.connect(t))
		carts = append(carts, e.connect(t))
	}
	paid := make([]atomic.Int64, sessions)
	var retries atomic.Int64
	for i := range sessions {
		for range perSession {
			wg.Go(func() {
				res, n, err := callRetrying(ctx, counters[i], "tasks.update", map[string]any{"id": "T1", "status": "in_progress"})
				retries.Add(int64(n))
				if err != nil {
					errs <- err.Error()
				} else if res.IsError {
					errs <- strings.Join(texts(res), "")
				}
			})
		}
		wg.Go(func() {
			if err := toPayment(carts[i]); err != nil {
				errs <- fmt.Sprintf("cart session %d: %v", i, err)
				return
			}
			p, d := raceCartPay(t, carts[i], 8)
			paid[i].Store(p)
			if p+d != 8 {
				errs <- fmt.Sprintf("cart session %d: %d paid, %d denied as not available, of 8", i, p, d)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("call failed: %s", e)
	}
	t.Logf("%d calls retried after a busy (retryable) refusal", retries.Load())
	for i, cs := range counters {
		if got := e.counterState(t, cs.ID()); got != perSession {
			t.Errorf("session %d: counter at s%d after %d calls: a transition was lost", i, got, perSession)
		}
		if acked, _ := e.acked(counterKey(cs.ID())); acked != perSession {
			t.Errorf("session %d: %d transitions stored, want %d", i, acked, perSession)
		}
	}
	for i, cs := range carts {
		if n := e.upstream.count(cs.ID(), "cart.pay"); paid[i].Load() != 1 || n != 1 {
			t.Errorf("cart session %d: %d paid, upstream ran cart.pay %d times; want 1 and 1", i, paid[i].Load(), n)
		}
	}
	for _, m := range masters {
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		n, err := c.DBSize(ctx).Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("master %s holds %d keys", m.Addr(), n)
		if n == 0 {
			t.Errorf("master %s holds no keys: %d sessions did not spread", m.Addr(), 2*sessions)
		}
	}
}

// TestScaleOut_sentinelFailover: two replicas on a Sentinel-managed primary with two
// replicas. Sessions send moving calls in a loop; the primary is killed (SIGKILL) and
// Sentinel promotes a replica. No transition the store acknowledged is lost (every
// acknowledged compare-and-set shows in the final state), none is invented, racing
// cart.pay calls around the switch run upstream at most once per session, and calls
// succeed again after the switch.
func TestScaleOut_sentinelFailover(t *testing.T) {
	set := storetest.Sentinel(t, 2, 1)
	const sessions, states = 6, 600
	e := newScaleEnv(t, set.Spec()+"?read_timeout=500ms&dial_timeout=500ms", scaleConfig(states))
	ctx := context.Background()
	var counters, carts []*mcp.ClientSession
	for range sessions {
		counters = append(counters, e.connect(t))
		cs := e.connect(t)
		prepareCart(t, cs)
		carts = append(carts, cs)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	for _, cs := range counters {
		for range 2 { // two calls in flight per session
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "tasks.update", Arguments: map[string]any{"id": "T1", "status": "in_progress"}})
					if err == nil && !res.IsError {
						ok.Add(1)
					} else {
						failed.Add(1)
						time.Sleep(10 * time.Millisecond)
					}
				}
			})
		}
	}
	time.Sleep(500 * time.Millisecond)
	before := ok.Load()
	old := set.PrimaryAddr()
	set.Primary.Kill()
	killed := time.Now()
	// Racing pays: the first sessions race while the switch is under way.
	paid := make([]int64, sessions)
	var races sync.WaitGroup
	for i := range sessions - 1 {
		races.Go(func() {
			time.Sleep(time.Duration(i) * 400 * time.Millisecond)
			paid[i], _ = raceCartPay(t, carts[i], 4)
		})
	}
	for deadline := time.Now().Add(30 * time.Second); set.PrimaryAddr() == old; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			t.Fatal("Sentinel did not promote a replica within 30s")
		}
	}
	switched := time.Since(killed)
	atSwitch := ok.Load()
	// After the switch: calls succeed again.
	for deadline := time.Now().Add(20 * time.Second); ok.Load() < atSwitch+50; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			t.Fatalf("only %d calls succeeded in 20s after the switch", ok.Load()-atSwitch)
		}
	}
	close(stop)
	wg.Wait()
	races.Wait()
	// The last session races once the new primary serves: exactly one pay.
	paid[sessions-1], _ = raceCartPay(t, carts[sessions-1], 4)
	t.Logf("switch after %v; calls: %d ok before the kill, %d ok in all, %d failed (closed) around the switch",
		switched.Round(time.Millisecond), before, ok.Load(), failed.Load())

	for i, cs := range counters {
		acked, failedCAS := e.acked(counterKey(cs.ID()))
		got := e.counterState(t, cs.ID())
		t.Logf("session %d: s%d; %d acknowledged transitions, %d failed writes", i, got, acked, failedCAS)
		if got < acked {
			t.Errorf("session %d: counter at s%d but %d transitions were acknowledged: %d lost", i, got, acked, acked-got)
		}
		if got > acked+failedCAS {
			t.Errorf("session %d: counter at s%d, more than %d acknowledged + %d failed writes", i, got, acked, failedCAS)
		}
	}
	for i, cs := range carts {
		n := e.upstream.count(cs.ID(), "cart.pay")
		t.Logf("cart session %d: %d paid, upstream ran cart.pay %d times", i, paid[i], n)
		if n > 1 || paid[i] > 1 {
			t.Errorf("cart session %d: upstream ran cart.pay %d times, %d answered as paid; want at most once", i, n, paid[i])
		}
	}
	if paid[sessions-1] != 1 {
		t.Errorf("after the switch, racing cart.pay calls paid %d times, want 1", paid[sessions-1])
	}
}

// failingWrites is a store whose compare-and-sets fail (an error, as a store that went
// away) while armed.
type failingWrites struct {
	store.Store
	armed atomic.Bool
}

func (f *failingWrites) CompareAndSwap(ctx context.Context, session, key string, old, new []byte) (bool, error) {
	if f.armed.Load() {
		return false, errors.New("store went away")
	}
	return f.Store.CompareAndSwap(ctx, session, key, old, new)
}

// failingRedisWrites is failingWrites on Redis, whose last write of a transition also
// releases the call's leases: that write fails too while armed, and is counted.
type failingRedisWrites struct {
	*failingWrites
	releasing atomic.Int32 // releasing writes that failed
}

// State implements store.Stater: Redis's state, whose writes fail while armed (those given
// the call's lease, which would release it, counted).
func (f *failingRedisWrites) State() exchange.State {
	return failingState{State: f.Store.(*store.Redis).State(), f: f}
}

type failingState struct {
	exchange.State
	f *failingRedisWrites
}

func (s failingState) Store(ctx context.Context, owner, key string, value []byte, prev exchange.Slot, lease exchange.Lease) error {
	if s.f.armed.Load() {
		if lease != nil {
			s.f.releasing.Add(1)
		}
		return errors.New("store went away")
	}
	return s.State.Store(ctx, owner, key, value, prev, lease)
}

// TestE2E_failedTransitionWriteHoldsLease: cart.pay ran upstream but its transition could
// not be stored (the store failed past every retry); the workflow still says payment, so a
// second cart.pay must not be admitted while the lease lives (abi.HoldLease), even once the
// store is back. On Redis the failed write is the one that would have released the lease.
func TestE2E_failedTransitionWriteHoldsLease(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			fw := &failingWrites{Store: store.NewMemory(store.Options{})}
			var st store.Store = fw
			var rw *failingRedisWrites
			if backend == "redis" {
				r, err := store.NewRedis(context.Background(), storetest.Redis(t), store.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				fw = &failingWrites{Store: r}
				rw = &failingRedisWrites{failingWrites: fw}
				st = rw
			}
			e := newEnv(t, envOptions{demo: demo.Options{JSONResponse: true}, store: st, gateway: gateway.Options{LeaseWait: 200 * time.Millisecond}})
			c := e.connect(t, sessionEra)
			prepareCart(t, c.cs)
			fw.armed.Store(true)
			if res := c.call(t, "cart.pay", nil); res.IsError {
				t.Fatalf("first cart.pay: %q", texts(res))
			}
			fw.armed.Store(false)
			if rw != nil && rw.releasing.Load() == 0 {
				t.Fatal("no write that releases the lease was tried: the Redis path was not taken")
			}
			res := c.call(t, "cart.pay", nil)
			if !res.IsError || metaCode(res) != abi.DenyGateUnavailable {
				t.Fatalf("second cart.pay after an unrecorded payment: isError %v code %q %q; want GATE_UNAVAILABLE", res.IsError, metaCode(res), texts(res))
			}
			if n := e.upstream.count("cart.pay"); n != 1 {
				t.Fatalf("upstream ran cart.pay %d times, want 1", n)
			}
		})
	}
}
