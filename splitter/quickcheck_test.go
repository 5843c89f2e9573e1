package splitter

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestQuickCheckMissing: a DEST directory found missing spares the lstat of its files
// and of its subdirectories' files, for each of several directories walked at once,
// and never makes a path up to date.
func TestQuickCheckMissing(t *testing.T) {
	src, dest := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(src, "f"), &st); err != nil {
		t.Fatal(err)
	}
	q := &QuickCheck{Dest: dest}
	for i := range 8 {
		if q.upToDate(fmt.Sprintf("d%d/f", i), &st, filepath.Join(src, "f"), nil) {
			t.Fatal("a path under a missing directory is up to date")
		}
	}
	tests := []struct {
		dir  string
		want bool
	}{
		{"d0", true},
		{"d7", true},
		{"d3/sub/deeper", true},
		{"d30", false}, // a sibling whose name starts alike
		{"d8", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := q.isMissing(filepath.Join(dest, tt.dir)); got != tt.want {
			t.Errorf("isMissing(%q) = %v, want %v", tt.dir, got, tt.want)
		}
	}
	for i := range 16 {
		q.setMissing(filepath.Join(dest, fmt.Sprintf("other%d", i)))
	}
	if q.isMissing(filepath.Join(dest, "d0")) {
		t.Error("the ring should have forgotten d0 after 16 newer directories")
	}
}
