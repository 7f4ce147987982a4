package gateway

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAll: readAll reads what io.ReadAll of a LimitReader reads, whatever the size a
// body announced, in one buffer when the announcement is right.
func TestReadAll(t *testing.T) {
	body := strings.Repeat("0123456789", 300) // 3000 bytes
	for _, tc := range []struct {
		name        string
		size, limit int64
	}{
		{"announced", 3000, 1 << 20},
		{"unknown", -1, 1 << 20},
		{"none announced", 0, 1 << 20},
		{"announced short", 100, 1 << 20},
		{"announced long", 5000, 1 << 20},
		{"over the limit", 3000, 1001},
		{"over the limit, unknown", -1, 1001},
		{"at the limit", 3000, 3000},
		{"one past", 3000, 3001},
	} {
		for _, r := range []func() io.Reader{
			func() io.Reader { return strings.NewReader(body) },
			func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
			func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) },
		} {
			want, _ := io.ReadAll(io.LimitReader(r(), tc.limit))
			got, err := readAll(r(), tc.size, tc.limit)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: %d bytes, %v; want %d bytes", tc.name, len(got), err, len(want))
			}
		}
	}
	sr := strings.NewReader(body)
	if n := testing.AllocsPerRun(20, func() { sr.Reset(body); readAll(sr, 3000, 1<<20) }); n != 1 {
		t.Errorf("readAll of an announced body allocates %v times, want 1", n)
	}
	if _, err := readAll(iotest.ErrReader(io.ErrUnexpectedEOF), 10, 100); err != io.ErrUnexpectedEOF {
		t.Errorf("a failed read: %v, want io.ErrUnexpectedEOF", err)
	}
}

// An announced length is the peer's word: a body that announces 16 MiB and sends one byte
// gets a buffer of at most maxPresize, not 16 MiB held until the body timeout (a hundred
// such connections held 1.3 GB before).
func TestReadAll_announcedSizeIsNotTrusted(t *testing.T) {
	b, err := readAll(strings.NewReader("{"), 16<<20, 16<<20+1)
	if err != nil || string(b) != "{" {
		t.Fatalf("%q, %v", b, err)
	}
	if cap(b) > maxPresize {
		t.Errorf("a %d-byte body got a %d-byte buffer", len(b), cap(b))
	}
}
