package serve

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestGatewayName(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		name, flag, listen, want, err string
	}{
		{name: "from_listen", listen: "127.0.0.1:8080", want: "127.0.0.1-8080"},
		{name: "every_interface", listen: ":8080", want: "all-8080"},
		{name: "ipv6_sanitized", listen: "[::1]:8080", want: "--1-8080"},
		{name: "port_0_adds_the_pid", listen: "127.0.0.1:0", want: "127.0.0.1-0-" + pid},
		{name: "given", flag: "shop", listen: "127.0.0.1:8080", want: "shop"},
		{name: "given_unsafe", flag: "../x", err: "--name"},
		{name: "given_dot_first", flag: ".x", err: "--name"},
		{name: "bad_listen", listen: "8080", err: "--listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GatewayName(tc.flag, tc.listen)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("GatewayName(%q, %q) = %q, %v; want an error about %s", tc.flag, tc.listen, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("GatewayName(%q, %q) = %q, %v; want %q", tc.flag, tc.listen, got, err, tc.want)
			}
		})
	}
}

// TestRecord_findGateway: a published record is found by name, or as the only one
// running; one of a process that is gone is not; unpublishing removes the record and the
// token file it names.
func TestRecord_findGateway(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir, err := StateDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FindGateway(""); err == nil || !strings.Contains(err.Error(), "no running gateway") {
		t.Fatalf("none running: %v", err)
	}
	tok, tokenFile, err := writeToken(dir, "a")
	if err != nil || len(tok) != 64 {
		t.Fatalf("writeToken: %q %v", tok, err)
	}
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	unpublish, err := Record{Name: "a", PID: os.Getpid(), Admin: "http://127.0.0.1:1", TokenFile: tokenFile}.publish(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (Record{Name: "gone", PID: 1 << 30, Admin: "http://127.0.0.1:2"}).publish(dir); err != nil {
		t.Fatal(err)
	}
	if r, err := FindGateway(""); err != nil || r.Name != "a" || r.TokenFile != tokenFile {
		t.Fatalf("the only one running: %+v %v", r, err)
	}
	if _, err := FindGateway("gone"); err == nil || !strings.Contains(err.Error(), `no running gateway named "gone"`) {
		t.Fatalf("a record of a process that is gone: %v", err)
	}
	unpublish()
	for _, p := range []string{tokenFile, filepath.Join(dir, "a.admin.json")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s left behind: %v", p, err)
		}
	}
}
