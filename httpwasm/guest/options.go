package guest

import (
	"errors"
	"strconv"

	"github.com/tidwall/gjson"
)

// OptionsMember is the configuration document's member holding this build's own options.
// It is taken out before the engine reads the document (the engine refuses unknown
// members), so the rest is the stategate configuration document unchanged:
//
//	{"version": 1, ..., "httpWasm": {"stateDir": "/state", "maxBodyBytes": 16777216,
//	 "leaseWaitMs": 5000, "allowedOrigins": ["https://app.example"],
//	 "allowedHosts": ["mcp.example"], "loopback": false}}
const OptionsMember = "httpWasm"

// Options are the http-wasm build's own options; every member is optional.
type Options struct {
	// StateDir is the directory, as the guest sees it, where state is kept for every
	// guest instance (httpwasm/filestate). Traefik mounts it with settings.mounts. Without
	// it, state lives in one guest instance, and a configuration that needs state shared
	// between requests (workflows, tool health, a response cache) is refused at load.
	StateDir string
	// MaxBodyBytes caps a request body and a buffered answer (default 16 MiB).
	MaxBodyBytes int
	// LeaseWaitMs bounds how long a call waits for a lease another call holds (default 5000).
	LeaseWaitMs int
	// AllowedOrigins, AllowedHosts and Loopback are the Origin and Host check
	// (admission.OriginPolicy): browser origins allowed besides loopback ones, the only
	// Host names answered besides loopback ones, and whether loopback alone is answered.
	AllowedOrigins, AllowedHosts []string
	Loopback                     bool
	// PublicURL (the origin clients reach the MCP endpoint at) and Upstream (the MCP
	// server's URL as the host forwards to: its path is the endpoint) turn on OAuth
	// discovery routing and rewriting, as the exchange module's options of the same names
	// (oauth.Map); both are needed.
	PublicURL, Upstream string
}

// DefaultOptions are the options of a document without the member.
var DefaultOptions = Options{MaxBodyBytes: 16 << 20, LeaseWaitMs: 5000}

// ParseOptions reads the member (absent: DefaultOptions). Unknown members and values of
// the wrong type are errors: a typo never falls back to a default silently.
func ParseOptions(v gjson.Result) (Options, error) {
	o := DefaultOptions
	if !v.Exists() {
		return o, nil
	}
	if !v.IsObject() {
		return o, errors.New(OptionsMember + ": must be an object")
	}
	var err error
	v.ForEach(func(k, m gjson.Result) bool {
		name := OptionsMember + "." + k.String()
		switch k.String() {
		case "stateDir":
			if m.Type != gjson.String || m.Str == "" || m.Str[0] != '/' {
				err = errors.New(name + ": must be an absolute path inside the guest (a mounted directory)")
			}
			o.StateDir = m.Str
		case "maxBodyBytes":
			o.MaxBodyBytes, err = positive(name, m, 1<<30)
		case "leaseWaitMs":
			o.LeaseWaitMs, err = positive(name, m, 600000)
		case "allowedOrigins":
			o.AllowedOrigins, err = stringList(name, m)
		case "allowedHosts":
			o.AllowedHosts, err = stringList(name, m)
		case "loopback":
			switch {
			case m.Type == gjson.True || m.Type == gjson.String && m.Str == "true":
				o.Loopback = true
			case m.Type == gjson.False || m.Type == gjson.String && m.Str == "false":
			default:
				err = errors.New(name + ": must be true or false")
			}
		case "publicUrl", "upstream":
			if m.Type != gjson.String || m.Str == "" {
				err = errors.New(name + ": must be a URL")
			} else if k.String() == "publicUrl" {
				o.PublicURL = m.Str
			} else {
				o.Upstream = m.Str
			}
		default:
			err = errors.New(name + ": unknown field")
		}
		return err == nil
	})
	return o, err
}

// positive reads an integer from 1 to max: a JSON number, or a string of one (Traefik's
// file provider hands every option over as a string).
func positive(name string, v gjson.Result, max int64) (int, error) {
	raw := v.Raw
	if v.Type == gjson.String {
		raw = v.Str
	} else if v.Type != gjson.Number {
		raw = ""
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n <= 0 || n > max {
		return 0, errors.New(name + ": must be an integer from 1 to " + strconv.FormatInt(max, 10))
	}
	return int(n), nil
}

func stringList(name string, v gjson.Result) ([]string, error) {
	if !v.IsArray() {
		return nil, errors.New(name + ": must be an array of strings")
	}
	var out []string
	ok := true
	v.ForEach(func(_, s gjson.Result) bool {
		ok = s.Type == gjson.String
		out = append(out, s.Str)
		return ok
	})
	if !ok {
		return nil, errors.New(name + ": must be an array of strings")
	}
	return out, nil
}
