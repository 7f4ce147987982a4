package store

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// openBoltAt opens the Bolt store at path on clock c, its sweeper idle.
func openBoltAt(t testing.TB, path string, opts Options, c *fakeClock) *Bolt {
	t.Helper()
	b, err := openBolt(path, opts, c.Now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// bucketLens counts the entries of every bucket but meta.
func bucketLens(t testing.TB, b *Bolt) map[string]int {
	t.Helper()
	lens := map[string]int{}
	err := b.db.View(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketData, bucketExpiry, bucketSessions, bucketOwners} {
			lens[string(name)] = tx.Bucket(name).Stats().KeyN
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lens
}

func TestBolt_reopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "stategate.db")
	c := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	opts := Options{IdleTTL: time.Hour}
	b := openBoltAt(t, path, opts, c)
	for _, k := range hostileKeys {
		mustCAS(t, b, "s1", k, nil, []byte("v of "+k), true)
	}
	mustCAS(t, b, "s2", "shared", nil, []byte("1"), true)
	mustCAS(t, b, "s3", "shared", []byte("1"), []byte("2"), true)
	mustCAS(t, b, "", "stale", nil, []byte("old"), true)
	c.Advance(40 * time.Minute)
	mustCAS(t, b, "s2", "fresh", nil, []byte("new"), true)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := b.Get(ctx, "fresh"); err == nil {
		t.Error("Get after Close succeeded")
	}

	c.Advance(30 * time.Minute) // 70 minutes after the first writes, 30 after "fresh"
	b = openBoltAt(t, path, opts, c)
	mustGet(t, b, "fresh", []byte("new"))
	mustGet(t, b, "stale", nil)
	mustGet(t, b, "shared", nil)
	for _, k := range hostileKeys {
		mustGet(t, b, k, nil)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	c.now = time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC) // back before anything expired
	b = openBoltAt(t, path, opts, c)
	for _, k := range hostileKeys {
		mustGet(t, b, k, []byte("v of "+k))
	}
	mustGet(t, b, "shared", []byte("2"))
	// The session index survived: Forget of either writer deletes the shared key.
	mustForget(t, b, "s3")
	mustGet(t, b, "shared", nil)
	mustGet(t, b, "fresh", []byte("new"))
	mustForget(t, b, "s1")
	for _, k := range hostileKeys {
		mustGet(t, b, k, nil)
	}
	mustGet(t, b, "stale", []byte("old"))
	if got, want := bucketLens(t, b), (map[string]int{"data": 2, "expiry": 2, "sessions": 1, "owners": 1}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("buckets hold %v entries, want %v", got, want)
	}
}

func TestBolt_secondOpenFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stategate.db")
	first, err := NewBolt(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	check := func(who, msg string, took time.Duration) {
		t.Helper()
		for _, want := range []string{"store[bolt] path[" + path + "]", "another stategate may be using it"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error %q does not contain %q", who, msg, want)
			}
		}
		if took > boltLockTimeout+2*time.Second {
			t.Errorf("%s: failed after %v, want about %v", who, took, boltLockTimeout)
		}
	}

	start := time.Now()
	second, err := NewBolt(path, Options{})
	if err == nil {
		second.Close()
		t.Fatal("a second NewBolt on an open file succeeded")
	}
	check("same process", err.Error(), time.Since(start))

	start = time.Now()
	out, err := helperProcess(t, "open", path).Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	msg, ok := strings.CutPrefix(strings.SplitN(string(out), "\n", 2)[0], "open: ")
	if !ok {
		t.Fatalf("helper printed %q, want an open error", out)
	}
	check("another process", msg, time.Since(start))
}

func TestBolt_refusesForeignOrDamagedFiles(t *testing.T) {
	// valid writes a stategate store with a few entries and returns its bytes.
	valid := func(t *testing.T) []byte {
		path := filepath.Join(t.TempDir(), "valid.db")
		b, err := NewBolt(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			mustCAS(t, b, "s", "k"+strconv.Itoa(i), nil, bytes.Repeat([]byte{'v'}, 100), true)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	// withBolt writes a bbolt database that fn fills.
	withBolt := func(t *testing.T, fn func(tx *bbolt.Tx) error) []byte {
		path := filepath.Join(t.TempDir(), "other.db")
		db, err := bbolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	header := func(format, version string) func(tx *bbolt.Tx) error {
		return func(tx *bbolt.Tx) error {
			if err := initFormat(tx); err != nil {
				return err
			}
			m := tx.Bucket(bucketMeta)
			if err := m.Put(metaFormat, []byte(format)); err != nil {
				return err
			}
			return m.Put(metaVersion, []byte(version))
		}
	}
	tests := []struct {
		name    string
		file    func(t *testing.T) []byte
		wantErr string
	}{
		{name: "text_file", wantErr: "not a bbolt database, or a damaged one: invalid database",
			file: func(*testing.T) []byte { return bytes.Repeat([]byte("not a database\n"), 1000) }},
		{name: "short_garbage", wantErr: "not a bbolt database",
			file: func(*testing.T) []byte { return []byte("x") }},
		{name: "sqlite_header", wantErr: "not a bbolt database",
			file: func(*testing.T) []byte { return append([]byte("SQLite format 3\x00"), make([]byte, 8192)...) }},
		{name: "another_programs_bbolt", wantErr: `not a stategate store: no "meta" bucket, but a bucket["widgets"]`,
			file: func(t *testing.T) []byte {
				return withBolt(t, func(tx *bbolt.Tx) error {
					b, err := tx.CreateBucket([]byte("widgets"))
					if err != nil {
						return err
					}
					return b.Put([]byte("w1"), []byte("blue"))
				})
			}},
		{name: "another_format", wantErr: `not a stategate store: format["other-store"], want "stategate-store"`,
			file: func(t *testing.T) []byte { return withBolt(t, header("other-store", "1")) }},
		{name: "another_version", wantErr: "format version[2] is not supported (want 1)",
			file: func(t *testing.T) []byte { return withBolt(t, header(boltFormat, "2")) }},
		{name: "missing_bucket", wantErr: "damaged file: bucket[owners] is missing",
			file: func(t *testing.T) []byte {
				return withBolt(t, func(tx *bbolt.Tx) error {
					if err := initFormat(tx); err != nil {
						return err
					}
					return tx.DeleteBucket(bucketOwners)
				})
			}},
		{name: "malformed_record", wantErr: "damaged file: bucket[data] has a malformed entry",
			file: func(t *testing.T) []byte {
				return withBolt(t, func(tx *bbolt.Tx) error {
					if err := initFormat(tx); err != nil {
						return err
					}
					return tx.Bucket(bucketData).Put(dataKey("k"), []byte("short"))
				})
			}},
		{name: "truncated", wantErr: "damaged file",
			file: func(t *testing.T) []byte { d := valid(t); return d[:len(d)/2] }},
		{name: "meta_pages_zeroed", wantErr: "not a bbolt database, or a damaged one",
			file: func(t *testing.T) []byte {
				d := valid(t)
				clear(d[:2*4096])
				return d
			}},
		{name: "data_pages_zeroed", wantErr: "damaged file",
			file: func(t *testing.T) []byte {
				d := valid(t)
				clear(d[2*4096:])
				return d
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.file(t)
			path := filepath.Join(t.TempDir(), "stategate.db")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			b, err := NewBolt(path, Options{})
			if err == nil {
				b.Close()
				t.Fatal("NewBolt succeeded")
			}
			t.Log(err)
			if want := "store[bolt] path[" + path + "]: "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, data) {
				t.Errorf("the refused file changed (%d bytes, was %d)", len(after), len(data))
			}
		})
	}

	// An empty file and an empty bbolt database (no buckets) hold nothing to lose: adopted.
	for name, data := range map[string][]byte{
		"empty_file":          nil,
		"empty_bbolt":         withBolt(t, func(*bbolt.Tx) error { return nil }),
		"valid_stategate_one": valid(t),
	} {
		path := filepath.Join(t.TempDir(), name+".db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := NewBolt(path, Options{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		mustCAS(t, b, "s", "new", nil, []byte("v"), true)
		b.Close()
	}
}

// helperEnv names what the test binary does when re-executed by helperProcess.
const helperEnv = "STATEGATE_BOLT_HELPER"

// helperProcess returns the command that re-runs this test binary as a helper doing
// mode on the store at path (see TestBoltHelperProcess).
func helperProcess(t testing.TB, mode, path string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBoltHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode+":"+path)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestBoltHelperProcess is not a test: helperProcess runs it in a child process.
//
//   - "open:PATH" opens the store and prints "open: <error>" or "open: ok".
//   - "cas:PATH" counts keys c0..c3 up from their stored values, one goroutine per key,
//     printing "KEY N" once the CompareAndSwap to N returned true, until killed.
func TestBoltHelperProcess(t *testing.T) {
	mode, path, ok := strings.Cut(os.Getenv(helperEnv), ":")
	if !ok {
		t.Skip("a helper process for other tests")
	}
	b, err := NewBolt(path, Options{})
	if mode == "open" {
		if err != nil {
			fmt.Printf("open: %v\n", err)
		} else {
			fmt.Println("open: ok")
			b.Close()
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var out sync.Mutex
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Minute) // never outlive a parent that forgot to kill
	for i := range 4 {
		wg.Go(func() {
			key := "c" + strconv.Itoa(i)
			for time.Now().Before(stop) {
				old, err := b.Get(ctx, key)
				if err != nil {
					t.Error(err)
					return
				}
				n, _ := strconv.Atoi(string(old))
				next := []byte(strconv.Itoa(n + 1))
				ok, err := b.CompareAndSwap(ctx, "s", key, old, next)
				if err != nil || !ok {
					t.Errorf("CompareAndSwap(%s, %s) = %v, %v: the only writer conflicted", key, next, ok, err)
					return
				}
				out.Lock()
				fmt.Printf("%s %s\n", key, next) // one write(2) per line: whole or absent
				out.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestBolt_killedMidLoadLosesNothing kills a process writing the store (SIGKILL, at a
// random moment of its CompareAndSwap load) and checks that every acknowledged value is
// in the file: each key holds its last acknowledged value, or the one after it (committed,
// not yet printed). Three rounds on one file, each child resuming from what the last left.
func TestBolt_killedMidLoadLosesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stategate.db")
	acked := map[string]int{}
	for round := range 3 {
		cmd := helperProcess(t, "cas", path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 50 + rand.IntN(200)
		lines := 0
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			key, n, ok := strings.Cut(sc.Text(), " ")
			v, err := strconv.Atoi(n)
			if !ok || err != nil {
				continue // the test framework's own output
			}
			if v != acked[key]+1 {
				t.Fatalf("round %d: %s acknowledged %d after %d", round, key, v, acked[key])
			}
			acked[key] = v
			if lines++; lines == killAfter {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
		}
		err = cmd.Wait()
		if lines < killAfter {
			t.Fatalf("round %d: the child stopped after %d acknowledgements: %v", round, lines, err)
		}
		b, err := NewBolt(path, Options{})
		if err != nil {
			t.Fatalf("round %d: reopening after SIGKILL: %v", round, err)
		}
		for i := range 4 {
			key := "c" + strconv.Itoa(i)
			got, err := b.Get(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			v, _ := strconv.Atoi(string(got))
			if v != acked[key] && v != acked[key]+1 {
				t.Errorf("round %d: %s holds %q after SIGKILL; acknowledged: %d", round, key, got, acked[key])
			}
			acked[key] = v // the next child counts on from here
		}
		t.Logf("round %d: killed after %d acknowledged writes; values %v", round, lines, acked)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBolt_sweeperDeletesExpiredEntries(t *testing.T) {
	ctx := context.Background()
	c := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b := openBoltAt(t, filepath.Join(t.TempDir(), "stategate.db"), Options{IdleTTL: time.Minute}, c)
	// More than one sweep transaction's worth, in a few transactions (a CAS each is slow).
	const old = sweepBatch + 500
	err := b.db.Update(func(tx *bbolt.Tx) error {
		for i := range old {
			if err := b.cas(bucketsOf(tx), "s"+strconv.Itoa(i%3), "old"+strconv.Itoa(i), nil, []byte("v"), c.Now()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mustCAS(t, b, "s0", "shared", nil, []byte("v"), true)
	mustCAS(t, b, "s1", "shared", []byte("v"), []byte("w"), true)
	c.Advance(30 * time.Second)
	mustCAS(t, b, "s0", "young", nil, []byte("v"), true)
	c.Advance(30 * time.Second) // everything but "young" expired
	n, err := b.sweep()
	if err != nil || n != old+1 {
		t.Fatalf("sweep() = %d, %v, want %d", n, err, old+1)
	}
	if got, want := bucketLens(t, b), (map[string]int{"data": 1, "expiry": 1, "sessions": 1, "owners": 1}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the sweep, buckets hold %v entries, want %v (young's)", got, want)
	}
	mustGet(t, b, "young", []byte("v"))
	if n, err := b.sweep(); err != nil || n != 0 {
		t.Errorf("second sweep() = %d, %v, want 0", n, err)
	}

	// The goroutine sweeps on its own and stops with Close.
	c2 := &fakeClock{now: c.Now()}
	path := filepath.Join(t.TempDir(), "swept.db")
	b2, err := openBolt(path, Options{IdleTTL: time.Minute}, c2.Now, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	mustCAS(t, b2, "s", "k", nil, []byte("v"), true)
	c2.Advance(time.Minute)
	for deadline := time.Now().Add(5 * time.Second); bucketLens(t, b2)["data"] != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sweeper left an expired entry for 5s")
		}
	}
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b2.Forget(ctx, "s"); err == nil {
		t.Error("Forget after Close succeeded")
	}
	if _, err := b2.Lock(ctx, []string{"k"}, time.Second); err == nil {
		t.Error("Lock after Close succeeded")
	}
}

func TestBolt_readsRefreshAtMostOncePerSlack(t *testing.T) {
	c := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b := openBoltAt(t, filepath.Join(t.TempDir(), "stategate.db"), Options{IdleTTL: 100 * time.Second}, c)
	if b.slack != time.Second {
		t.Fatalf("slack = %v, want 1%% of the TTL", b.slack)
	}
	txid := func() int {
		var id int
		_ = b.db.View(func(tx *bbolt.Tx) error { id = tx.ID(); return nil })
		return id
	}
	mustCAS(t, b, "s", "k", nil, []byte("v"), true)
	written := txid()
	for range 9 {
		c.Advance(100 * time.Millisecond)
		mustGet(t, b, "k", []byte("v"))
	}
	if got := txid(); got != written {
		t.Errorf("reads within 1s of the write committed %d transactions", got-written)
	}
	c.Advance(100 * time.Millisecond) // 1s since the write
	mustGet(t, b, "k", []byte("v"))
	mustGet(t, b, "k", []byte("v"))
	if got := txid(); got != written+1 {
		t.Errorf("reads 1s after the write committed %d transactions, want 1", got-written)
	}
	c.Advance(100*time.Second - time.Millisecond) // the refresh at 1s holds it until 101s
	mustGet(t, b, "k", []byte("v"))
	c.Advance(100 * time.Second)
	mustGet(t, b, "k", nil)
}

// TestBolt_bytesPerEntry measures the file space a typical entry takes (the figure in
// Bolt's doc comment) and how long an open's full walk takes.
func TestBolt_bytesPerEntry(t *testing.T) {
	const n = 10000
	c := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "stategate.db")
	b := openBoltAt(t, path, Options{}, c)
	used := func() int64 {
		var size int64
		_ = b.db.View(func(tx *bbolt.Tx) error { size = tx.Size(); return nil })
		return size - int64(b.db.Stats().FreeAlloc)
	}
	before := used()
	value := bytes.Repeat([]byte("x"), 110)
	random := func(n int) string { // like a session id: keys arrive in no order
		const hex = "0123456789abcdef"
		b := make([]byte, n)
		for i := range b {
			b[i] = hex[rand.IntN(16)]
		}
		return string(b)
	}
	for start := 0; start < n; start += 1000 {
		err := b.db.Update(func(tx *bbolt.Tx) error {
			for range 1000 {
				session := random(36)                                      // a UUID's length
				key := "stategate/v1/checkout/session/alice/" + random(24) // 60 bytes
				c.Advance(time.Millisecond)
				if err := b.cas(bucketsOf(tx), session, key, nil, value, c.Now()); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	per := float64(used()-before) / n
	t.Logf("%.0f bytes of file per entry (60-byte key, 36-byte session, 110-byte value)", per)
	if per > 900 {
		t.Errorf("%.0f bytes per entry; Bolt's doc comment says about 745", per)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b = openBoltAt(t, path, Options{}, c)
	t.Logf("opening %d entries took %v", n, time.Since(start))
}
