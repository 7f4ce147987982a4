package serve

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// A gateway started by `stategate serve` keeps what belongs to it in the user's state
// directory, one set of files per gateway name:
//
//	NAME.db           the default bolt store (an explicit --store wins)
//	NAME.admin.json   how to reach its admin listener (Record), while it runs
//	NAME.admin-token  the token it generated for that listener (mode 0600), while it runs
//
// The admin commands read the records to find a running gateway and its token with no
// flags.

// DefaultAdmin is serve's --admin default: loopback, a port of the system's choosing, and
// a generated token.
const DefaultAdmin = "127.0.0.1:0"

// stateDir is $XDG_STATE_HOME/stategate, else ~/.local/state/stategate.
func StateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "stategate"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", fmt.Errorf("no state directory: set XDG_STATE_HOME or HOME, or give --store and --admin explicitly")
	}
	return filepath.Join(home, ".local", "state", "stategate"), nil
}

// GatewayName is --name, else one derived from the listen address ("127.0.0.1-8080"); a
// port of 0 adds the process id, since such a gateway has no stable address.
func GatewayName(name, listen string) (string, error) {
	if name != "" {
		if !validName(name) {
			return "", fmt.Errorf("--name %q: use letters, digits, '.', '_' and '-' (at most 64)", name)
		}
		return name, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %w", listen, err)
	}
	if host == "" {
		host = "all"
	}
	n := host + "-" + port
	if port == "0" {
		n += "-" + strconv.Itoa(os.Getpid())
	}
	return sanitizeName(n), nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '.' {
		return false
	}
	return sanitizeName(s) == s
}

func sanitizeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	return string(b)
}

// Record is NAME.admin.json.
type Record struct {
	Name      string `json:"name"`
	PID       int    `json:"pid"`
	Admin     string `json:"admin"`               // http://ADDR of the admin listener
	Listen    string `json:"listen"`              // http://ADDR of the MCP listener
	TokenFile string `json:"tokenFile,omitempty"` // the generated token, when the gateway made one
	path      string
}

// writeToken generates an admin token and writes it to dir/NAME.admin-token, mode 0600.
func writeToken(dir, name string) (token, path string, err error) {
	var b [32]byte
	rand.Read(b[:])
	token = hex.EncodeToString(b[:])
	path = filepath.Join(dir, name+".admin-token")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("admin: state directory[%s]: %w", dir, err)
	}
	os.Remove(path) // a stale one (another owner, other mode) is replaced, not reused
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", "", fmt.Errorf("admin: token file[%s]: %w", path, err)
	}
	if _, err := f.WriteString(token + "\n"); err != nil {
		f.Close()
		return "", "", fmt.Errorf("admin: token file[%s]: %w", path, err)
	}
	return token, path, f.Close()
}

// publish writes the record (mode 0600) and returns a function that removes it and the
// token file it names.
func (r Record) publish(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory[%s]: %w", dir, err)
	}
	b, _ := json.Marshal(r)
	path := filepath.Join(dir, r.Name+".admin.json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return nil, fmt.Errorf("gateway record[%s]: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("gateway record[%s]: %w", path, err)
	}
	return func() {
		os.Remove(path)
		if r.TokenFile != "" {
			os.Remove(r.TokenFile)
		}
	}, nil
}

// RunningGateways reads the records in dir whose process is alive, by name.
func RunningGateways(dir string) []Record {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.admin.json"))
	var out []Record
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var r Record
		if json.Unmarshal(b, &r) != nil || r.Admin == "" || !alive(r.PID) {
			continue
		}
		r.path = p
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// alive reports whether process pid exists (signal 0 checks without sending one).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// FindGateway picks the running gateway the admin commands talk to: the one named, or the
// only one running.
func FindGateway(name string) (Record, error) {
	dir, err := StateDir()
	if err != nil {
		return Record{}, err
	}
	all := RunningGateways(dir)
	if name != "" {
		for _, r := range all {
			if r.Name == name {
				return r, nil
			}
		}
		return Record{}, fmt.Errorf("no running gateway named %q in %s%s", name, dir, names(all))
	}
	switch len(all) {
	case 0:
		return Record{}, fmt.Errorf("no running gateway found in %s: start one with `stategate serve`, or give --admin URL", dir)
	case 1:
		return all[0], nil
	}
	return Record{}, fmt.Errorf("%d gateways are running: pick one with --name%s", len(all), names(all))
}

func names(all []Record) string {
	if len(all) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(" (running:")
	for _, r := range all {
		fmt.Fprintf(&b, " %s at %s;", r.Name, r.Admin)
	}
	return strings.TrimSuffix(b.String(), ";") + ")"
}
