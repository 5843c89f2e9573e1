package storage

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestDirs: a check looks at the base, the top-level directory each path lies in (with
// Tops), and the mount point below the base that each path lies under, each once.
func TestDirs(t *testing.T) {
	w := &Watch{base: "/d", real: "/real/d", tops: true, mounts: []string{"/real/d/a/m2", "/real/d/a", "/real/d/z"}}
	tests := []struct {
		paths []string
		want  []string
	}{
		{nil, []string{"/d"}},
		{[]string{"f", "g"}, []string{"/d"}},
		{[]string{"a/x", "a/y", "a/m2/deep/f"}, []string{"/d", "/d/a", "/real/d/a", "/real/d/a/m2"}},
		{[]string{"b/c/f", "z"}, []string{"/d", "/d/b"}},
		{[]string{"/d/b/c/f", "/d/a/q"}, []string{"/d", "/d/b", "/d/a", "/real/d/a"}},
		{[]string{"/elsewhere/f", "/real/d/z/f"}, []string{"/d", "/real/d/z"}},
		{[]string{"."}, []string{"/d"}},
	}
	for _, tt := range tests {
		var got []string
		for _, d := range w.dirs(tt.paths) {
			got = append(got, d.path)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("dirs(%q) = %q, want %q", tt.paths, got, tt.want)
		}
	}
	root := &Watch{base: "/", real: "/", mounts: []string{"/var/lib/cassandra", "/var"}}
	var got []string
	for _, d := range root.dirs([]string{"/var/lib/cassandra/data/x.db", "/var/log/y", "/etc/z"}) {
		got = append(got, d.path)
	}
	if want := []string{"/", "/var/lib/cassandra", "/var"}; !slices.Equal(got, want) {
		t.Errorf("a source at /: %q, want %q", got, want)
	}
}

// TestUnescape: mountinfo escapes a space, a tab, a newline and a backslash.
func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`/mnt/a\040b`: "/mnt/a b", `/x\134y`: `/x\y`, `/plain`: "/plain", `/end\04`: `/end\04`} {
		if got := unescape([]byte(in)); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLost: with real mounts (root): a bind mount at the base, or at a top-level directory
// below it, or a tmpfs deeper below it, unmounted lazily, is seen lost, and stays lost; a
// directory rsync replaces at the top level is not.
func TestLost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	for _, c := range []struct {
		name  string
		mount string // below the base; "" for the base itself
		tmpfs bool
		path  string // the path a check is given
	}{
		{name: "the base, a bind mount on the same filesystem", path: "f"},
		{name: "the base, a tmpfs", tmpfs: true, path: "f"},
		{name: "a top-level directory, a bind mount", mount: "top", path: "top/x/f"},
		{name: "a mount point deeper down, a tmpfs", mount: "a/b", tmpfs: true, path: "a/b/c/f"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := t.TempDir()
			base := filepath.Join(w, "dest")
			store := filepath.Join(w, "store")
			target := filepath.Join(base, c.mount)
			for _, d := range []string{store, target} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			args := []string{"--bind", store, target}
			if c.tmpfs {
				args = []string{"-t", "tmpfs", "-o", "size=1m", "tmpfs", target}
			}
			if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
				t.Skipf("mount: %v: %s", err, out)
			}
			mounted := true
			t.Cleanup(func() {
				if mounted {
					exec.Command("umount", "-l", target).Run()
				}
			})
			wt, err := New("DEST", base, Options{Tops: true, MountsNow: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := wt.Check([]string{c.path}); err != nil {
				t.Fatalf("before the unmount: %v", err)
			}
			// rsync replaces a top-level directory: the same storage
			if err := os.MkdirAll(filepath.Join(base, "other", "d"), 0o755); err != nil && c.mount != "" {
				t.Fatal(err)
			}
			if c.mount != "" {
				wt.Check([]string{"other/d/f"})
				os.RemoveAll(filepath.Join(base, "other"))
				os.MkdirAll(filepath.Join(base, "other", "d"), 0o755)
				if err := wt.Check([]string{"other/d/f"}); err != nil {
					t.Fatalf("a top-level directory made again: %v", err)
				}
			}
			if out, err := exec.Command("umount", "-l", target).CombinedOutput(); err != nil {
				t.Fatalf("umount: %v: %s", err, out)
			}
			mounted = false
			err = wt.Check([]string{c.path})
			var lost *LostError
			if !errors.As(err, &lost) || !strings.Contains(err.Error(), "DEST is no longer the storage it was at the start") {
				t.Fatalf("after a lazy unmount: %v", err)
			}
			if lost.Path != target && lost.Path != base {
				t.Errorf("lost %s, want %s", lost.Path, target)
			}
			if err := wt.Check(nil); err == nil {
				t.Errorf("a loss is forgotten by the next check")
			}
			t.Log(err)
		})
	}
}

// TestGone: a base that can no longer be looked at (removed, as a mount point a dead
// link leaves unreadable) is lost, with the error; a top-level directory not there yet is
// recorded when it first is.
func TestGone(t *testing.T) {
	base := filepath.Join(t.TempDir(), "dest")
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := New("DEST", base, Options{Tops: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Check([]string{"new/f"}); err != nil {
		t.Fatalf("a top-level directory not made yet: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(base, "new"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Check([]string{"new/f"}); err != nil {
		t.Fatalf("a top-level directory just made: %v", err)
	}
	if err := os.RemoveAll(base); err != nil {
		t.Fatal(err)
	}
	err = w.Check([]string{"new/f"})
	var lost *LostError
	if !errors.As(err, &lost) || lost.Err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("a base removed: %v", err)
	}
}

// TestMountPointOf: the mount point of a path is the topmost directory above it on its
// device (/proc for /proc/self/fdinfo here), and none for a device the path is not on; a
// watch of a directory on no FUSE filesystem has no FUSE mounts to count.
func TestMountPointOf(t *testing.T) {
	dev, ok := deviceOf("/proc/self/fdinfo")
	if !ok || runtime.GOOS != "linux" {
		t.Skip("no /proc")
	}
	if got := mountPointOf("/proc/self/fdinfo", dev); got != "/proc" {
		t.Errorf("mount point of /proc/self/fdinfo: %q, want /proc", got)
	}
	if got := mountPointOf("/proc/self/fdinfo", dev+1); got != "" {
		t.Errorf("mount point on another device: %q, want none", got)
	}
	w, err := New("DEST", t.TempDir(), Options{Tops: true, MountsNow: true})
	if err != nil {
		t.Fatal(err)
	}
	if m := w.FUSE(); len(m) != 0 {
		t.Errorf("FUSE mounts of a temporary directory: %v", m)
	}
}
