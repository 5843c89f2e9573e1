package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/prsync/prsync/splitter"
)

// TestQuickCheckMatchesRsync: prsync's own up-to-date check decides exactly as rsync -a does,
// checked against rsync's --itemize-changes on a tree with every kind of change, in both
// transports (which must agree with each other too).
func TestQuickCheckMatchesRsync(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	old := time.Date(2024, 5, 6, 7, 8, 9, 500_000_000, time.UTC)
	names := []string{"same", "content-same-size", "bigger", "mtime", "subsecond", "perms", "setuid",
		"group", "owner", "file-to-link", "link-to-file", "missing", "dir-in-dst", "new\nline", "#hash"}
	for _, n := range names {
		writeFile(t, filepath.Join(w.Src, n), "data of "+n, 0o644)
		os.Chtimes(filepath.Join(w.Src, n), old, old)
	}
	for _, dn := range []string{"dir-same", "dir-mtime", "dir-perms"} {
		os.Mkdir(filepath.Join(w.Src, dn), 0o755)
		os.Chtimes(filepath.Join(w.Src, dn), old, old)
	}
	os.Symlink("same", filepath.Join(w.Src, "link-same"))
	os.Symlink("same", filepath.Join(w.Src, "link-retarget"))
	os.Symlink("same", filepath.Join(w.Src, "link-mtime"))
	os.Remove(filepath.Join(w.Src, "link-to-file"))
	os.Symlink("same", filepath.Join(w.Src, "link-to-file"))
	if out, err := exec.Command("rsync", "-a", w.Src+"/", w.Dst+"/").CombinedOutput(); err != nil {
		t.Fatalf("rsync: %v %s", err, out)
	}
	// now change the copies
	d := func(n string) string { return filepath.Join(w.Dst, n) }
	keep := func(n string) { os.Chtimes(d(n), old, old) }
	os.WriteFile(d("content-same-size"), []byte("DATA OF content-same-size"), 0o644) // rsync: up to date (same size and time)
	keep("content-same-size")
	os.WriteFile(d("bigger"), []byte("more data than before"), 0o644)
	keep("bigger")
	os.Chtimes(d("mtime"), old.Add(time.Hour), old.Add(time.Hour))
	sub := old.Add(300 * time.Millisecond) // same second: rsync does not care
	os.Chtimes(d("subsecond"), sub, sub)
	os.Chmod(d("perms"), 0o600)
	os.Chmod(d("setuid"), 0o4644)
	if isRoot() {
		os.Lchown(d("group"), 0, 65534)
		os.Lchown(d("owner"), 65534, 0)
	}
	os.Remove(d("file-to-link"))
	os.Symlink("elsewhere", d("file-to-link"))
	os.Remove(d("link-to-file"))
	writeFile(t, d("link-to-file"), "x", 0o644)
	os.Remove(d("link-retarget"))
	os.Symlink("other", d("link-retarget"))
	exec.Command("touch", "-h", "-d", "2019-01-01", d("link-mtime")).Run()
	os.Chtimes(d("dir-mtime"), old.Add(time.Minute), old.Add(time.Minute))
	os.Chmod(d("dir-perms"), 0o700)
	os.Remove(d("missing"))
	os.Remove(d("dir-in-dst"))
	os.Mkdir(d("dir-in-dst"), 0o755)

	ents, _ := os.ReadDir(w.Src)
	var list []byte
	var all []string
	for _, e := range ents {
		all = append(all, e.Name())
		list = append(append(list, w.Src+"/./"+e.Name()...), 0)
	}
	// rsync's own decision, in both of prsync's transports: push form (direct), and pull
	// form through prsync's pipe helper
	rsyncPath, _ := exec.LookPath("rsync")
	changed := func(form string) map[string]bool {
		args := []string{"-a", "--dry-run", "--from0", "--files-from=-", "--out-format=%i|%n", "/", w.Dst + "/"}
		if form == "pipe" {
			args = []string{"-a", "--dry-run", "-e", bin(t) + " --rsync-pipe-helper", "--rsync-path=" + rsyncPath, "-s",
				"--from0", "--files-from=-", "--out-format=%i|%n", "localhost:/", w.Dst + "/"}
		}
		cmd := exec.Command(rsyncPath, args...)
		cmd.Env = append(os.Environ(), "PRSYNC_PIPE_RSYNC="+rsyncPath)
		cmd.Stdin = bytes.NewReader(list)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("rsync -n (%s): %v", form, err)
		}
		m := map[string]bool{}
		for _, line := range bytes.Split(out, []byte("\n")) {
			if i := bytes.IndexByte(line, '|'); i > 0 {
				m[string(unescapeName(line[i+1:]))] = true
			}
		}
		return m
	}
	rsyncChanged, pulled := changed("direct"), changed("pipe")
	for n := range rsyncChanged {
		if !pulled[n] {
			t.Errorf("%q: changed in push form, not in pull form", n)
		}
	}
	for n := range pulled {
		if !rsyncChanged[n] {
			t.Errorf("%q: changed in pull form, not in push form", n)
		}
	}
	q := &splitter.QuickCheck{Dest: w.Dst, Owner: isRoot()}
	var mismatch []string
	for _, n := range all {
		if q.Fresh(filepath.Join(w.Src, n), n) == rsyncChanged[n] {
			mismatch = append(mismatch, n)
		}
	}
	sort.Strings(mismatch)
	if len(mismatch) > 0 {
		t.Errorf("quick check disagrees with rsync --itemize-changes on %q (rsync changed: %v)", mismatch, rsyncChanged)
	}
	if len(rsyncChanged) < 8 {
		t.Errorf("the tree should hold many changes; rsync saw %v", rsyncChanged)
	}
	if !rsyncChanged["dir-mtime"] || !rsyncChanged["dir-perms"] || rsyncChanged["dir-same"] {
		t.Errorf("directories: rsync changed %v", rsyncChanged)
	}
	if rsyncChanged["content-same-size"] || rsyncChanged["subsecond"] || rsyncChanged["same"] {
		t.Errorf("rsync semantics changed: %v", rsyncChanged)
	}
}

func unescapeName(b []byte) []byte {
	out := bytes.ReplaceAll(b, []byte(`\#012`), []byte("\n"))
	return bytes.TrimSuffix(out, []byte("/"))
}

// TestQuickCheckRun: a re-run with nothing changed starts no rsync at all; a changed file
// and options that change rsync's decision still go to rsync.
func TestQuickCheckRun(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	for _, n := range []string{"a", "b", "c"} {
		writeFile(t, filepath.Join(w.Src, n), n, 0o644)
	}
	list, _ := listTree(t, w.Src)
	runPrsync(t, w.Dir, list, "-0", "--root", w.Src, w.Dst).Exit(t, 0)
	r := runPrsync(t, w.Dir, list, "-0", "--root", w.Src, w.Dst) // the re-run
	r.Exit(t, 0)
	r.Counts(t, map[string]int64{"files_up_to_date": 3, "chunks": 0})
	if r.Start(t)["quick_check"] != true {
		t.Errorf("start event quick_check = %v", r.Start(t)["quick_check"])
	}
	if r.Start(t)["list_dest"] != false { // a local disk: nothing is listed ahead
		t.Errorf("start event list_dest = %v", r.Start(t)["list_dest"])
	}
	writeFile(t, filepath.Join(w.Src, "b"), "changed!", 0o644)
	r = runPrsync(t, w.Dir, list, "-0", "--root", w.Src, w.Dst) // one change
	r.Counts(t, map[string]int64{"files_transferred": 1, "files_up_to_date": 2, "chunks": 1})
	sameTree(t, w.Src, w.Dst)
	for _, args := range [][]string{{"--no-quick-check"}, {"--", "-c"}, {"--", "--size-only"}, {"--", "-H"}} {
		r = runPrsync(t, w.Dir, list, append([]string{"-0", "--root", w.Src, w.Dst}, args...)...)
		if r.Start(t)["quick_check"] != false || num(r.Summary(t), "chunks") != 1 {
			t.Errorf("%v: quick_check %v, summary %v", args, r.Start(t)["quick_check"], r.Summary(t))
		}
		r.Identity(t, 3)
	}
}
