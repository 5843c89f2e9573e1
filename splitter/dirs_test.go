package splitter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dirsOf runs a Splitter with cfg over records and returns the touched directories as
// "ROOT:ENTRY" strings.
func dirsOf(t *testing.T, cfg Config, records ...string) []string {
	t.Helper()
	d := &Dirs{}
	cfg.Dirs, cfg.Sep, cfg.ChunkFiles = d, '\n', 100
	collect(t, cfg, strings.Join(records, "\n")+"\n")
	var out []string
	n := 0
	for _, l := range d.Lists() {
		for _, e := range l.Entries {
			out = append(out, l.Root+":"+string(e))
			n++
		}
	}
	if n != d.Len() {
		t.Errorf("Len %d, Lists hold %d", d.Len(), n)
	}
	return out
}

func TestDirs(t *testing.T) {
	src := t.TempDir()
	for _, d := range []string{"a/b/c", "x", "#h", "e"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a/b/c/f", "a/g", "top", "#h/f"} {
		if err := os.WriteFile(filepath.Join(src, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	abs := func(p string) string { return filepath.Join(src, p) }
	// the absolute paths without --root have "/" as root, whose top is left out
	srcEntry := strings.TrimPrefix(src, "/")
	var srcParents []string
	for p := srcEntry; ; p = filepath.Dir(p) {
		srcParents = append([]string{"/:" + p + "/"}, srcParents...)
		if !strings.Contains(p, "/") {
			break
		}
	}
	tests := []struct {
		name    string
		cfg     Config
		records []string
		want    []string
	}{
		{"parents up to the root", Config{Root: src}, []string{"a/b/c/f"},
			[]string{src + ":./", src + ":a/", src + ":a/b/", src + ":a/b/c/"}},
		{"a listed directory is touched itself", Config{Root: src}, []string{"x"},
			[]string{src + ":./", src + ":x/"}},
		{"a top-level file touches the root", Config{Root: src}, []string{"top"},
			[]string{src + ":./"}},
		{"the root listed", Config{Root: src}, []string{"."}, []string{src + ":./"}},
		{"a vanished path touches its parents", Config{Root: src}, []string{"a/gone/f"},
			[]string{src + ":./", src + ":a/", src + ":a/gone/"}},
		{"a comment-like name keeps its ./", Config{Root: src}, []string{"#h/f"},
			[]string{src + ":./#h/", src + ":./"}}, // sorted by name: "#" < "."
		{"relative to the working directory", Config{Cwd: src}, []string{"a/g", "e"},
			[]string{src + ":./", src + ":a/", src + ":e/"}},
		{"absolute without --root: not the top", Config{Cwd: "/"}, []string{abs("a/g")},
			append(srcParents, "/:"+srcEntry+"/a/")},
		{"absolute under --root", Config{Root: src}, []string{abs("a/g")},
			[]string{src + ":./", src + ":a/"}},
		{"hard links: the anchor is the root", Config{Cwd: src, HardLinks: true}, []string{"a/g"},
			[]string{src + ":./", src + ":a/"}},
		{"outside --root: nothing", Config{Root: filepath.Join(src, "a")}, []string{abs("x/y")}, nil},
		{"--sizes: a trailing slash is a directory", Config{Root: src, Sizes: true},
			[]string{"0\tx/", "4096\te", "3\ta/g"},
			[]string{src + ":./", src + ":a/", src + ":x/"}},
		{"remote source", Config{RemoteSrc: "host:/data", Root: "/data"}, []string{"p/q/r", "s/"},
			[]string{"host:/data:./", "host:/data:p/", "host:/data:p/q/", "host:/data:s/"}},
		{"another shard's path touches nothing", Config{Root: src, Shards: 2, Shard: 1 - Shard([]byte("a/g"), 2)},
			[]string{"a/g"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := dirsOf(t, tt.cfg, tt.records...)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("dirs\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestDirsNil(t *testing.T) {
	var d *Dirs
	if d.Len() != 0 || d.Lists() != nil {
		t.Error("a nil Dirs holds something")
	}
}
