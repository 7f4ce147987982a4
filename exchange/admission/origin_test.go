package admission

import "testing"

func TestOriginPolicy(t *testing.T) {
	loop := OriginPolicy{Loopback: true}
	for _, tc := range []struct {
		name         string
		p            OriginPolicy
		origin, host string
		ok           bool
	}{
		{"no origin, loopback host", loop, "", "127.0.0.1:8080", true},
		{"localhost origin", loop, "http://localhost:6274", "localhost:8080", true},
		{"ipv6 loopback host", loop, "", "[::1]:8080", true},
		{"rebinding host", loop, "", "evil.example:8080", false},
		{"foreign origin", loop, "http://evil.example", "127.0.0.1:8080", false},
		{"null origin", loop, "null", "127.0.0.1:8080", false},
		{"allowed origin", OriginPolicy{Loopback: true, AllowedOrigins: []string{"https://app.example"}}, "https://app.example", "127.0.0.1", true},
		{"loopback origin not in an explicit list", OriginPolicy{AllowedOrigins: []string{"https://app.example"}}, "http://localhost", "mcp.example", false},
		{"any origin", OriginPolicy{AllowedOrigins: []string{"*"}}, "http://evil.example", "mcp.example", true},
		{"public listener, any host", OriginPolicy{}, "", "mcp.example", true},
		{"allowed host", OriginPolicy{AllowedHosts: []string{"mcp.example"}}, "", "mcp.example:443", true},
		{"host outside the allowed list", OriginPolicy{AllowedHosts: []string{"mcp.example"}}, "", "other.example", false},
	} {
		if err := tc.p.Check(tc.origin, tc.host); (err == nil) != tc.ok {
			t.Errorf("%s: Check(%q, %q) = %v, want ok=%v", tc.name, tc.origin, tc.host, err, tc.ok)
		}
	}
}
