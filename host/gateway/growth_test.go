package gateway_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/store"
	"github.com/tidwall/gjson"
	"go.etcd.io/bbolt"
)

// growthConfig is the demo configuration with tool health and a response cache in which
// every tool is immutable unless a policy says otherwise: every tools/call, a made-up name
// too, reaches both.
func growthConfig(t *testing.T) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(demo.Config(), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["stateSync"].(map[string]any)["defaults"] = map[string]any{"cacheControl": "immutable"}
	cfg["health"] = map[string]any{"autoDisableThreshold": 3, "retryAfterMs": 60000}
	cfg["cache"] = map[string]any{}
	out, _ := json.Marshal(cfg)
	return out
}

// TestSecurity_unknownToolNamesLeaveNoState: 5,000 tools/call of names no upstream listed,
// through the gateway on a real bolt file, with tool health and the response cache on,
// leave no record in the store and no entry in the core's per-name memory. Before the fix
// (issue 25, finding 6) each name left a health record (its failure was counted) and a
// cache generation plus an index entry, and the core kept its cache figures and its health
// keys: 20,000 calls grew the bolt file by 16 MiB and the process by about 75 MiB.
func TestSecurity_unknownToolNamesLeaveNoState(t *testing.T) {
	const calls, prefix = 5000, "made.up."
	dbPath := filepath.Join(t.TempDir(), "stategate.db")
	st, err := store.NewBolt(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := newEnv(t, envOptions{config: growthConfig(t), store: st, demo: demo.Options{JSONResponse: true}})
	sid := rawSession(t, e.url)
	listed := e.gw.Core().Footprint().SeenNames
	if listed == 0 {
		t.Fatal("the gateway knows no listed tool: the probe failed")
	}
	// A listed tool still gets its records: the rule keys on the listing, not on health
	// or the cache being skipped.
	if body := postJSON(t, e.url, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tasks.list","arguments":{}}}`); gjson.Get(body, "result.isError").Bool() {
		t.Fatalf("tasks.list: %s", body)
	}

	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var unexpected []string
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				body := postJSON(t, e.url, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s%d","arguments":{}}}`, i+10, prefix, i))
				if !gjson.Get(body, "error").Exists() && !gjson.Get(body, "result.isError").Bool() {
					mu.Lock()
					unexpected = append(unexpected, body)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range calls {
		work <- i
	}
	close(work)
	wg.Wait()
	if len(unexpected) > 0 {
		t.Fatalf("%d calls of unknown names did not fail; the first: %s", len(unexpected), unexpected[0])
	}

	core := e.gw.Core()
	f := core.Footprint()
	if f.SeenNames != listed || f.UnitKeys > listed || f.CacheFigures > listed || f.Flights != 0 {
		t.Errorf("after %d unknown names the core's per-name memory is %+v; want nothing beyond the %d listed tools", calls, f, listed)
	}
	figures, _ := core.Operator().AllCacheFigures()
	for tool := range figures {
		if strings.HasPrefix(tool, prefix) {
			t.Fatalf("the cache keeps figures for the unknown name %q (%d tools in all)", tool, len(figures))
		}
	}
	if _, ok := figures["tasks.list"]; !ok {
		t.Error("the listed tool tasks.list has no cache figures: the cache did not run")
	}

	// The store, read from the file itself.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(dbPath, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var keys []string
	db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("data")).ForEach(func(k, _ []byte) error {
			keys = append(keys, string(k[1:])) // data keys carry a one-byte prefix
			return nil
		})
	})
	var leaked []string
	for _, k := range keys {
		if strings.Contains(k, prefix) {
			leaked = append(leaked, k)
		}
	}
	if len(leaked) > 0 {
		t.Fatalf("the store holds %d records for unknown names (of %d keys); the first: %s", len(leaked), len(keys), leaked[0])
	}
	if !containsKey(keys, "stategate/v1/cache/gen/tasks.list") {
		t.Errorf("no cache generation for the listed tool tasks.list; keys: %v", keys)
	}
}

func containsKey(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}
