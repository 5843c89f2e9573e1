package tests

// Migrations (issue 12): the deletion pass (--delete) and the verification pass
// (--verify), proven by walking DEST.

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// migTree is a seeded random source tree, a path list drawn from it, and a DEST filled
// beforehand with some of the source and with entries only DEST has.
type migTree struct {
	src, dst string
	listed   []string            // the paths given to prsync, relative to src
	touched  map[string]bool     // the directories the list touches ("." is the root)
	extra    map[string]bool     // entries only DEST has, in a touched directory, with what is inside them
	stray    map[string]bool     // entries only DEST has, in an untouched directory
	before   map[string]string   // DEST before the run (snapshot form)
	kinds    map[string]string   // kind of each extra entry: file, dir, link
	srcSnap  map[string]string   // the source
	dirsOf   map[string][]string // source directory -> its subdirectories
}

// makeMigTree builds the tree for seed under a temp dir.
func makeMigTree(t *testing.T, seed uint64) *migTree {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 42))
	w := t.TempDir()
	m := &migTree{src: filepath.Join(w, "src"), dst: filepath.Join(w, "dst"), touched: map[string]bool{},
		extra: map[string]bool{}, stray: map[string]bool{}, kinds: map[string]string{}, dirsOf: map[string][]string{}}
	dirs := []string{"."}
	for i := 0; i < 14; i++ {
		parent := dirs[rng.IntN(len(dirs))]
		d := filepath.Join(parent, fmt.Sprintf("d%d", i))
		dirs = append(dirs, d)
		m.dirsOf[parent] = append(m.dirsOf[parent], d)
		if err := os.MkdirAll(filepath.Join(m.src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// cold directories: leaves no listed path touches
	var cold []string
	for i := 0; i < 3; i++ {
		d := filepath.Join(dirs[rng.IntN(len(dirs))], fmt.Sprintf("cold%d", i))
		writeFile(t, filepath.Join(m.src, d, "unlisted"), "never listed", 0o644)
		cold = append(cold, d)
	}
	var files []string
	for i := 0; i < 90; i++ {
		f := filepath.Join(dirs[rng.IntN(len(dirs))], fmt.Sprintf("f%d.db", i))
		writeFile(t, filepath.Join(m.src, f), strings.Repeat(string(rune('a'+i%26)), rng.IntN(3000)), 0o644)
		files = append(files, f)
	}
	for i := 0; i < 6; i++ {
		l := filepath.Join(dirs[rng.IntN(len(dirs))], fmt.Sprintf("l%d", i))
		if err := os.Symlink("f0.db", filepath.Join(m.src, l)); err != nil {
			t.Fatal(err)
		}
		files = append(files, l)
	}
	// the list: a filtered subset of the files, and a few directories
	touch := func(p string) {
		for p = filepath.Dir(p); ; p = filepath.Dir(p) {
			m.touched[p] = true
			if p == "." {
				return
			}
		}
	}
	for _, f := range files {
		if rng.IntN(10) < 6 {
			m.listed = append(m.listed, f)
			touch(f)
		}
	}
	for _, d := range dirs[1:] {
		if rng.IntN(10) < 2 {
			m.listed = append(m.listed, d)
			m.touched[d] = true
			touch(d)
		}
	}
	// a chain whose directories only a deep path touches
	writeFile(t, filepath.Join(m.src, "chain/c1/c2/leaf"), "deep", 0o644)
	m.listed = append(m.listed, "chain/c1/c2/leaf")
	touch("chain/c1/c2/leaf")
	rng.Shuffle(len(m.listed), func(i, j int) { m.listed[i], m.listed[j] = m.listed[j], m.listed[i] })

	// DEST: half the source's files (listed or not), then what only DEST has
	for _, f := range files {
		if rng.IntN(2) == 0 {
			copyEntry(t, filepath.Join(m.src, f), filepath.Join(m.dst, f))
		}
	}
	add := func(parent, rel, kind string) {
		p := filepath.Join(m.dst, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch kind {
		case "file":
			writeFile(t, p, "only in DEST "+rel, 0o644)
		case "link":
			if err := os.Symlink("nowhere", p); err != nil {
				t.Fatal(err)
			}
		case "dir":
			writeFile(t, filepath.Join(p, "inner"), "x", 0o644)
			writeFile(t, filepath.Join(p, "sub", "deep"), "y", 0o600)
		}
		names := []string{rel}
		if kind == "dir" {
			names = append(names, rel+"/inner", rel+"/sub", rel+"/sub/deep")
			m.kinds[rel+"/inner"], m.kinds[rel+"/sub"], m.kinds[rel+"/sub/deep"] = "file", "dir", "file"
		}
		m.kinds[rel] = kind
		for _, n := range names {
			if m.touched[parent] {
				m.extra[filepath.Clean(n)] = true
			} else {
				m.stray[filepath.Clean(n)] = true
			}
		}
	}
	for i, d := range cold {
		add(d, filepath.Join(d, fmt.Sprintf("cx%d", i)), "file")
		add(d, filepath.Join(d, fmt.Sprintf("cxd%d", i)), "dir")
	}
	for i, d := range dirs {
		if rng.IntN(10) < 7 {
			add(d, filepath.Join(d, fmt.Sprintf("x%d.tmp", i)), "file")
		}
		if rng.IntN(10) < 3 {
			add(d, filepath.Join(d, fmt.Sprintf("xd%d", i)), "dir")
		}
		if rng.IntN(10) < 2 {
			add(d, filepath.Join(d, fmt.Sprintf("xl%d", i)), "link")
		}
	}
	// a directory the source lost, below a touched one; extras up the chain
	add(".", "gone-dir", "dir")
	add("chain", "chain/cx", "file")
	add("chain/c1", "chain/c1/cxd", "dir")
	m.srcSnap = snapshot(t, m.src)
	m.before = snapshot(t, m.dst)
	return m
}

// copyEntry copies a file or symlink with its mode and mtime.
func copyEntry(t *testing.T, from, to string) {
	t.Helper()
	fi, err := os.Lstat(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		tgt, _ := os.Readlink(from)
		if err := os.Symlink(tgt, to); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(data), fi.Mode().Perm())
	if err := os.Chtimes(to, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// check walks DEST after a --delete run: what the source has and DEST held is still
// there, every listed path landed, no extra entry of a touched directory is left and
// every entry of an untouched one is.
func (m *migTree) check(t *testing.T) {
	t.Helper()
	after := snapshot(t, m.dst)
	for rel, v := range m.before {
		if sv, ok := m.srcSnap[rel]; ok {
			if _, still := after[rel]; !still {
				t.Errorf("deleted %q, which the source has", rel)
			} else if sv != "dir" && after[rel] != sv {
				t.Errorf("%q changed from what the source has: %s", rel, after[rel])
			}
			continue
		}
		_ = v
	}
	for _, rel := range m.listed {
		if after[rel] != m.srcSnap[rel] {
			t.Errorf("listed %q: DEST has %q, the source %q", rel, after[rel], m.srcSnap[rel])
		}
	}
	for rel := range m.extra {
		if _, ok := after[rel]; ok {
			t.Errorf("extra %q in a touched directory is still in DEST", rel)
		}
	}
	for rel := range m.stray {
		if _, ok := after[rel]; !ok {
			t.Errorf("%q in an untouched directory was deleted", rel)
		}
	}
}

// deletedSet returns the deleted events as path -> kind; a path deleted twice fails.
func deletedSet(t *testing.T, runs ...*Run) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range runs {
		for _, e := range r.OfType("deleted") {
			p, _ := e["path"].(string)
			if _, dup := out[p]; dup {
				t.Errorf("%q deleted twice", p)
			}
			out[p], _ = e["kind"].(string)
		}
	}
	return out
}

// checkDeletedEvents: the events name exactly the extra entries, each with its kind.
func (m *migTree) checkDeletedEvents(t *testing.T, got map[string]string) {
	t.Helper()
	for rel := range m.extra {
		if k, ok := got[rel]; !ok {
			t.Errorf("no deleted event for %q", rel)
		} else if k != m.kinds[rel] {
			t.Errorf("deleted %q: kind %q, want %q", rel, k, m.kinds[rel])
		}
	}
	for rel := range got {
		if !m.extra[rel] {
			t.Errorf("deleted event for %q, which is no extra entry of a touched directory", rel)
		}
	}
}

func (m *migTree) list() []byte { return nul(m.listed...) }

// TestDeleteNeverDeletesSource: seeded random trees, DEST holding extra files, extra
// directories and files the source has but the list omits; locally and into a daemon,
// as one run and as three shards at once. Each of the four cases takes its own seed of
// four, so that four different trees are tried without trying each tree four times.
func TestDeleteNeverDeletesSource(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	var n uint64
	for _, target := range []string{"local", "daemon"} {
		for _, shards := range []int{1, 3} {
			n++
			seed := n // the parallel case runs after the loop has moved on
			t.Run(fmt.Sprintf("seed %d %s %d shard(s)", seed, target, shards), func(t *testing.T) {
				if target == "daemon" {
					oncePerSuite(t)
				}
				t.Parallel() // each case its own trees and daemon
				m := makeMigTree(t, seed)
				if len(m.extra) == 0 || len(m.stray) == 0 {
					t.Fatalf("seed %d makes no extra (%d) or no stray (%d) entries", seed, len(m.extra), len(m.stray))
				}
				dest := m.dst
				if target == "daemon" {
					dest = startDaemon(t, m.dst).URL()
				}
				var ps []*proc
				for k := 0; k < shards; k++ {
					args := []string{"-0", "--root", m.src, "--delete", "-j", "3", "--chunk-files", "7"}
					if shards > 1 {
						args = append(args, "--shard", fmt.Sprintf("%d/%d", k, shards))
					}
					ps = append(ps, start(t, startOpts{in: m.list()}, append(args, dest)...))
				}
				var runs []*Run
				for _, p := range ps {
					r := p.wait(2 * time.Minute)
					r.Exit(t, 0)
					if s := r.Summary(t); s["delete_pass"] != "ran" {
						t.Errorf("delete_pass %v", s["delete_pass"])
					}
					runs = append(runs, r)
				}
				m.check(t)
				got := deletedSet(t, runs...)
				m.checkDeletedEvents(t, got)
				var n int64
				for _, r := range runs {
					n += num(r.Summary(t), "files_deleted")
				}
				if n != int64(len(got)) {
					t.Errorf("files_deleted %d, %d deleted events", n, len(got))
				}
			})
		}
	}
}

// TestDeleteRemovedFromSource: a file and a directory removed from the source between
// two runs are removed from DEST by the second, with deleted events.
func TestDeleteRemovedFromSource(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	for _, f := range []string{"a/keep", "a/gone-file", "a/gone-dir/one", "a/gone-dir/sub/two", "b/x"} {
		writeFile(t, filepath.Join(w.Src, f), f, 0o644)
	}
	list := func() []byte {
		var ps []string
		filepath.WalkDir(w.Src, func(p string, d os.DirEntry, err error) error {
			if err == nil && p != w.Src {
				ps = append(ps, p)
			}
			return nil
		})
		return nul(ps...)
	}
	runPrsync(t, "", list(), "-0", "--root", w.Src, "--delete", w.Dst).Exit(t, 0)
	sameTree(t, w.Src, w.Dst)
	if err := os.Remove(filepath.Join(w.Src, "a/gone-file")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(w.Src, "a/gone-dir")); err != nil {
		t.Fatal(err)
	}
	r := runPrsync(t, "", list(), "-0", "--root", w.Src, "--delete", w.Dst)
	r.Exit(t, 0)
	sameTree(t, w.Src, w.Dst)
	want := map[string]string{"a/gone-file": "file", "a/gone-dir": "dir", "a/gone-dir/one": "file",
		"a/gone-dir/sub": "dir", "a/gone-dir/sub/two": "file"}
	got := deletedSet(t, r)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("deleted events %v, want %v", got, want)
	}
	if s := r.Summary(t); num(s, "files_deleted") != 5 || s["delete_pass"] != "ran" || num(s, "delete_dirs") == 0 {
		t.Errorf("summary: files_deleted %v, delete_pass %v, delete_dirs %v", s["files_deleted"], s["delete_pass"], s["delete_dirs"])
	}
}

// blockedTree is a source and a DEST where one path cannot be copied (DEST has a
// non-empty directory where the source has a file) and one entry only DEST has.
func blockedTree(t *testing.T) (src, dst string, list []byte) {
	t.Helper()
	w := newWork(t)
	src, dst = w.Src, w.Dst
	writeFile(t, filepath.Join(src, "ok"), "ok", 0o644)
	writeFile(t, filepath.Join(src, "clash"), "a file", 0o644)
	writeFile(t, filepath.Join(dst, "clash", "inside"), "a directory in DEST", 0o644)
	writeFile(t, filepath.Join(dst, "extra"), "only in DEST", 0o644)
	return src, dst, nul("ok", "clash")
}

// TestDeleteBlocked: a failed path stops the deletion pass, --delete-after-errors runs
// it anyway, and an interrupted run never deletes.
func TestDeleteBlocked(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	t.Run("a failed path", func(t *testing.T) {
		t.Parallel()
		src, dst, list := blockedTree(t)
		r := runPrsync(t, "", list, "-0", "--root", src, "--delete", dst)
		r.Exit(t, 23)
		if _, err := os.Lstat(filepath.Join(dst, "extra")); err != nil {
			t.Errorf("the deletion pass ran after a failure: %v", err)
		}
		if s := r.Summary(t); s["delete_pass"] != "skipped: 1 path(s) failed" || num(s, "files_deleted") != 0 {
			t.Errorf("summary: delete_pass %q, files_deleted %v", s["delete_pass"], s["files_deleted"])
		}
		if !strings.Contains(r.Stderr, "prsync: warning: the deletion pass did not run: 1 path(s) failed") ||
			!strings.Contains(r.Stderr, "--delete-after-errors") {
			t.Errorf("stderr does not say why the pass did not run:\n%s", r.Stderr)
		}
		if len(r.OfType("deleted")) != 0 {
			t.Error("deleted events from a pass that did not run")
		}
	})
	t.Run("--delete-after-errors", func(t *testing.T) {
		t.Parallel()
		src, dst, list := blockedTree(t)
		r := runPrsync(t, "", list, "-0", "--root", src, "--delete", "--delete-after-errors", dst)
		r.Exit(t, 23)
		if _, err := os.Lstat(filepath.Join(dst, "extra")); !os.IsNotExist(err) {
			t.Errorf("extra not deleted: %v", err)
		}
		if _, err := os.Lstat(filepath.Join(dst, "clash", "inside")); err != nil {
			t.Errorf("the pass deleted what stands where the source has a file: %v", err)
		}
		if s := r.Summary(t); s["delete_pass"] != "ran" || num(s, "files_deleted") != 1 {
			t.Errorf("summary: delete_pass %q, files_deleted %v", s["delete_pass"], s["files_deleted"])
		}
	})
	t.Run("source directories gone", func(t *testing.T) {
		t.Parallel()
		// a chunk of the pass whose every directory is gone from the source
		w := newWork(t)
		src, dst := w.Src, w.Dst
		writeFile(t, filepath.Join(src, "keep"), "keep", 0o644)
		list := []string{"keep"}
		for i := 0; i < 40; i++ {
			writeFile(t, filepath.Join(dst, fmt.Sprintf("gone%02d", i), "x"), "x", 0o644)
			list = append(list, fmt.Sprintf("gone%02d/x", i))
		}
		r := runPrsync(t, "", nul(list...), "-0", "--root", src, "--delete", dst)
		r.Exit(t, 24)
		if s := r.Summary(t); s["delete_pass"] != "ran" || num(s, "files_deleted") != 80 {
			t.Errorf("delete_pass %q, files_deleted %v", s["delete_pass"], s["files_deleted"])
		}
		sameTree(t, src, dst)
	})
	t.Run("stdout closed", func(t *testing.T) {
		t.Parallel()
		src, dst, _ := blockedTree(t)
		if err := os.RemoveAll(filepath.Join(dst, "clash")); err != nil {
			t.Fatal(err)
		}
		r := start(t, startOpts{in: nul("ok", "clash"), wrap: []string{"bash", "-c", `"$0" "$@" | head -c 1 >/dev/null; exit ${PIPESTATUS[0]}`}},
			"-0", "--root", src, "--delete", dst).wait(time.Minute)
		if r.Code != 23 {
			t.Fatalf("exit %d, want 23 (the deletion asked for did not run)\n%s", r.Code, r.Stderr)
		}
		if _, err := os.Lstat(filepath.Join(dst, "extra")); err != nil {
			t.Errorf("deleted with no one to report it to: %v", err)
		}
		if !strings.Contains(r.Stderr, "the deletion pass did not run: stdout is closed") {
			t.Errorf("stderr:\n%s", r.Stderr)
		}
		for _, f := range []string{"ok", "clash"} {
			if !copied(src, dst, f) {
				t.Errorf("%s not copied", f)
			}
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		t.Parallel()
		w := newWork(t)
		src, dst := w.Src, w.Dst
		names := files(t, src, 12, 200_000)
		writeFile(t, filepath.Join(dst, "extra"), "only in DEST", 0o644)
		p := start(t, startOpts{in: nul(names...)}, "-0", "--root", src, "--delete",
			"--delete-after-errors", "-j", "2", "--chunk-files", "1", dst, "--", "--bwlimit=300")
		p.mustWaitFor("a chunk", 30*time.Second, is("chunk_start"))
		p.signal(syscall.SIGINT)
		r := p.wait(time.Minute)
		r.Exit(t, 20)
		if _, err := os.Lstat(filepath.Join(dst, "extra")); err != nil {
			t.Errorf("an interrupted run deleted: %v", err)
		}
		if s := r.Summary(t); s["delete_pass"] != "skipped: the run was interrupted" {
			t.Errorf("delete_pass %q", s["delete_pass"])
		}
	})
}

// TestDeleteDryRun: -n --delete deletes nothing and lists exactly what the real run
// deletes.
func TestDeleteDryRun(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	m := makeMigTree(t, 7)
	// DEST must hold the copy first, or the dry run cannot see into directories the copy
	// has yet to create; a migration's final pass is just that
	runPrsync(t, "", m.list(), "-0", "--root", m.src, m.dst).Exit(t, 0)
	m.before = snapshot(t, m.dst)
	dry := runPrsync(t, "", m.list(), "-0", "--root", m.src, "-n", "--delete", m.dst)
	dry.Exit(t, 0)
	if after := snapshot(t, m.dst); fmt.Sprint(after) != fmt.Sprint(m.before) {
		t.Fatal("-n --delete changed DEST")
	}
	for _, e := range dry.OfType("deleted") {
		if e["dry_run"] != true {
			t.Errorf("a dry run's deleted event without dry_run: %v", e)
		}
	}
	real := runPrsync(t, "", m.list(), "-0", "--root", m.src, "--delete", m.dst)
	real.Exit(t, 0)
	d, g := deletedSet(t, dry), deletedSet(t, real)
	if len(g) == 0 || fmt.Sprint(d) != fmt.Sprint(g) {
		t.Errorf("the dry run listed %v, the real run deleted %v", slices.Sorted(maps.Keys(d)), slices.Sorted(maps.Keys(g)))
	}
	m.check(t)
	if n := num(dry.Summary(t), "files_deleted"); n != int64(len(d)) {
		t.Errorf("dry run files_deleted %d, %d events", n, len(d))
	}
}

// flipByte changes one byte of a file and keeps its size and mtime, so that no quick
// check can see it.
func flipByte(t *testing.T, p string, at int64) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// TestVerify: one byte flipped in DEST with its size and mtime kept is missed by every
// quick check; --verify reports exactly that path failed and lists it, and a re-run of
// the list with -- --checksum repairs it. Locally and into a daemon.
func TestVerify(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	for _, target := range []string{"local", "daemon"} {
		t.Run(target, func(t *testing.T) {
			t.Parallel() // each target its own trees
			w := newWork(t)
			var names []string
			for i := 0; i < 40; i++ {
				n := fmt.Sprintf("d%d/f%02d.db", i%4, i)
				writeFile(t, filepath.Join(w.Src, n), strings.Repeat(fmt.Sprint(i), 500+i*37), 0o644)
				names = append(names, n)
			}
			dest := w.Dst
			if target == "daemon" {
				if err := os.Mkdir(w.Dst, 0o755); err != nil {
					t.Fatal(err)
				}
				dest = startDaemon(t, w.Dst).URL()
			}
			r := runPrsync(t, "", nul(names...), "-0", "--root", w.Src, "--verify", dest)
			r.Exit(t, 0)
			r.Counts(t, map[string]int64{"files_verified": 40, "files_verify_failed": 0})
			bad := "d2/f10.db"
			flipByte(t, filepath.Join(w.Dst, bad), 123)
			r = runPrsync(t, "", nul(names...), "-0", "--root", w.Src, "--verify", "--failed", w.Failed, dest)
			r.Exit(t, 23)
			r.Identity(t, 40)
			r.Counts(t, map[string]int64{"files_failed": 1, "files_verify_failed": 1, "files_verified": 39})
			r.PathFailed(t, map[string]string{bad: "failed"})
			if pf := r.OfType("path_failed"); !strings.HasPrefix(pf[0]["reason"].(string), "verify: content differs") {
				t.Errorf("path_failed %v, want %s with verify: content differs", pf, bad)
			}
			r.FailedAre(t, bad)
			if !strings.Contains(r.Stderr, "-- --checksum") {
				t.Errorf("no hint to copy again with --checksum:\n%s", r.Stderr)
			}
			// the plain re-run of the list does not repair it (the quick checks pass) ...
			list := nul(r.Failed(t)...)
			runPrsync(t, "", list, "-0", "--root", w.Src, dest).Exit(t, 0)
			if copied(w.Src, w.Dst, bad) {
				t.Fatal("a plain re-run repaired it: the test proves nothing")
			}
			// ... the list with --checksum does
			r = runPrsync(t, "", list, "-0", "--root", w.Src, "--verify", dest, "--", "--checksum")
			r.Exit(t, 0)
			r.Counts(t, map[string]int64{"files_transferred": 1})
			sameTree(t, w.Src, w.Dst)
		})
	}
}

// TestVerifyTransferred: --verify=transferred checks only what the run transferred.
func TestVerifyTransferred(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	for i := 0; i < 10; i++ {
		writeFile(t, filepath.Join(w.Src, fmt.Sprintf("f%d", i)), strings.Repeat("q", 1000), 0o644)
	}
	list := nul("f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9")
	runPrsync(t, "", nul("f0", "f1", "f2"), "-0", "--root", w.Src, w.Dst).Exit(t, 0)
	flipByte(t, filepath.Join(w.Dst, "f1"), 10) // up to date for every quick check
	r := runPrsync(t, "", list, "-0", "--root", w.Src, "--verify=transferred", w.Dst)
	r.Exit(t, 0)
	r.Counts(t, map[string]int64{"files_verified": 7, "files_transferred": 7})
	r = runPrsync(t, "", list, "-0", "--root", w.Src, "--verify", "all", w.Dst)
	r.Exit(t, 23)
	r.Counts(t, map[string]int64{"files_verified": 9})
}

// TestDeleteVerifyOddNames: names with newlines, a leading '-' and invalid UTF-8, among
// deleted and verified paths.
func TestDeleteVerifyOddNames(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	makeOddTree(t, w.Src)
	list, _ := listTree(t, w.Src)
	runPrsync(t, "", list, "-0", "--root", w.Src, w.Dst).Exit(t, 0)
	extras := []string{"new\nline.extra", "-rf", "--delete", "bad\xfe.extra", "nested/deeper/-x\ny\xff"}
	for _, e := range extras {
		writeFile(t, filepath.Join(w.Dst, e), "only in DEST", 0o644)
	}
	flipByte(t, filepath.Join(w.Dst, "new\nline"), 3)
	r := runPrsync(t, "", list, "-0", "--root", w.Src, "--delete", "--delete-after-errors", "--verify", "--failed", w.Failed, w.Dst)
	r.Exit(t, 23)
	absent(t, w.Dst, extras...) // deleted
	got := map[string]bool{}
	for _, e := range r.OfType("deleted") {
		got[eventPath(t, e)] = true
	}
	if len(got) != len(extras) {
		t.Errorf("%d deleted events, want %d: %v", len(got), len(extras), got)
	}
	for _, e := range extras {
		if !got[e] {
			t.Errorf("no deleted event for %q", e)
		}
	}
	r.FailedAre(t, filepath.Join(w.Src, "new\nline"))
	r = runPrsync(t, "", nul(r.Failed(t)...), "-0", "--root", w.Src, "--verify", w.Dst, "--", "--checksum")
	r.Exit(t, 0)
	sameTree(t, w.Src, w.Dst)
}

// TestDeleteDaemonRefuses: a daemon module that refuses --delete stops the run before
// anything is copied, with a clear error; a read-only one too.
func TestDeleteDaemonRefuses(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	oncePerSuite(t)
	needRsync(t)
	for _, tt := range []struct{ conf, msg, hint string }{
		{"refuse options = delete", "refuse --delete", "refuses --delete for this module"},
		{"read only = yes", "read only", "read only"},
	} {
		t.Run(tt.conf, func(t *testing.T) {
			t.Parallel() // each its own daemon
			w := newWork(t)
			writeFile(t, filepath.Join(w.Src, "f"), "f", 0o644)
			d := startDaemon(t, w.Dst, tt.conf)
			r := runPrsync(t, "", nul("f"), "-0", "--root", w.Src, "--delete", d.URL())
			if r.Code == 0 || r.Code == 23 || len(r.Events) != 0 {
				t.Fatalf("exit %d with %d events, want an early exit with rsync's code\n%s", r.Code, len(r.Events), r.Stderr)
			}
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
				// under PRSYNC_TEST_TRANSPORT=pipe, prsync says once that a daemon DEST runs direct
				if !strings.HasPrefix(l, "prsync: warning: --transport pipe cannot be used with a remote DEST") {
					lines = append(lines, l)
				}
			}
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "prsync: error: DEST cannot take the deletion pass: ") ||
				!strings.Contains(lines[0], tt.msg) || !strings.Contains(lines[1], tt.hint) {
				t.Errorf("stderr:\n%s", r.Stderr)
			}
			absent(t, w.Dst, "f") // not copied: the deletion pass cannot run
		})
	}
}

// TestDeleteSSH: the deletion and verification passes into a DEST over ssh, and from a
// source over ssh (pull), through the suite's private sshd on 127.0.0.1.
func TestDeleteSSH(t *testing.T) {
	oncePerSuite(t)
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	sshConfig, _ := startSSHD(t, "")
	for _, dir := range []string{"push", "pull"} {
		t.Run(dir, func(t *testing.T) {
			t.Parallel() // each its own trees, through the one sshd
			m := makeMigTree(t, 11)
			root, dest := m.src, "h0:"+m.dst
			if dir == "pull" {
				root, dest = "h0:"+m.src, m.dst
			}
			r := runPrsync(t, "", m.list(), "-0", "--root", root, "--delete", "--verify", dest, "--", "-e", "ssh -F "+sshConfig)
			r.Exit(t, 0)
			s := r.Summary(t)
			if s["delete_pass"] != "ran" || num(s, "files_verified") != int64(len(m.listed)) {
				t.Errorf("delete_pass %v, files_verified %v of %d", s["delete_pass"], s["files_verified"], len(m.listed))
			}
			m.check(t)
			m.checkDeletedEvents(t, deletedSet(t, r))
		})
	}
}
