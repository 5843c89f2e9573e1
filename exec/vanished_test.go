package exec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatGone: a local path rsync called vanished is gone only when lstat cannot find
// it (ENOENT, or ENOTDIR when a component turned into a file).
func TestStatGone(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "here"), nil, 0o644)
	os.Mkdir(filepath.Join(src, "d"), 0o755)
	os.WriteFile(filepath.Join(src, "d", "x"), nil, 0o644)
	os.Symlink("/nonexistent", filepath.Join(src, "dangling"))
	for _, c := range []struct {
		entry string
		gone  bool
	}{
		{"here", false},
		{"d/./x", false},
		{"dangling", false}, // lstat sees the link itself
		{"missing", true},
		{"d/missing", true},
		{"here/below", true}, // ENOTDIR
		{"d/./missing", true},
	} {
		g := statGone(src, []byte(c.entry))
		if g.Gone != c.gone {
			t.Errorf("%s: %+v, want gone %v", c.entry, g, c.gone)
		}
		if !g.Gone && !strings.Contains(g.Reason, "rsync called it vanished, but the source has it") {
			t.Errorf("%s: reason %q", c.entry, g.Reason)
		}
	}
}
