package rsync

import (
	"fmt"
	"testing"
)

// BenchmarkAttributor: one chunk of 2,000 paths, each logged once, as a fresh copy logs them.
func BenchmarkAttributor(b *testing.B) {
	entries := make([][]byte, 2000)
	lines := make([][]byte, 2000)
	for i := range entries {
		entries[i] = []byte(fmt.Sprintf("keyspace_%02d/table_%02d-0123456789abcdef0123456789abcdef/nb-%d-big-Data.db", i%10, i%30, i))
		lines[i] = []byte(fmt.Sprintf(">f+++++++++|%d|%d|%s", 1000+i, 1043+i, entries[i]))
	}
	b.ReportAllocs()
	for b.Loop() {
		a := NewAttributor(entries, "/src/", "/dst/", "/dst")
		for _, l := range lines {
			a.Stdout(l)
		}
		Settle(a.Result(), 0, false, false).Fold(nil)
	}
}
