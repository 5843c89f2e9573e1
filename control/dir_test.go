package control

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestRuntimeDir(t *testing.T) {
	uid := os.Getuid()
	name := "prsync-" + strconv.Itoa(uid)
	tests := []struct {
		name string
		// setup prepares the fake /tmp (base) and XDG_RUNTIME_DIR (xdg, "" for unset)
		setup   func(t *testing.T, base, xdg string) (xdgEnv string)
		want    string // relative to base, or "xdg/prsync"
		wantErr string
	}{
		{name: "fallback created",
			setup: func(t *testing.T, base, xdg string) string { return "" },
			want:  name},
		{name: "fallback exists",
			setup: func(t *testing.T, base, xdg string) string {
				must(t, os.Mkdir(filepath.Join(base, name), 0o700))
				return ""
			},
			want: name},
		{name: "xdg",
			setup: func(t *testing.T, base, xdg string) string { return xdg },
			want:  "xdg/prsync"},
		{name: "xdg open to others: fallback",
			setup: func(t *testing.T, base, xdg string) string { must(t, os.Chmod(xdg, 0o755)); return xdg },
			want:  name},
		{name: "xdg missing: fallback",
			setup: func(t *testing.T, base, xdg string) string { return filepath.Join(xdg, "gone") },
			want:  name},
		{name: "xdg relative: fallback",
			setup: func(t *testing.T, base, xdg string) string { return "run/user" },
			want:  name},
		{name: "xdg/prsync a symlink",
			setup: func(t *testing.T, base, xdg string) string {
				must(t, os.Mkdir(filepath.Join(base, "mine"), 0o700))
				must(t, os.Symlink(filepath.Join(base, "mine"), filepath.Join(xdg, "prsync")))
				return xdg
			},
			wantErr: "is a symlink"},
		{name: "a symlink to a private directory",
			setup: func(t *testing.T, base, xdg string) string {
				must(t, os.Mkdir(filepath.Join(base, "theirs"), 0o700))
				must(t, os.Symlink(filepath.Join(base, "theirs"), filepath.Join(base, name)))
				return ""
			},
			wantErr: "control directory BASE/" + name + " is a symlink: refusing to use it"},
		{name: "a dangling symlink",
			setup: func(t *testing.T, base, xdg string) string {
				must(t, os.Symlink(filepath.Join(base, "later"), filepath.Join(base, name)))
				return ""
			},
			wantErr: "is a symlink"},
		{name: "world-writable",
			setup: func(t *testing.T, base, xdg string) string {
				must(t, os.Mkdir(filepath.Join(base, name), 0o700))
				must(t, os.Chmod(filepath.Join(base, name), 0o777))
				return ""
			},
			wantErr: "control directory BASE/" + name + " has mode 0777: others may enter it"},
		{name: "sticky and world-writable",
			setup: func(t *testing.T, base, xdg string) string {
				must(t, os.Mkdir(filepath.Join(base, name), 0o700))
				must(t, os.Chmod(filepath.Join(base, name), 0o777|fs.ModeSticky))
				return ""
			},
			wantErr: "control directory BASE/" + name + " has mode 1777: others may enter it"},
		{name: "setgid and group-readable",
			setup: func(t *testing.T, base, xdg string) string {
				must(t, os.Mkdir(filepath.Join(base, name), 0o700))
				must(t, os.Chmod(filepath.Join(base, name), 0o750|fs.ModeSetgid))
				return ""
			},
			wantErr: "has mode 2750"},
		{name: "group-readable",
			setup: func(t *testing.T, base, xdg string) string {
				must(t, os.Mkdir(filepath.Join(base, name), 0o700))
				must(t, os.Chmod(filepath.Join(base, name), 0o750))
				return ""
			},
			wantErr: "has mode 0750"},
		{name: "a file",
			setup: func(t *testing.T, base, xdg string) string {
				must(t, os.WriteFile(filepath.Join(base, name), nil, 0o600))
				return ""
			},
			wantErr: "is not a directory"},
		{name: "another user's",
			setup: func(t *testing.T, base, xdg string) string {
				if uid != 0 {
					t.Skip("chown to another user needs root")
				}
				must(t, os.Mkdir(filepath.Join(base, name), 0o700))
				must(t, os.Chown(filepath.Join(base, name), 65534, 65534))
				return ""
			},
			wantErr: "belongs to uid 65534, not to uid 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, xdg := t.TempDir(), t.TempDir()
			must(t, os.Chmod(xdg, 0o700))
			env := tt.setup(t, base, xdg)
			before, _ := os.Lstat(filepath.Join(base, name))
			dir, err := runtimeDir(env, base, uid, true)
			if tt.wantErr != "" {
				want := strings.ReplaceAll(tt.wantErr, "BASE", base)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("runtimeDir = %s, %v: want the error %q", dir, err, want)
				}
				if hintOf(err) == "" {
					t.Errorf("error %q has no hint", err)
				}
				if after, _ := os.Lstat(filepath.Join(base, name)); before != nil && (after == nil || !os.SameFile(before, after) || after.Mode() != before.Mode()) {
					t.Errorf("runtimeDir changed %s", filepath.Join(base, name))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(base, tt.want)
			if tt.want == "xdg/prsync" {
				want = filepath.Join(xdg, "prsync")
			}
			if dir != want {
				t.Errorf("runtimeDir = %s, want %s", dir, want)
			}
			fi, err := os.Lstat(dir)
			if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: %v, %v: want a directory of mode 0700", dir, fi.Mode(), err)
			}
		})
	}
}

// The client looks without creating.
func TestRuntimeDirNoCreate(t *testing.T) {
	base := t.TempDir()
	dir, err := runtimeDir("", base, 1234, false)
	if !errors.Is(err, fs.ErrNotExist) || dir != filepath.Join(base, "prsync-1234") {
		t.Errorf("runtimeDir = %s, %v: want %s and not-exist", dir, err, filepath.Join(base, "prsync-1234"))
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Error("runtimeDir created the directory")
	}
}

func TestSocketPID(t *testing.T) {
	tests := []struct {
		name string
		pid  int
		ok   bool
	}{
		{"4242.sock", 4242, true},
		{"1.sock", 1, true},
		{"0.sock", 0, false},
		{"042.sock", 0, false},
		{".sock", 0, false},
		{"-1.sock", 0, false},
		{"12.sock.tmp", 0, false},
		{"abc.sock", 0, false},
		{"99999999999999999999.sock", 0, false},
	}
	for _, tt := range tests {
		if pid, ok := socketPID(tt.name); pid != tt.pid || ok != tt.ok {
			t.Errorf("socketPID(%q) = %d, %v; want %d, %v", tt.name, pid, ok, tt.pid, tt.ok)
		}
	}
	if got := SocketPath("/run/user/1000/prsync", 4242); got != "/run/user/1000/prsync/4242.sock" {
		t.Errorf("SocketPath = %s", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnixMode: the mode in messages is the one chmod takes, special bits included.
func TestUnixMode(t *testing.T) {
	for _, tt := range []struct {
		mode fs.FileMode
		want string
	}{
		{0o700, "0700"},
		{0o777, "0777"},
		{0o777 | fs.ModeSticky, "1777"},
		{0o750 | fs.ModeSetgid, "2750"},
		{0o755 | fs.ModeSetuid, "4755"},
		{0o777 | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky | fs.ModeDir, "7777"},
	} {
		if got := fmt.Sprintf("%04o", unixMode(tt.mode)); got != tt.want {
			t.Errorf("unixMode(%v) = %s, want %s", tt.mode, got, tt.want)
		}
	}
}

// LookupDir names the directory DefaultDir would make, and makes nothing.
func TestLookupDir(t *testing.T) {
	xdg := t.TempDir()
	if err := os.Chmod(xdg, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	dir, err := LookupDir()
	if want := filepath.Join(xdg, "prsync"); dir != want || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LookupDir() = %q, %v; want %q and a not-exist error", dir, err, want)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LookupDir created %s (%v)", dir, err)
	}
	if _, err := DefaultDir(); err != nil {
		t.Fatal(err)
	}
	if d, err := LookupDir(); d != dir || err != nil {
		t.Fatalf("LookupDir() = %q, %v after DefaultDir made it; want %q, nil", d, err, dir)
	}
}
