package cli

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prsync/prsync/internal/cmdline"
)

// checked returns a runner for args that has passed Validate and Open's checks.
func checked(t *testing.T, args ...string) *runner {
	t.Helper()
	if _, err := osexec.LookPath("rsync"); err != nil {
		t.Skip("rsync is not installed")
	}
	var f Flags
	parser, err := newParser(&f, io.Discard, io.Discard, cmdline.Exit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmdline.Parse(parser, args); err != nil {
		t.Fatal(err)
	}
	r := &runner{f: f, stdin: bytes.NewReader(nil), stdout: io.Discard, stderr: io.Discard, argv: args}
	if err := r.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	r.derive()
	if err := r.check(); err != nil {
		t.Fatalf("check: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// TestCreateUndo: when a step of create fails after the checks passed (the file system
// changed in between), what create made before it is removed: DEST and its parents, a
// --failed file it created; an old --failed list is left as it was, not emptied.
func TestCreateUndo(t *testing.T) {
	gone := func(t *testing.T, paths ...string) {
		t.Helper()
		for _, p := range paths {
			if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s is left: %v", p, err)
			}
		}
	}
	t.Run("--failed", func(t *testing.T) {
		dir := t.TempDir()
		dest, out := filepath.Join(dir, "new", "dest"), filepath.Join(dir, "out")
		os.Mkdir(out, 0o755)
		r := checked(t, "--no-control", "--failed", filepath.Join(out, "failed"), dest)
		os.Remove(out)
		if err := r.create(); err == nil || cmdline.Code(err, 0) != ExitUsage {
			t.Fatalf("create: %v, want a usage error", err)
		}
		gone(t, dest, filepath.Dir(dest))
	})
	t.Run("--metrics-file", func(t *testing.T) {
		dir := t.TempDir()
		dest, prom := filepath.Join(dir, "new", "dest"), filepath.Join(dir, "prom")
		failed, old := filepath.Join(dir, "failed"), filepath.Join(dir, "old")
		os.Mkdir(prom, 0o755)
		os.WriteFile(old, []byte("a\n"), 0o644)
		for _, fl := range []string{failed, old} {
			r := checked(t, "--no-control", "--failed", fl, "--metrics-file", filepath.Join(prom, "m.prom"), dest)
			os.Remove(prom)
			if err := r.create(); err == nil || cmdline.Code(err, 0) != ExitUsage {
				t.Fatalf("create: %v, want a usage error", err)
			}
			if r.failed != nil {
				t.Errorf("--failed left open")
			}
			os.Mkdir(prom, 0o755)
		}
		gone(t, dest, filepath.Dir(dest), failed, filepath.Join(prom, "m.prom"))
		if b, _ := os.ReadFile(old); string(b) != "a\n" {
			t.Errorf("the old --failed list is now %q", b)
		}
	})
	t.Run("--paths-log", func(t *testing.T) {
		dir := t.TempDir()
		dest, out, old := filepath.Join(dir, "new", "dest"), filepath.Join(dir, "out"), filepath.Join(dir, "old")
		os.Mkdir(out, 0o755)
		os.WriteFile(old, []byte("a\n"), 0o644)
		r := checked(t, "--no-control", "--failed", old, "--paths-log", filepath.Join(out, "paths.jsonl"), dest)
		os.Remove(out)
		if err := r.create(); err == nil || cmdline.Code(err, 0) != ExitUsage {
			t.Fatalf("create: %v, want a usage error", err)
		}
		if r.failed != nil || r.pathsLog != nil {
			t.Errorf("--failed or --paths-log left open")
		}
		gone(t, dest, filepath.Dir(dest))
		if b, _ := os.ReadFile(old); string(b) != "a\n" {
			t.Errorf("the old --failed list is now %q", b)
		}
	})
	t.Run("DEST", func(t *testing.T) {
		dir := t.TempDir()
		dest := filepath.Join(dir, "a", "b", "dest")
		r := checked(t, "--no-control", dest)
		os.WriteFile(filepath.Join(dir, "a"), nil, 0o644) // a file where a directory goes
		if err := r.create(); cmdline.Code(err, 0) != ExitDest {
			t.Fatalf("create: %v, want exit %d", err, ExitDest)
		}
	})
	t.Run("all made", func(t *testing.T) {
		dir := t.TempDir()
		dest, failed, prom := filepath.Join(dir, "x", "dest"), filepath.Join(dir, "failed"), filepath.Join(dir, "m.prom")
		paths := filepath.Join(dir, "paths.jsonl")
		os.WriteFile(paths, []byte("an old record\n"), 0o644)
		r := checked(t, "--no-control", "--failed", failed, "--metrics-file", prom, "--paths-log", paths, dest)
		if err := r.create(); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{dest, failed, prom, paths} {
			if _, err := os.Stat(p); err != nil {
				t.Error(err)
			}
		}
		if b, _ := os.ReadFile(paths); len(b) != 0 {
			t.Errorf("an old --paths-log was not emptied: %q", b)
		}
		r.failed.Close()
		r.pathsLog.Close()
	})
}

// TestMkdirAllable: for a directory that does not exist, the check says what os.MkdirAll
// would fail with, and creates nothing.
func TestMkdirAllable(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	os.WriteFile("file", nil, 0o644)
	os.Mkdir("d", 0o755)
	os.Symlink("d", "l")
	for _, p := range []string{"new/dest", "d/x/y/", "l/x", "l/../new", "file/x/y", "x/../y"} {
		err := mkdirAllable(p)
		if _, serr := os.Lstat(p); serr == nil {
			t.Errorf("mkdirAllable(%q) created it", p)
		}
		// the same error as MkdirAll, made in a copy of the tree
		copyDir := t.TempDir()
		os.WriteFile(filepath.Join(copyDir, "file"), nil, 0o644)
		os.Mkdir(filepath.Join(copyDir, "d"), 0o755)
		os.Symlink("d", filepath.Join(copyDir, "l"))
		t.Chdir(copyDir)
		real := os.MkdirAll(p, 0o755)
		t.Chdir(dir)
		if (err == nil) != (real == nil) || err != nil && err.Error() != real.Error() {
			t.Errorf("mkdirAllable(%q) = %v, MkdirAll says %v", p, err, real)
		}
	}
}

// TestWritable: the checks of --failed and --metrics-file say what opening or replacing
// the file would fail with, and create nothing.
func TestWritable(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	os.WriteFile("file", nil, 0o644)
	os.Mkdir("d", 0o755)
	os.Symlink("d/new", "dangling")
	if err := syscall.Mkfifo("fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path            string
		failed, metrics string // the errors; "" for none
	}{
		{"file", "", ""},
		{"new", "", ""},
		{"d/new", "", ""},
		{"dangling", "", ""},
		{"d", "open d: is a directory", "cannot replace it: is a directory"},
		{"nodir/f", "open nodir/f: no such file or directory", "cannot create a file in nodir: no such file or directory"},
		{"file/f", "open file/f: not a directory", "cannot create a file in file: not a directory"},
		{"fifo", "", "cannot replace it: not a regular file"},
	}
	for _, tt := range tests {
		errText := func(err error) string {
			if err == nil {
				return ""
			}
			return err.Error()
		}
		if got := errText(writable(tt.path)); got != tt.failed {
			t.Errorf("writable(%q) = %q, want %q", tt.path, got, tt.failed)
		}
		if got := errText(replaceable(tt.path)); got != tt.metrics {
			t.Errorf("replaceable(%q) = %q, want %q", tt.path, got, tt.metrics)
		}
	}
	for _, p := range []string{"new", "d/new"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created", p)
		}
	}
}

// The inside-DEST hint gives the find test that leaves DEST out, separated as the list is,
// and with DEST as find prints it.
func TestInsideDestHint(t *testing.T) {
	tests := []struct {
		name, cwd, root, dest string
		null                  bool
		want                  string
	}{
		{"below the working directory, -0", "/data", "", "/data/backup", true, "find . -path ./backup -prune -o -print0"},
		{"below the working directory, lines", "/data", "", "/data/backup", false, "find . -path ./backup -prune -o -print"},
		{"below --root", "/home/u", "/data", "/data/backup", false, "find /data -path /data/backup -prune -o -print"},
		{"elsewhere", "/home/u", "", "/data/backup", true, "find SRC -path /data/backup -prune -o -print0, SRC being the directory you listed, written absolute"},
		{"a name to quote", "/home/u", "", "/data/my backup", false, "find SRC -path '/data/my backup' -prune -o -print,"},
	}
	for _, tt := range tests {
		r := &runner{cwd: tt.cwd, root: tt.root, destPaths: []string{tt.dest}}
		r.f.Null = tt.null
		got := r.insideDestHint()
		if !strings.HasPrefix(got, "the list holds DEST ") || !strings.Contains(got, "; leave DEST out of the list: "+tt.want) {
			t.Errorf("%s: %q, want it to end with %q", tt.name, got, tt.want)
		}
		if !tt.null && strings.Contains(got, "-print0") {
			t.Errorf("%s: -print0 for a newline-separated list: %q", tt.name, got)
		}
	}
	if got := (&runner{}).insideDestHint(); got != "" {
		t.Errorf("no local DEST: %q", got)
	}
}
