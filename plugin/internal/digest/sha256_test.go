package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"testing"
)

// TestSum256 compares with crypto/sha256 on every length from 0 to 300 bytes (every
// padding case: one block, two blocks, lengths around 55/56/64) and on random inputs.
func TestSum256(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	check := func(p []byte) {
		if got, want := Sum256(p), sha256.Sum256(p); got != want {
			t.Fatalf("Sum256(%d bytes) = %x, want %x", len(p), got, want)
		}
		if got, want := Hex(p), hex.EncodeToString(func() []byte { s := sha256.Sum256(p); return s[:] }()); got != want {
			t.Fatalf("Hex(%d bytes) = %s, want %s", len(p), got, want)
		}
	}
	for n := 0; n <= 300; n++ {
		check(buf[:n])
	}
	for range 200 {
		check(buf[:r.IntN(len(buf))])
	}
	if got := Hex([]byte("abc")); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("Hex(abc) = %s (FIPS 180-4 example)", got)
	}
}

func FuzzSum256(f *testing.F) {
	f.Add([]byte("abc"))
	f.Fuzz(func(t *testing.T, p []byte) {
		if Sum256(p) != sha256.Sum256(p) {
			t.Fatalf("differs from crypto/sha256 on %x", p)
		}
	})
}
