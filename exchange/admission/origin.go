package admission

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// OriginPolicy guards against DNS rebinding, as the MCP specification asks servers to: the
// gateway stands where the server would, and it rewrites Host for the upstream, so the
// upstream's own check cannot see the client's.
//
// # Notes
//
//   - An Origin header, when present, must be one of AllowedOrigins, or, when that list is
//     empty, an origin on a loopback host (http://localhost:3000, http://127.0.0.1, ...).
//   - On a loopback listener (or whenever AllowedHosts is set) the Host must be one of
//     AllowedHosts or a loopback name, with any port; a rebinding domain that resolves to
//     127.0.0.1 still sends its own name in Host and is refused.
type OriginPolicy struct {
	AllowedOrigins []string // exact origins (scheme://host[:port]); "*" allows any
	AllowedHosts   []string // host names (without port) the listener answers to
	Loopback       bool     // the listener is on a loopback address
}

// Check returns an error (answer 403, reach nothing) when origin or host is not allowed.
func (p OriginPolicy) Check(origin, host string) error {
	if origin != "" && !p.originAllowed(origin) {
		return errors.New("origin " + origin + " is not allowed (see --allowed-origins)")
	}
	if (p.Loopback || len(p.AllowedHosts) > 0) && !p.hostAllowed(host) {
		return errors.New("host " + host + " is not allowed (see --allowed-hosts)")
	}
	return nil
}

func (p OriginPolicy) originAllowed(origin string) bool {
	for _, o := range p.AllowedOrigins {
		if o == "*" || strings.EqualFold(o, origin) {
			return true
		}
	}
	if len(p.AllowedOrigins) > 0 {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && isLoopbackName(u.Hostname())
}

func (p OriginPolicy) hostAllowed(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	for _, h := range p.AllowedHosts {
		if strings.EqualFold(h, name) {
			return true
		}
	}
	return isLoopbackName(name)
}

func isLoopbackName(name string) bool {
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}
