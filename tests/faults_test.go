package tests

// The fault matrix of issue 4: every row runs the prsync binary against a real rsync (the
// fake rsync only where a fault cannot be produced on demand) and asserts the exit code,
// the events, the exact --failed list, the accounting identity, and that no rsync or
// stopped process is left. Helpers private to this file are prefixed flt.

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ---------------------------------------------------------------- helpers

// fltIs returns a predicate for events of type typ whose fields equal kv (k1, v1, k2, v2 …).
func fltIs(typ string, kv ...any) func(map[string]any) bool {
	return func(e map[string]any) bool {
		if e["type"] != typ {
			return false
		}
		for i := 0; i+1 < len(kv); i += 2 {
			want := kv[i+1]
			if n, ok := want.(int); ok {
				want = float64(n)
			}
			if e[kv[i].(string)] != want {
				return false
			}
		}
		return true
	}
}

// fltExit checks the exit code, that the summary is last and carries the same code.
func fltExit(t testing.TB, r *Run, code int) map[string]any {
	t.Helper()
	if r.Code != code {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", r.Code, code, r.Stderr)
	}
	s := r.Summary(t)
	if got := num(s, "exit_code"); got != int64(r.Code) {
		t.Errorf("summary exit_code %d, process exit code %d", got, r.Code)
	}
	return s
}

// fltNums checks summary (or any event) fields.
func fltNums(t testing.TB, e map[string]any, want map[string]int64) {
	t.Helper()
	for k, v := range want {
		if got := num(e, k); got != v {
			t.Errorf("%s %s = %d, want %d (%v)", e["type"], k, got, v, e)
		}
	}
}

// fltPathFailed checks that the path_failed events are exactly want (path → status).
func fltPathFailed(t testing.TB, r *Run, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, e := range r.OfType("path_failed") {
		p := fmt.Sprint(e["path"])
		if _, dup := got[p]; dup {
			t.Errorf("path_failed twice for %q", fltShort(p))
		}
		got[p] = fmt.Sprint(e["status"])
	}
	for p, st := range want {
		if got[p] != st {
			t.Errorf("path_failed %q: status %q, want %q", fltShort(p), got[p], st)
		}
	}
	for p, st := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected path_failed %q (%s)", fltShort(p), st)
		}
	}
}

// fltList reads a --failed list: every entry is followed by sep.
func fltList(t testing.TB, path string, sep byte) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("--failed list: %v", err)
	}
	if len(b) == 0 {
		return nil
	}
	if b[len(b)-1] != sep {
		t.Errorf("--failed list does not end with the separator %q: %q", sep, fltShort(string(b)))
	}
	return strings.Split(strings.TrimSuffix(string(b), string(sep)), string(sep))
}

// fltSameSet checks that got and want hold the same strings, the same number of times.
func fltSameSet(t testing.TB, what string, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("%s: got %q, want %q", what, fltShortAll(g), fltShortAll(w))
	}
}

func fltShort(s string) string {
	if len(s) > 80 {
		return s[:40] + fmt.Sprintf("…(%d bytes)…", len(s)) + s[len(s)-20:]
	}
	return s
}

func fltShortAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fltShort(s)
	}
	return out
}

// fltJoin terminates each path with sep.
func fltJoin(paths []string, sep byte) []byte {
	var b []byte
	for _, p := range paths {
		b = append(append(b, p...), sep)
	}
	return b
}

// fltFiles writes n files of size bytes (random, seeded) named f00, f01 … under dir.
func fltFiles(t testing.TB, dir string, n, size int) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	var names []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("f%02d", i)
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		writeFile(t, filepath.Join(dir, name), string(data), 0o644)
		names = append(names, name)
	}
	return names
}

// fltTempName matches rsync's temp file names: "." + name + "." + 6 characters.
func fltTempName(name string) bool {
	if len(name) < 9 || name[0] != '.' {
		return false
	}
	dot := strings.LastIndexByte(name, '.')
	return dot > 1 && len(name)-dot-1 == 6
}

// fltTempFiles lists rsync temp files under dir.
func fltTempFiles(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && fltTempName(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// fltNoTemp fails if rsync temp files remain under dir.
func fltNoTemp(t testing.TB, dir string) {
	t.Helper()
	if left := fltTempFiles(dir); len(left) > 0 {
		t.Errorf("stale rsync temp files in %s: %q", dir, left)
	}
}

// fltWaitTemp waits until an rsync temp file exists under dir: rsync is mid-file.
func fltWaitTemp(t testing.TB, p *proc, dir string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if tf := fltTempFiles(dir); len(tf) > 0 {
			return tf[0]
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no rsync temp file appeared in %s within %v; stdout:\n%s\nstderr:\n%s", dir, timeout, p.stdout(), p.stderr.String())
	return ""
}

// fltCopied reports whether dst/name holds exactly src/name's bytes.
func fltCopied(src, dst, name string) bool {
	a, err1 := os.ReadFile(filepath.Join(src, name))
	b, err2 := os.ReadFile(filepath.Join(dst, name))
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// fltStderrLines returns the stderr lines starting with prefix.
func fltStderrLines(r *Run, prefix string) []string {
	var out []string
	for _, l := range strings.Split(r.Stderr, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// fltOneError checks that stderr holds exactly one "prsync: error:" line, and a hint
// line when hint is set.
func fltOneError(t testing.TB, r *Run, hint bool) {
	t.Helper()
	if n := len(fltStderrLines(r, "prsync: error: ")); n != 1 {
		t.Errorf("want one `prsync: error:` line, got %d:\n%s", n, r.Stderr)
	}
	if hint && len(fltStderrLines(r, "prsync: hint: ")) == 0 {
		t.Errorf("no `prsync: hint:` line:\n%s", r.Stderr)
	}
}

// fltStatuses returns the chunk_end statuses in order.
func fltStatuses(r *Run) []string {
	var out []string
	for _, e := range r.OfType("chunk_end") {
		out = append(out, fmt.Sprint(e["status"]))
	}
	return out
}

// fltOpenUp makes dir and its parents up to the temp root traversable by other users,
// so an unprivileged rsync can reach the test's files.
func fltOpenUp(t testing.TB, dir string) {
	t.Helper()
	root := filepath.Clean(os.TempDir())
	for d := dir; d != root && d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// fltNobody prepares a run as user nobody (root only): a copy of the prsync binary they
// can execute, and base opened up. It returns the command prefix.
func fltNobody(t testing.TB, base string) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run rsync as an unprivileged user")
	}
	ru, err := exec.LookPath("runuser")
	if err != nil {
		t.Skip("runuser not found")
	}
	data, err := os.ReadFile(bin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "prsync"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	fltOpenUp(t, base)
	return []string{ru, "-u", "nobody", "--", filepath.Join(base, "prsync")}
}

// fltChownNobody creates dir owned by nobody.
func fltChownNobody(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}

// ---------------------------------------------------------------- rows 1–11

// Row 1: a path that does not exist when prsync reads it is vanished (exit 24), and it
// is listed in --failed with the input's separator.
func TestFault01VanishedBeforeRead(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	for _, tc := range []struct {
		name    string
		null    bool
		missing string
	}{
		{"newline", false, "gone one.txt"},
		{"nul", true, "gone\nwith newline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			src, dst, failed := filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "failed")
			names := fltFiles(t, src, 3, 1000)
			sep := byte('\n')
			args := []string{"--no-throttle"}
			if tc.null {
				sep = 0
				args = append(args, "-0")
			}
			in := []string{names[0], tc.missing, names[1], names[2]}
			args = append(args, "--root", src, "--failed", failed, dst)
			r := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(in, sep))}, args...).wait(30 * time.Second)
			s := fltExit(t, r, 24)
			checkIdentity(t, s, 4)
			fltNums(t, s, map[string]int64{"files_transferred": 3, "files_vanished": 1, "files_failed": 0, "files_not_done": 0})
			fltPathFailed(t, r, map[string]string{tc.missing: "vanished"})
			fltSameSet(t, "--failed", fltList(t, failed, sep), []string{tc.missing})
			sameTree(t, src, dst)
			noProcsLeft(t, base)
		})
	}
}

// Row 2: a file deleted after rsync built its list, before it was sent: rsync's
// "file has vanished" (code 24).
func TestFault02VanishedDuringCopy(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	base := t.TempDir()
	src, dst, failed := filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "failed")
	names := fltFiles(t, src, 4, 25<<10)
	last := names[len(names)-1]
	// 100 kB at 25 kB/s: the last file is sent 3 s in, time enough to remove it on a busy machine
	p := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(names, '\n'))}, "--no-throttle", "--root", src, "--failed", failed, dst, "--", "--bwlimit=25")
	p.mustWaitFor("chunk_start", 10*time.Second, fltIs("chunk_start"))
	// a temp file in DEST means the receiver is writing the first file: the list is built
	fltWaitTemp(t, p, dst, 10*time.Second)
	if err := os.Remove(filepath.Join(src, last)); err != nil {
		t.Fatal(err)
	}
	r := p.wait(30 * time.Second)
	s := fltExit(t, r, 24)
	checkIdentity(t, s, 4)
	fltNums(t, s, map[string]int64{"files_transferred": 3, "files_vanished": 1, "files_failed": 0})
	fltPathFailed(t, r, map[string]string{last: "vanished"})
	if st := fltStatuses(r); !slices.Equal(st, []string{"vanished"}) {
		t.Errorf("chunk_end statuses %q, want [vanished]", st)
	}
	if e := r.OfType("path_failed"); len(e) == 1 && !strings.Contains(fmt.Sprint(e[0]["reason"]), "vanished") {
		t.Errorf("reason %q does not say it vanished during the copy", e[0]["reason"])
	}
	fltSameSet(t, "--failed", fltList(t, failed, '\n'), []string{last})
	sameTree(t, src, dst)
	fltNoTemp(t, dst)
	noProcsLeft(t, base)
}

// Row 3: a file the (unprivileged) user cannot read fails alone (23); the rest is copied.
func TestFault03Unreadable(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	base := t.TempDir()
	run := fltNobody(t, base)
	src, dst, out := filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "out")
	names := fltFiles(t, src, 3, 2000)
	writeFile(t, filepath.Join(src, "locked"), "secret\n", 0o600) // root's, unreadable by nobody
	fltChownNobody(t, dst)
	fltChownNobody(t, out)
	failed := filepath.Join(out, "failed")
	in := append(slices.Clone(names[:2]), "locked", names[2])
	p := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(in, '\n')), wrap: run[:len(run)-1], bin: run[len(run)-1]}, "--no-throttle", "--root", src, "--failed", failed, dst)
	r := p.wait(30 * time.Second)
	s := fltExit(t, r, 23)
	checkIdentity(t, s, 4)
	fltNums(t, s, map[string]int64{"files_transferred": 3, "files_failed": 1, "files_vanished": 0})
	fltPathFailed(t, r, map[string]string{"locked": "failed"})
	if e := r.OfType("path_failed"); len(e) == 1 && !strings.Contains(fmt.Sprint(e[0]["reason"]), "Permission denied") {
		t.Errorf("reason %q does not name the cause", e[0]["reason"])
	}
	if st := fltStatuses(r); !slices.Equal(st, []string{"partial"}) {
		t.Errorf("chunk_end statuses %q, want [partial]", st)
	}
	fltSameSet(t, "--failed", fltList(t, failed, '\n'), []string{"locked"})
	for _, n := range names {
		if !fltCopied(src, dst, n) {
			t.Errorf("%s not copied", n)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, "locked")); err == nil {
		t.Errorf("locked was copied")
	}
	fltNoTemp(t, dst)
	noProcsLeft(t, base)
}

// Row 4: the destination fills up (a 2 MB tmpfs): the run stops (ENOSPC is not retried),
// and every path not copied is in --failed.
func TestFault04DiskFull(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	base := t.TempDir()
	src, dst, failed := filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "failed")
	names := fltFiles(t, src, 16, 256<<10) // 4 MiB into 2 MiB
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dst).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dst).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dst, err, out)
			exec.Command("umount", "-l", dst).Run()
		}
	})
	r := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(names, '\n'))}, "--no-throttle", "-j", "2", "--chunk-files", "4", "--root", src, "--failed", failed, dst).wait(60 * time.Second)
	if r.Code != 11 && r.Code != 23 {
		t.Errorf("exit code %d, want 11 (or 23: rsync's code when ENOSPC hits a file)\n%s", r.Code, r.Stderr)
	}
	s := fltExit(t, r, r.Code)
	checkIdentity(t, s, int64(len(names)))
	full := false
	for _, e := range r.OfType("chunk_end") {
		if e["status"] == "failed" && strings.Contains(fmt.Sprint(e["hint"]), "full") {
			full = true
		}
		if e["status"] == "retrying" {
			t.Errorf("disk full was retried: %v", e)
		}
	}
	if !full {
		t.Errorf("no failed chunk_end with a disk-full hint: %q", fltStatuses(r))
	}
	if num(s, "retries") != 0 {
		t.Errorf("summary retries %d, want 0", num(s, "retries"))
	}
	fltOneError(t, r, true)
	list := fltList(t, failed, '\n')
	var notCopied []string
	for _, n := range names {
		if !fltCopied(src, dst, n) {
			notCopied = append(notCopied, n)
		}
	}
	if len(notCopied) == 0 {
		t.Fatalf("everything fit into the tmpfs; the test needs more data")
	}
	for _, n := range notCopied {
		if !slices.Contains(list, n) {
			t.Errorf("%s was not copied and is not in --failed", n)
		}
	}
	want := map[string]string{}
	for _, n := range list {
		if !slices.Contains(names, n) {
			t.Errorf("--failed holds %q, not an input path", n)
		}
		want[n] = "failed"
	}
	fltPathFailed(t, r, want) // the events and the list agree, no duplicates
	if got := num(s, "files_failed"); got != int64(len(list)) {
		t.Errorf("summary files_failed %d, --failed holds %d", got, len(list))
	}
	t.Logf("disk full: exit %d, %d copied, %d failed, temp files left: %q", r.Code, len(names)-len(list), len(list), fltTempFiles(dst))
	fltNoTemp(t, dst)
	noProcsLeft(t, base)
}

// Row 5: the rsync daemon is killed mid-copy (a transient code 12/10), restarted on the
// same port, and the retry completes the copy.
func TestFault05DaemonKilled(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	oncePerSuite(t)
	needRsync(t)
	base := t.TempDir()
	src, mod, failed := filepath.Join(base, "src"), filepath.Join(base, "mod"), filepath.Join(base, "failed")
	names := fltFiles(t, src, 4, 40<<10)
	if err := os.Mkdir(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, mod, 0)
	marker := fmt.Sprintf("127.0.0.1:%d/mod", d.Port)
	p := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(names, '\n')), env: []string{"PRSYNC_RETRY_DELAY=300ms"}}, "--no-throttle", "--retries", "10", "--root", src, "--failed", failed, d.URL(), "--", "--bwlimit=100")
	p.mustWaitFor("chunk_start", 10*time.Second, fltIs("chunk_start"))
	fltWaitTemp(t, p, mod, 10*time.Second)
	// Ten retries from 300 ms, doubled with 0.5-1.5x jitter, outlast the restart: it takes
	// about 2 s where PID 1 reaps the killed session child late (Stop waits for its group
	// to be gone), and three retries ran out in a clean-clone CI once.
	down := time.Now()
	d.Stop()
	stopped := time.Since(down)
	d.start(t)
	t.Logf("daemon down for %v (stop %v)", time.Since(down).Round(time.Millisecond), stopped.Round(time.Millisecond))
	r := p.wait(60 * time.Second)
	s := fltExit(t, r, 0)
	checkIdentity(t, s, 4)
	fltNums(t, s, map[string]int64{"files_failed": 0, "files_not_done": 0, "files_vanished": 0})
	if num(s, "retries") < 1 {
		t.Errorf("summary retries %d, want at least 1", num(s, "retries"))
	}
	st := fltStatuses(r)
	if !slices.Contains(st, "retrying") || st[len(st)-1] != "ok" {
		t.Errorf("chunk_end statuses %q, want a retrying then ok", st)
	}
	for _, e := range r.OfType("chunk_end") {
		if e["status"] == "retrying" {
			t.Logf("daemon killed: rsync exit %v (%v)", e["exit_code"], e["hint"])
		}
	}
	fltPathFailed(t, r, nil)
	fltSameSet(t, "--failed", fltList(t, failed, '\n'), nil)
	// The daemon's own receiver was SIGKILLed with the daemon and may leave its temp file
	// in the module: that is the remote side's, which prsync cannot sweep (remote DEST).
	for _, tf := range fltTempFiles(mod) {
		t.Logf("temp file left on the daemon side by the killed daemon (not prsync's to sweep): %s", filepath.Base(tf))
		os.Remove(tf)
	}
	sameTree(t, src, mod)
	noProcsLeft(t, marker)
}

// Row 6: a daemon that is never there: code 10, retried, then the run stops and every
// path is failed.
func TestFault06DaemonNeverThere(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	oncePerSuite(t)
	needRsync(t)
	base := t.TempDir()
	src, failed := filepath.Join(base, "src"), filepath.Join(base, "failed")
	names := fltFiles(t, src, 6, 100)
	port := freePort(t)
	url := fmt.Sprintf("rsync://127.0.0.1:%d/mod/", port)
	t0 := time.Now()
	r := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(names, 0))}, "--no-throttle", "-0", "-j", "2", "--chunk-files", "2", "--root", src, "--failed", failed, url).wait(60 * time.Second)
	el := time.Since(t0)
	s := fltExit(t, r, 10)
	checkIdentity(t, s, 6)
	fltNums(t, s, map[string]int64{"files_failed": 6, "files_transferred": 0})
	if el > 20*time.Second {
		t.Errorf("took %v; want a fast failure", el)
	}
	if n := num(s, "retries"); n < 2 {
		t.Errorf("summary retries %d, want at least 2 (--retries 2)", n)
	}
	if n := len(r.OfType("chunk_start")); n > 2*3 {
		t.Errorf("%d rsyncs started; want at most the first chunks' attempts (jobs 2 × 3)", n)
	}
	st := fltStatuses(r)
	if !slices.Contains(st, "retrying") || !slices.Contains(st, "failed") {
		t.Errorf("chunk_end statuses %q, want retrying and failed", st)
	}
	want := map[string]string{}
	for _, n := range names {
		want[n] = "failed"
	}
	fltPathFailed(t, r, want)
	fltSameSet(t, "--failed", fltList(t, failed, 0), names)
	fltOneError(t, r, true)
	if !strings.Contains(r.Stderr, "code 10") {
		t.Errorf("error does not give rsync's code 10:\n%s", r.Stderr)
	}
	noProcsLeft(t, fmt.Sprintf("127.0.0.1:%d", port))
}

// Row 7: the test SIGKILLs an rsync group mid-file. The chunk is retried and the run
// ends 0 with an exact copy. The killed receiver leaves its ".name.XXXXXX" temp file;
// prsync sweeps it in a local DEST because the attempt died of a signal.
func TestFault07RsyncKilled(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	base := t.TempDir()
	src, dst, failed := filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "failed")
	names := fltFiles(t, src, 4, 40<<10)
	// 100 kB at 25 kB/s: the last file is sent 3 s in, time enough to remove it on a busy machine
	p := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(names, '\n'))}, "--no-throttle", "--root", src, "--failed", failed, dst, "--", "--bwlimit=25")
	cs := p.mustWaitFor("chunk_start", 10*time.Second, fltIs("chunk_start"))
	fltWaitTemp(t, p, dst, 10*time.Second)
	pid := int(num(cs, "pid"))
	if st, ok := procsMentioning(dst)[pid]; !ok {
		t.Fatalf("rsync %d from chunk_start is not running (%v)", pid, procsMentioning(dst))
	} else {
		t.Logf("killing rsync group %d (state %s)", pid, st)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := p.wait(60 * time.Second)
	s := fltExit(t, r, 0)
	checkIdentity(t, s, 4)
	fltNums(t, s, map[string]int64{"files_failed": 0, "files_not_done": 0})
	if num(s, "retries") < 1 {
		t.Errorf("summary retries %d, want at least 1", num(s, "retries"))
	}
	if p.waitFor(0, fltIs("chunk_end", "status", "retrying", "exit_code", -1)) == nil {
		t.Errorf("no chunk_end retrying with exit_code -1: %q", fltStatuses(r))
	}
	fltPathFailed(t, r, nil)
	fltSameSet(t, "--failed", fltList(t, failed, '\n'), nil)
	fltNoTemp(t, dst)
	sameTree(t, src, dst)
	noProcsLeft(t, base)
}

// Row 8: SIGINT at a random moment, 20 times: exit 20 (or 0 when the copy had ended),
// a summary last, the identity, every path copied or in --failed, and no process left.
func TestSignal08InterruptLoop(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	shared := t.TempDir()
	src := filepath.Join(shared, "src")
	names := fltFiles(t, src, 6, 20<<10)
	loops := 20
	if s := os.Getenv("PRSYNC_TEST_INT_LOOPS"); s != "" {
		loops, _ = strconv.Atoi(s)
	}
	codes := make([]int, loops)
	bin(t) // build before the parallel subtests: bin is not safe for concurrent first use
	for i := 0; i < loops; i++ {
		t.Run(fmt.Sprintf("n%02d", i), func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			dst, failed := filepath.Join(base, "dst"), filepath.Join(base, "failed")
			// 2 chunks of 3 × 20 KiB at 60 KiB/s: about 1 s of copying
			p := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(names, '\n'))}, "--no-throttle", "-j", "2", "--chunk-files", "3", "--root", src, "--failed", failed, dst, "--", "--bwlimit=60")
			// a random moment 0–1.5 s after the start event: before prsync's handlers are
			// installed, a SIGINT kills any Go program (the few milliseconds of runtime
			// start-up); the window between them and the start event, where prsync checks
			// rsync, is covered by TestSignalDuringStartup
			p.mustWaitFor("start", 10*time.Second, fltIs("start"))
			delay := time.Duration(rand.Int64N(int64(1500 * time.Millisecond)))
			time.Sleep(delay)
			p.signal(syscall.SIGINT)
			r := p.wait(30 * time.Second)
			codes[i] = r.Code
			if r.Code != 20 && r.Code != 0 {
				t.Errorf("delay %v: exit code %d, want 20 (or 0)\n%s", delay, r.Code, r.Stderr)
			}
			s := fltExit(t, r, r.Code)
			checkIdentity(t, s, -1)
			list := fltList(t, failed, '\n')
			status := map[string]string{}
			for _, e := range r.OfType("path_failed") {
				status[fmt.Sprint(e["path"])] = fmt.Sprint(e["status"])
			}
			fltSameSet(t, "--failed vs path_failed", list, fltKeys(status))
			unaccounted := 0
			for _, n := range names {
				switch {
				case slices.Contains(list, n):
					if st := status[n]; st != "not_done" && st != "failed" {
						t.Errorf("%s: status %q, want not_done or failed", n, st)
					}
				case fltCopied(src, dst, n):
				default:
					unaccounted++
				}
				if _, err := os.Lstat(filepath.Join(dst, n)); err == nil && !fltCopied(src, dst, n) {
					t.Errorf("%s: a partial file at its final name", n)
				}
			}
			// paths still in the pipe when the signal came were never read: they are
			// the only ones allowed to be neither copied nor listed
			if want := len(names) - int(num(s, "files")); unaccounted != want {
				t.Errorf("delay %v: %d paths neither copied nor in --failed, want %d (unread)", delay, unaccounted, want)
			}
			if r.Code == 0 {
				sameTree(t, src, dst)
			}
			fltNoTemp(t, dst)
			noProcsLeft(t, dst)
		})
	}
	t.Cleanup(func() { t.Logf("exit codes: %v", codes) })
}

func fltKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Row 9: SIGTERM while the throttle has paused the rsyncs: exit 20 within seconds,
// nothing left stopped or running, no temp file.
func TestSignal09TermWhilePaused(t *testing.T) {
	needRsync(t)
	base := t.TempDir()
	src, dst, failed := filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "failed")
	names := fltFiles(t, src, 8, 40<<10)
	// keep the machine over 1 % CPU until a pause is seen
	busy := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-busy:
				return
			default:
			}
			for i := 0; i < 1e5; i++ {
				_ = i * i
			}
		}
	}()
	defer func() {
		select {
		case <-busy:
		default:
			close(busy)
		}
		wg.Wait()
	}()
	p := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(names, '\n'))}, "--suspend-threshold", "1", "--resume-threshold", "0.5", "--throttle-interval", "200ms", "--max-suspend", "30s", "-j", "2", "--chunk-files", "4", "--root", src, "--failed", failed, dst, "--", "--bwlimit=40")
	sus := p.mustWaitFor("throttle suspend", 15*time.Second, fltIs("throttle", "action", "suspend"))
	close(busy)
	// wait until the group is really stopped, so TERM finds it in state T
	pid := int(num(sus, "pid"))
	deadline := time.Now().Add(5 * time.Second)
	for procsMentioning(dst)[pid] != "T" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := procsMentioning(dst)[pid]; st != "T" {
		t.Fatalf("paused rsync %d is in state %q, not T: the test would not test TERM to a stopped group", pid, st)
	}
	t0 := time.Now()
	p.signal(syscall.SIGTERM)
	r := p.wait(30 * time.Second)
	el := time.Since(t0)
	s := fltExit(t, r, 20)
	checkStoppedByTerm(t, r, el)
	checkIdentity(t, s, 8)
	if num(s, "suspensions") < 1 {
		t.Errorf("summary suspensions %d, want at least 1", num(s, "suspensions"))
	}
	for pid, st := range procsMentioning(base) {
		if st == "T" {
			t.Errorf("process %d left stopped", pid)
		}
	}
	list := fltList(t, failed, '\n')
	for _, n := range names {
		if !slices.Contains(list, n) && !fltCopied(src, dst, n) {
			t.Errorf("%s neither copied nor in --failed", n)
		}
	}
	if got := num(s, "files_not_done") + num(s, "files_failed"); got != int64(len(list)) {
		t.Errorf("--failed holds %d paths, summary not_done+failed %d", len(list), got)
	}
	fltNoTemp(t, dst)
	noProcsLeft(t, base)
	t.Logf("ended %v after SIGTERM; statuses %q", el.Round(time.Millisecond), fltStatuses(r))
}

// Rows 10 and 11: setup faults fail fast with one clear error, before any copying rsync.
func TestFault10and11Setup(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	base := t.TempDir()
	src := filepath.Join(base, "src")
	names := fltFiles(t, src, 2, 100)
	afile := filepath.Join(base, "afile")
	writeFile(t, afile, "x", 0o644)
	state := filepath.Join(base, "fake-state")
	fake := fakeRsyncPath(t)
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		code int
	}{
		{"10-rsync-missing", []string{"--rsync", "/nonexistent/rsync", filepath.Join(base, "d1")}, nil, 127},
		{"10-rsync-is-a-dir", []string{"--rsync", base + "/", filepath.Join(base, "d2")}, nil, 127},
		{"11-dest-is-a-file", []string{"--rsync", fake, afile},
			[]string{"PRSYNC_TEST_FAKE_RSYNC=exit:0", "PRSYNC_TEST_FAKE_STATE=" + state}, 3},
		{"11-dest-under-a-file", []string{"--rsync", fake, filepath.Join(afile, "sub")},
			[]string{"PRSYNC_TEST_FAKE_RSYNC=exit:0", "PRSYNC_TEST_FAKE_STATE=" + state}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(names, '\n')), env: tc.env}, append([]string{"--no-throttle", "--root", src}, tc.args...)...).wait(30 * time.Second)
			if r.Code != tc.code {
				t.Errorf("exit code %d, want %d\n%s", r.Code, tc.code, r.Stderr)
			}
			if len(r.Events) != 0 {
				t.Errorf("events written before the run started: %s", r.Stdout)
			}
			fltOneError(t, r, false)
			t.Logf("stderr: %s", strings.TrimSpace(r.Stderr))
			if _, err := os.Stat(state); err == nil {
				t.Errorf("a copying rsync was started")
			}
			noProcsLeft(t, base)
		})
	}
}

// ---------------------------------------------------------------- signals beyond the rows

// SIGHUP is treated like SIGTERM: exit 20, the summary, not-done paths in --failed.
func TestSignalHUP(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	base := t.TempDir()
	src, dst, failed := filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "failed")
	names := fltFiles(t, src, 4, 40<<10)
	p := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(names, '\n'))}, "--no-throttle", "--root", src, "--failed", failed, dst, "--", "--bwlimit=50")
	p.mustWaitFor("chunk_start", 10*time.Second, fltIs("chunk_start"))
	fltWaitTemp(t, p, dst, 10*time.Second)
	p.signal(syscall.SIGHUP)
	r := p.wait(30 * time.Second)
	s := fltExit(t, r, 20)
	checkIdentity(t, s, 4)
	if st := fltStatuses(r); !slices.Equal(st, []string{"cancelled"}) {
		t.Errorf("chunk_end statuses %q, want [cancelled]", st)
	}
	var notCopied []string
	want := map[string]string{}
	for _, n := range names {
		if !fltCopied(src, dst, n) {
			notCopied = append(notCopied, n)
			want[n] = "not_done"
		}
	}
	if len(notCopied) == 0 {
		t.Fatal("the copy ended before SIGHUP")
	}
	fltNums(t, s, map[string]int64{"files_not_done": int64(len(notCopied))})
	fltPathFailed(t, r, want)
	fltSameSet(t, "--failed", fltList(t, failed, '\n'), notCopied)
	fltNoTemp(t, dst)
	noProcsLeft(t, base)
}

// A second SIGINT sends KILL to the groups: exit 20, nothing left, and no temp file in
// a local DEST (rsync removed it on TERM, or prsync swept it after the KILL).
func TestSignalSecondInterruptKills(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	base := t.TempDir()
	src, dst, failed := filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "failed")
	names := fltFiles(t, src, 2, 200<<10)
	// 100 kB at 25 kB/s: the last file is sent 3 s in, time enough to remove it on a busy machine
	p := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(names, '\n'))}, "--no-throttle", "--root", src, "--failed", failed, dst, "--", "--bwlimit=25")
	p.mustWaitFor("chunk_start", 10*time.Second, fltIs("chunk_start"))
	fltWaitTemp(t, p, dst, 10*time.Second)
	p.signal(syscall.SIGINT)
	p.signal(syscall.SIGINT)
	r := p.wait(30 * time.Second)
	s := fltExit(t, r, 20)
	checkIdentity(t, s, 2)
	fltNums(t, s, map[string]int64{"files_not_done": 2})
	fltSameSet(t, "--failed", fltList(t, failed, '\n'), names)
	fltNoTemp(t, dst)
	noProcsLeft(t, base)
	t.Logf("chunk_end %v; stderr: %s", r.OfType("chunk_end"), strings.TrimSpace(r.Stderr))
}

// SIGINT while prsync is still starting (checking rsync) still ends with exit 20 and a
// summary: the handlers are installed before anything slow happens. The signal is sent
// once prsync is seen asking rsync its version (the wrapper says so, then waits for the
// signal), not after a fixed sleep: on a busy machine a race-built prsync may need more
// than a second to reach that point, and a signal before its main is the Go runtime's to
// take, not prsync's.
func TestSignalDuringStartup(t *testing.T) {
	needRsync(t)
	base := t.TempDir()
	src, dst, failed := filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "failed")
	names := fltFiles(t, src, 2, 100)
	asking, sent := filepath.Join(base, "asking"), filepath.Join(base, "sent")
	slow := filepath.Join(base, "slow-rsync")
	// every --version call says it is under way, then waits (at most 60 s) until the test
	// has sent the signal, and a little more, so that the signal meets prsync in its check
	writeFile(t, slow, fmt.Sprintf(`#!/bin/sh
for a; do
  if [ "$a" = --version ]; then
    : > '%s'; i=0
    while [ ! -e '%s' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
    sleep 0.2
  fi
done
exec rsync "$@"
`, asking, sent), 0o755)
	p := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(names, '\n'))}, "--no-throttle", "--rsync", slow, "--root", src, "--failed", failed, dst)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(asking); err == nil {
			break
		}
		if time.Now().After(deadline) {
			r := p.wait(time.Second)
			t.Fatalf("prsync never asked rsync its version within 60 s: exit %d\n%s", r.Code, r.Stderr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.signal(syscall.SIGINT)
	writeFile(t, sent, "", 0o644)
	r := p.wait(60 * time.Second)
	if r.Code == -1 {
		t.Fatalf("prsync was killed by SIGINT during startup (no handler yet); stdout:\n%s", r.Stdout)
	}
	s := fltExit(t, r, 20)
	checkIdentity(t, s, -1)
	if len(r.OfType("chunk_start")) != 0 {
		t.Errorf("an rsync started after the interrupt")
	}
	list := fltList(t, failed, '\n')
	if got := num(s, "files_not_done"); got != int64(len(list)) {
		t.Errorf("summary files_not_done %d, --failed holds %d", got, len(list))
	}
	// DEST holds nothing of the source: no path was copied, so none may be missing from
	// the account (--failed names every path not in DEST)
	inFailed := map[string]bool{}
	for _, n := range list {
		inFailed[n] = true
	}
	for _, n := range names {
		if _, err := os.Lstat(filepath.Join(dst, n)); err == nil {
			t.Errorf("%s is in DEST after an interrupt before any rsync ran", n)
		} else if !inFailed[n] && num(s, "files") > 0 {
			t.Errorf("%s is neither in DEST nor in --failed", n)
		}
	}
	noProcsLeft(t, base)
}

// ---------------------------------------------------------------- --failed round trip

// Fail some paths (unreadable for an unprivileged run, and missing), fix the causes,
// re-run from the --failed list alone, and end with an exact copy.
func TestFailedRoundTrip(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	base := t.TempDir()
	src, dst, out := filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "out")
	names := fltFiles(t, src, 4, 3000)
	var run []string
	var wantFailed []string
	missing := "later\nwith a newline"
	if os.Geteuid() == 0 {
		run = fltNobody(t, base)
		writeFile(t, filepath.Join(src, "locked one"), "secret\n", 0o600)
		fltChownNobody(t, dst)
		fltChownNobody(t, out)
		wantFailed = append(wantFailed, "locked one")
	} else {
		run = []string{bin(t)}
		os.MkdirAll(out, 0o755)
	}
	wantFailed = append(wantFailed, missing)
	in := append(slices.Clone(names), wantFailed...)
	failed := filepath.Join(out, "failed")
	r := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(in, 0)), wrap: run[:len(run)-1], bin: run[len(run)-1]}, "--no-throttle", "-0", "--root", src, "--failed", failed, dst).wait(30 * time.Second)
	want := 24
	if len(wantFailed) > 1 {
		want = 23
	}
	s := fltExit(t, r, want)
	checkIdentity(t, s, int64(len(in)))
	fltSameSet(t, "--failed", fltList(t, failed, 0), wantFailed)

	// fix the causes
	if len(wantFailed) > 1 {
		if err := os.Chmod(filepath.Join(src, "locked one"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(src, missing), "now here\n", 0o644)

	// the tempting loop, prsync --failed FILE < FILE, is refused before FILE is truncated
	// (it read an empty list and exited 0, and the failed paths were gone)
	before, err := os.ReadFile(failed)
	if err != nil {
		t.Fatal(err)
	}
	same, err := os.Open(failed)
	if err != nil {
		t.Fatal(err)
	}
	defer same.Close()
	r1 := start(t, startOpts{dir: base, stdin: same, wrap: run[:len(run)-1], bin: run[len(run)-1]}, "--no-throttle", "-0", "--root", src, "--failed", failed, dst).wait(30 * time.Second)
	if r1.Code != 1 || !strings.Contains(r1.Stderr, "prsync: error: --failed "+failed+" is the list prsync reads (stdin)") {
		t.Errorf("--failed FILE < FILE: exit %d, stderr %q; want 1 and the reason", r1.Code, r1.Stderr)
	}
	if after, _ := os.ReadFile(failed); !bytes.Equal(after, before) {
		t.Errorf("--failed FILE < FILE changed FILE: %q, was %q", after, before)
	}
	if _, err := os.Lstat(filepath.Join(dst, missing)); err == nil {
		t.Errorf("--failed FILE < FILE copied %q although it was refused", missing)
	}

	// prsync -0 DEST < FILE
	fh, err := os.Open(failed)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	failed2 := filepath.Join(out, "failed2")
	r2 := start(t, startOpts{dir: base, stdin: fh, wrap: run[:len(run)-1], bin: run[len(run)-1]}, "--no-throttle", "-0", "--root", src, "--failed", failed2, dst).wait(30 * time.Second)
	s2 := fltExit(t, r2, 0)
	checkIdentity(t, s2, int64(len(wantFailed)))
	fltNums(t, s2, map[string]int64{"files_transferred": int64(len(wantFailed))})
	fltSameSet(t, "second --failed", fltList(t, failed2, 0), nil)
	sameTree(t, src, dst)
	noProcsLeft(t, base)
}

// ---------------------------------------------------------------- DEST inside the source

// TestDestInsideSource: `cd SRC && find . | prsync ./backup` lists the backup's own files
// on every run after the first. They fail with the reason and a hint, instead of being
// copied into DEST a level deeper each time; the rest of the tree is copied. A DEST above
// the source (restoring an archive into its parent) is copied as before.
func TestDestInsideSource(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	src := filepath.Join(t.TempDir(), "data")
	var files []string
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("d%d/f%d", i%2, i)
		writeFile(t, filepath.Join(src, name), name, 0o644)
		files = append(files, name)
	}
	list := func() []byte { // as find . -print0 lists the tree, DEST included once it exists
		var b []byte
		filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			b = append(b, "./"+rel+"\x00"...)
			return nil
		})
		return b
	}
	dest := filepath.Join(src, "backup")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	first := start(t, startOpts{dir: src, stdin: bytes.NewReader(list())}, "--no-throttle", "-0", "./backup/").wait(30 * time.Second)
	fltExit(t, first, 23) // ./backup itself is in the list
	for _, f := range files {
		if b, err := os.ReadFile(filepath.Join(dest, f)); err != nil || string(b) != f {
			t.Errorf("first run: %s in DEST: %q, %v", f, b, err)
		}
	}
	failed := filepath.Join(t.TempDir(), "failed")
	second := start(t, startOpts{dir: src, stdin: bytes.NewReader(list())}, "--no-throttle", "-0", "--failed", failed, "./backup/").wait(30 * time.Second)
	s := fltExit(t, second, 23)
	var inside []string
	for _, p := range strings.Split(strings.TrimSuffix(string(list()), "\x00"), "\x00") {
		if p == "./backup" || strings.HasPrefix(p, "./backup/") {
			inside = append(inside, p)
		}
	}
	checkIdentity(t, s, int64(len(strings.Split(strings.TrimSuffix(string(list()), "\x00"), "\x00"))))
	fltSameSet(t, "--failed", fltList(t, failed, 0), inside)
	for _, e := range second.OfType("path_failed") {
		if !strings.HasPrefix(fmt.Sprint(e["reason"]), "inside DEST") {
			t.Errorf("path_failed %v: want the reason inside DEST", e)
		}
	}
	if !strings.Contains(second.Stderr, "prsync: hint: the list holds DEST ./backup") || !strings.Contains(second.Stderr, "find . -path ./backup -prune -o -print0") {
		t.Errorf("no hint naming DEST and the find test:\n%s", second.Stderr)
	}
	// DEST holds the tree once, and no copy of itself
	if _, err := os.Lstat(filepath.Join(dest, "backup")); err == nil {
		t.Errorf("DEST holds a copy of itself: %s", filepath.Join(dest, "backup"))
	}
	filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dest, p)
			if !slices.Contains(files, rel) {
				t.Errorf("DEST holds %s, not a file of the source", rel)
			}
		}
		return nil
	})

	// a restore into the parent: the paths are inside DEST, which is above the source
	restore := filepath.Join(src, "d0")
	r := start(t, startOpts{dir: restore, stdin: bytes.NewReader([]byte("f0\x00f2\x00"))}, "--no-throttle", "-0", src).wait(30 * time.Second)
	fltExit(t, r, 0)
	for _, f := range []string{"f0", "f2"} {
		if b, err := os.ReadFile(filepath.Join(src, f)); err != nil || string(b) != "d0/"+f {
			t.Errorf("restore into the parent: %s: %q, %v", f, b, err)
		}
	}
}

// TestRootAlone: the root in the list (".", as find . prints it first) is copied alone,
// after the other paths: rsync lists a "." entry's contents one level deep, so in a chunk
// it copied top-level names the list left out, and the paths landing after it changed
// DEST's mtime.
func TestRootAlone(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := t.TempDir()
	src, dst := filepath.Join(w, "src"), filepath.Join(w, "dst")
	writeFile(t, filepath.Join(src, "keep"), "keep", 0o644)
	writeFile(t, filepath.Join(src, "left out.tmp"), "not listed", 0o644)
	writeFile(t, filepath.Join(src, "sub", "inner"), "inner", 0o644)
	writeFile(t, filepath.Join(src, "skipped dir", "x"), "not listed", 0o644)
	old := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	if err := os.Chmod(src, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(src, old, old); err != nil {
		t.Fatal(err)
	}
	in := []byte(".\x00keep\x00sub\x00sub/inner\x00") // as find . ! -name '*.tmp' ! -path './skipped*' lists it
	r := start(t, startOpts{dir: src, stdin: bytes.NewReader(in)}, "--no-throttle", "-0", "-j", "2", dst).wait(30 * time.Second)
	s := fltExit(t, r, 0)
	checkIdentity(t, s, 4)
	fltNums(t, s, map[string]int64{"files_transferred": 4})
	for _, p := range []string{"left out.tmp", "skipped dir"} {
		if _, err := os.Lstat(filepath.Join(dst, p)); err == nil {
			t.Errorf("DEST holds %q, which the list left out", p)
		}
	}
	for _, p := range []string{"keep", "sub/inner"} {
		if _, err := os.Lstat(filepath.Join(dst, p)); err != nil {
			t.Errorf("DEST lacks %q: %v", p, err)
		}
	}
	destHasRootAttrs(t, dst, 0o750, old)
	// the root's chunk, cut last, started after every other chunk had ended
	at := func(e map[string]any) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e["time"]))
		if err != nil {
			t.Fatalf("event time: %v", err)
		}
		return ts
	}
	var rootID int64
	for _, e := range r.OfType("chunk_start") {
		rootID = max(rootID, num(e, "chunk"))
	}
	var rootStart, lastEnd time.Time
	for _, e := range r.OfType("chunk_start") {
		if num(e, "chunk") == rootID {
			rootStart = at(e)
			if num(e, "files") != 1 {
				t.Errorf("the last chunk %v: want the root alone", e)
			}
		}
	}
	for _, e := range r.OfType("chunk_end") {
		if num(e, "chunk") != rootID && at(e).After(lastEnd) {
			lastEnd = at(e)
		}
	}
	if rootID < 2 || rootStart.Before(lastEnd) {
		t.Errorf("the root's chunk %d started at %v, the other chunks ended at %v: want it after", rootID, rootStart, lastEnd)
	}
}

// ---------------------------------------------------------------- input faults

// A read error on the input ends it cleanly: an error event, a summary, a non-zero exit,
// and no hang.
func TestFaultStdinReadError(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	base := t.TempDir()
	dir := filepath.Join(base, "adir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		stdin func(t *testing.T) io.Reader
		args  []string
	}{
		{"from-a-directory", nil, []string{"--from", dir}},
		{"stdin-is-a-directory", func(t *testing.T) io.Reader {
			fh, err := os.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fh.Close() })
			return fh
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in io.Reader
			if tc.stdin != nil {
				in = tc.stdin(t)
			}
			dst := filepath.Join(base, "dst-"+tc.name)
			r := start(t, startOpts{dir: base, stdin: in}, append(append([]string{"--no-throttle"}, tc.args...), dst)...).wait(20 * time.Second)
			if r.Code == 0 {
				t.Errorf("exit code 0 after a read error")
			}
			s := fltExit(t, r, r.Code)
			checkIdentity(t, s, 0)
			errs := r.OfType("error")
			if len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]["error"]), "is a directory") {
				t.Errorf("want one error event naming the cause, got %v", errs)
			}
			fltOneError(t, r, false)
			t.Logf("exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
			noProcsLeft(t, dst)
		})
	}
}

// Empty input (or only empty records) is a successful no-op with a summary.
func TestFaultEmptyInput(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	for _, tc := range []struct {
		name  string
		in    string
		args  []string
		empty int64
	}{
		{"nothing", "", nil, 0},
		{"newlines", "\n\n\n", nil, 3},
		{"nuls", "\x00\x00", []string{"-0"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dst, failed := filepath.Join(base, "dst"), filepath.Join(base, "failed")
			r := start(t, startOpts{dir: base, stdin: strings.NewReader(tc.in)}, append(append([]string{"--no-throttle", "--failed", failed}, tc.args...), dst)...).wait(20 * time.Second)
			s := fltExit(t, r, 0)
			checkIdentity(t, s, 0)
			fltNums(t, s, map[string]int64{"empty_records": tc.empty, "chunks": 0})
			if n := len(r.OfType("chunk_start")); n != 0 {
				t.Errorf("%d rsyncs started for empty input", n)
			}
			fltSameSet(t, "--failed", fltList(t, failed, '\n'), nil)
			if r.Stderr != "" {
				t.Errorf("stderr: %s", r.Stderr)
			}
			noProcsLeft(t, base)
		})
	}
}

// A 1 MB record is a per-path failure (file name too long); the other paths are copied.
func TestFaultLongRecord(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	base := t.TempDir()
	src, dst, failed := filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "failed")
	names := fltFiles(t, src, 2, 100)
	long := strings.Repeat("x", 1<<20)
	in := []string{names[0], long, names[1]}
	r := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(in, '\n'))}, "--no-throttle", "--root", src, "--failed", failed, dst).wait(30 * time.Second)
	s := fltExit(t, r, 23)
	checkIdentity(t, s, 3)
	fltNums(t, s, map[string]int64{"files_failed": 1, "files_transferred": 2})
	fltPathFailed(t, r, map[string]string{long: "failed"})
	if e := r.OfType("path_failed"); len(e) == 1 && !strings.Contains(fmt.Sprint(e[0]["reason"]), "file name too long") {
		t.Errorf("reason %q, want file name too long", e[0]["reason"])
	}
	fltSameSet(t, "--failed", fltList(t, failed, '\n'), []string{long})
	sameTree(t, src, dst)
	noProcsLeft(t, base)
}

// ---------------------------------------------------------------- exit codes via the fake rsync

// Transient codes are retried; config errors are not, and carry a hint.
func TestFaultFakeRsyncCodes(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	fake := fakeRsyncPath(t)
	for _, tc := range []struct {
		mode     string
		code     int
		statuses []string
		retries  int64
		hint     string // in the last chunk_end
	}{
		{"fail-first:1:255", 0, []string{"retrying", "ok"}, 1, ""},
		{"fail-first:2:30", 0, []string{"retrying", "retrying", "ok"}, 2, ""},
		{"exit:12", 12, []string{"retrying", "retrying", "failed"}, 2, "connection"},
		{"exit:35", 35, []string{"retrying", "retrying", "failed"}, 2, "reach"},
		{"exit:5", 5, []string{"failed"}, 0, "daemon refused"},
		{"exit:3", 3, []string{"failed"}, 0, "destination"},
		{"exit:1", 1, []string{"failed"}, 0, "options"},
	} {
		t.Run(strings.ReplaceAll(tc.mode, ":", "_"), func(t *testing.T) {
			t.Parallel() // each case its own trees and fake state; most of the time is retry backoff
			base := t.TempDir()
			src, dst, failed := filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "failed")
			names := fltFiles(t, src, 3, 500)
			env := []string{"PRSYNC_TEST_FAKE_RSYNC=" + tc.mode, "PRSYNC_TEST_FAKE_STATE=" + filepath.Join(base, "state")}
			r := start(t, startOpts{dir: base, stdin: bytes.NewReader(fltJoin(names, '\n')), env: env}, "--no-throttle", "--rsync", fake, "--root", src, "--failed", failed, dst).wait(30 * time.Second)
			s := fltExit(t, r, tc.code)
			checkIdentity(t, s, 3)
			fltNums(t, s, map[string]int64{"retries": tc.retries})
			if st := fltStatuses(r); !slices.Equal(st, tc.statuses) {
				t.Errorf("chunk_end statuses %q, want %q", st, tc.statuses)
			}
			ends := r.OfType("chunk_end")
			for _, e := range ends {
				if e["status"] != "ok" && e["hint"] == nil {
					t.Errorf("chunk_end without a hint: %v", e)
				}
			}
			if tc.code == 0 {
				sameTree(t, src, dst)
				fltPathFailed(t, r, nil)
				fltSameSet(t, "--failed", fltList(t, failed, '\n'), nil)
			} else {
				if last := ends[len(ends)-1]; !strings.Contains(fmt.Sprint(last["hint"]), tc.hint) {
					t.Errorf("hint %q, want it to mention %q", last["hint"], tc.hint)
				}
				want := map[string]string{}
				for _, n := range names {
					want[n] = "failed"
				}
				fltPathFailed(t, r, want)
				fltSameSet(t, "--failed", fltList(t, failed, '\n'), names)
				fltOneError(t, r, true)
			}
			noProcsLeft(t, base)
		})
	}
}
