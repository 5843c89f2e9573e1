package exec

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// TestLanded: the lstat confirmation finds a path in DEST only where rsync put it: not
// through a symlink below DEST where the source has a directory (rsync replaces it),
// unless -K makes rsync go through it (one that stays in DEST; with --insecure-links any
// one); a DEST whose own path is a symlink is looked into.
func TestLanded(t *testing.T) {
	w := t.TempDir()
	src, dest := filepath.Join(w, "src"), filepath.Join(w, "dest")
	stamp := time.Unix(1_700_000_000, 0)
	for _, d := range []string{"src/t", "dest/x/real", "dest/in", "elsewhere"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"src/t/a", "dest/x/real/a", "dest/in/a", "elsewhere/a"} {
		if err := os.WriteFile(filepath.Join(w, f), []byte("same"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(w, f), stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(filepath.Join(w, "elsewhere"), filepath.Join(dest, "x/out")) // leads out of DEST
	os.Symlink("../in", filepath.Join(dest, "x/rel"))                       // stays in DEST
	os.Symlink("in/a", filepath.Join(dest, "x/file"))
	os.Symlink(dest, filepath.Join(w, "destlink"))
	tests := []struct {
		args []string
		src  string // below src
		dst  string // below DEST
		want string // "" when landed, else a part of the reason
		// inTree: landed through a symlink that stays in DEST, which only openat2 (Linux)
		// goes through
		inTree bool
	}{
		{nil, "t/a", "x/real/a", "", false},
		{nil, "t/a", "x/out/a", "not in DEST: DEST holds a symlink at x/out where the path needs a directory", false},
		{nil, "t/a", "x/rel/a", "DEST holds a symlink at x/rel ", false},
		{nil, "t/a", "x/file/a", "DEST holds a symlink at x/file ", false},
		{nil, "t/a", "x/real/a/b", "DEST holds a file at x/real/a ", false},
		{nil, "t/a", "x/nothere/a", "not in DEST", false},
		{nil, "t", "x/real", "", false},
		{nil, "t", "x/rel", "another type", false},
		{nil, "t", ".", "", false},
		{[]string{"--archive", "-K"}, "t/a", "x/rel/a", "", true},
		{[]string{"--archive", "-K"}, "t/a", "x/out/a", "DEST holds a symlink at x/out ", false}, // rsync 3.5.0 does not go out of DEST
		{[]string{"-aK"}, "t", "x/rel", "", true},                                                // a kept symlink to a directory
		{[]string{"-aK"}, "t", "x/out", "another type", false},
		{[]string{"-K", "--insecure-links"}, "t/a", "x/out/a", "", false},
		{[]string{"-K", "--insecure-links"}, "t", "x/out", "", false},
		{[]string{"-e", "-K"}, "t/a", "x/rel/a", "DEST holds a symlink at x/rel ", false},
	}
	for _, d := range []string{dest, filepath.Join(w, "destlink")} {
		for _, tt := range tests {
			if tt.inTree && runtime.GOOS != "linux" {
				continue // without openat2, -K's look goes through no symlink
			}
			p := &Pool{Dest: d, Args: tt.args}
			p.init()
			root := p.openDest()
			v := root.landedAt(filepath.Join(src, tt.src), tt.dst, rsync.PathState{})
			root.close()
			switch {
			case tt.want == "" && !v.Landed:
				t.Errorf("DEST %s, %v: %s not landed: %s", d, tt.args, tt.dst, v.Reason)
			case tt.want != "" && (v.Landed || !strings.Contains(v.Reason+" ", tt.want)):
				t.Errorf("DEST %s, %v: %s: landed %v, %q, want %q", d, tt.args, tt.dst, v.Landed, v.Reason, tt.want)
			}
		}
	}
	p := &Pool{Dest: filepath.Join(w, "nothere")}
	p.init()
	root := p.openDest()
	defer root.close()
	if v := root.landedAt(filepath.Join(src, "t/a"), "x/real/a", rsync.PathState{}); v.Landed || v.Reason != "not in DEST" {
		t.Errorf("a DEST that is missing: %+v", v)
	}
}

// TestKindsLocal: the deletion pass types what it deletes from a local DEST by lstat,
// through no symlink below DEST that rsync does not go through.
func TestKindsLocal(t *testing.T) {
	w := t.TempDir()
	dest := filepath.Join(w, "dest")
	for _, d := range []string{"dest/x/real/d", "elsewhere/d"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"dest/x/real/g", "elsewhere/g"} {
		if err := os.WriteFile(filepath.Join(w, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(filepath.Join(w, "elsewhere"), filepath.Join(dest, "x/t"))
	items := []rsync.Item{{Name: []byte("x/real/g")}, {Name: []byte("x/real/d"), Dir: true}, {Name: []byte("x/t")}, {Name: []byte("x/t/g")}, {Name: []byte("x/t/d"), Dir: true}}
	want := map[string]string{"x/real/g": "file", "x/real/d": "dir", "x/t": "link"}
	for _, args := range [][]string{nil, {"-K", "--insecure-links"}} {
		p := &Pool{Dest: dest, Args: args}
		p.init()
		got := p.kinds(context.Background(), 1, items)
		if args != nil {
			want["x/t/g"], want["x/t/d"] = "file", "dir"
		}
		if !maps.Equal(got, want) {
			t.Errorf("%v: kinds %v, want %v", args, got, want)
		}
	}
}

// TestSweepTempBeneath: the temp files of killed rsyncs are swept beside where their
// paths land, and not beyond a symlink below DEST that rsync does not go through.
func TestSweepTempBeneath(t *testing.T) {
	w := t.TempDir()
	dest := filepath.Join(w, "dest")
	for _, d := range []string{"dest/x/real", "elsewhere"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	temps := []string{"dest/.top.Ab12Cd", "dest/x/real/.a.Ab12Cd", "elsewhere/.a.Ab12Cd", "elsewhere/.b.Xy34Zw"}
	for _, f := range temps {
		if err := os.WriteFile(filepath.Join(w, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(filepath.Join(w, "elsewhere"), filepath.Join(dest, "x/t"))
	entries := [][]byte{[]byte("top"), []byte("x/real/a"), []byte("x/t/a"), []byte("x/t/b")}
	for _, tt := range []struct {
		args []string
		gone []string
	}{
		{nil, temps[:2]},
		{[]string{"-K", "--insecure-links"}, temps[2:]}, // the first two are gone already
	} {
		p := &Pool{Dest: dest, Args: tt.args}
		p.init()
		p.killedChunks = []*splitter.Chunk{{ID: 1, Entries: entries, Inputs: entries}}
		if n := p.SweepTemp(); n != len(tt.gone) {
			t.Errorf("%v: swept %d, want %d", tt.args, n, len(tt.gone))
		}
		for _, f := range tt.gone {
			if _, err := os.Lstat(filepath.Join(w, f)); err == nil {
				t.Errorf("%v: %s is left", tt.args, f)
			}
		}
		if tt.args == nil {
			for _, f := range temps[2:] {
				if _, err := os.Lstat(filepath.Join(w, f)); err != nil {
					t.Errorf("%s, beyond DEST's symlink, was swept", f)
				}
			}
		}
	}
}

// TestLandedSourceGone: a path whose source is gone when it is confirmed (deleted after
// rsync copied it: a compaction, a log rotation) landed when DEST holds what rsync's own
// line listed for it; it vanished when DEST lacks it too; it failed, for its own reason,
// when DEST holds something else.
func TestLandedSourceGone(t *testing.T) {
	w := t.TempDir()
	dest := filepath.Join(w, "dest")
	stamp := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	writeAt := func(rel, data string) {
		p := filepath.Join(dest, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	writeAt("d/copied", "12345")
	writeAt("d/older", "12345")
	if err := os.Chtimes(filepath.Join(dest, "d/older"), stamp.Add(-time.Hour), stamp.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	writeAt("d/short", "123")
	if err := os.Mkdir(filepath.Join(dest, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	listed := stamp.Local().Format(rsync.MTimeLayout)
	file := func(size int64) rsync.PathState {
		return rsync.PathState{Logged: true, File: true, Change: ">f+++++++++", Size: size, MTime: listed}
	}
	tests := []struct {
		name   string
		dst    string
		ps     rsync.PathState
		landed bool
		gone   bool
		reason string
	}{
		{"copied, then deleted", "d/copied", file(5), true, false, ""},
		{"another mtime", "d/older", file(5), false, false, "DEST does not hold the file rsync listed (5 bytes, " + listed + ")"},
		{"cut short", "d/short", file(5), false, false, "DEST does not hold the file rsync listed"},
		{"a directory rsync made", "dir", rsync.PathState{Logged: true, Change: "cd+++++++++"}, true, false, ""},
		{"not logged, DEST has it", "d/copied", rsync.PathState{}, false, false, "rsync named no copy of it"},
		{"never copied", "d/none", rsync.PathState{}, false, true, "source gone before its copy"},
		{"logged, not in DEST", "d/none", file(5), false, true, "source gone before its copy"},
		{"a file where DEST has a directory", "dir", file(5), false, false, "DEST does not hold the file rsync listed"},
	}
	p := &Pool{Dest: dest}
	p.init()
	root := p.openDest()
	defer root.close()
	for _, tt := range tests {
		v := root.landedAt(filepath.Join(w, "src", "gone"), tt.dst, tt.ps)
		if v.Landed != tt.landed || v.Gone != tt.gone || !strings.Contains(v.Reason, tt.reason) {
			t.Errorf("%s: %+v, want landed %v, gone %v, reason with %q", tt.name, v, tt.landed, tt.gone, tt.reason)
		}
		if !v.Landed && !strings.Contains(v.Reason, filepath.Join(w, "src", "gone")) {
			t.Errorf("%s: reason %q does not name the path's own source", tt.name, v.Reason)
		}
	}
}
