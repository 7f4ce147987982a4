package main

import "testing"

// TestDefaultPublicURL: -listen implies the public URL only when it names one address a
// client can be given: never a wildcard host (http://0.0.0.0:8080 or http://:8080 in the
// documents would send clients nowhere) nor port 0.
func TestDefaultPublicURL(t *testing.T) {
	for _, tc := range []struct{ name, listen, want string }{
		{"loopback", "127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"a name", "gw.internal:8080", "http://gw.internal:8080"},
		{"ipv6 loopback", "[::1]:8080", "http://[::1]:8080"},
		{"an interface", "10.0.0.5:8080", "http://10.0.0.5:8080"},
		{"every ipv4 interface", "0.0.0.0:8080", ""},
		{"every interface", ":8080", ""},
		{"every ipv6 interface", "[::]:8080", ""},
		{"every ipv6 interface, long form", "[0:0:0:0:0:0:0:0]:8080", ""},
		{"port 0", "127.0.0.1:0", ""},
		{"no port", "127.0.0.1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := defaultPublicURL(tc.listen); got != tc.want {
				t.Errorf("defaultPublicURL(%q) = %q; want %q", tc.listen, got, tc.want)
			}
		})
	}
}
