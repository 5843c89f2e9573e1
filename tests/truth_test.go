package tests

// Truthful accounting (issue 9): every fault below runs the real rsync (the fake one only
// for the race of item 5), and the check is made against DEST itself, walked after the
// run: every path that prsync does not list in --failed is in DEST with the source's type,
// size and mtime, and exit 0 means DEST holds every path read.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// truthTree writes top/t1..t4 and sub/f1..f4 (distinct sizes) under src and returns
// their paths relative to src.
func truthTree(t testing.TB, src string, size int) []string {
	t.Helper()
	var rels []string
	for i := 1; i <= 4; i++ {
		for _, d := range []string{"sub/f", "top/t"} {
			rel := fmt.Sprintf("%s%d", d, i)
			writeFile(t, filepath.Join(src, rel), strings.Repeat(fmt.Sprint(i), size*i+len(d)), 0o644)
			rels = append(rels, rel)
		}
	}
	return rels
}

// chattr sets or clears the immutable flag, and clears it when the test ends.
func chattr(t testing.TB, on bool, paths ...string) {
	t.Helper()
	if !isRoot() {
		t.Skip("chattr +i needs root")
	}
	flag := "-i"
	if on {
		flag = "+i"
	}
	if out, err := exec.Command("chattr", append([]string{flag}, paths...)...).CombinedOutput(); err != nil {
		t.Skipf("chattr: %v: %s", err, out)
	}
	if on {
		t.Cleanup(func() { exec.Command("chattr", append([]string{"-i"}, paths...)...).Run() })
	}
}

// TestTruthLocal: receiver-side faults in a local DEST.
func TestTruthLocal(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	t.Run("immutable directory", func(t *testing.T) {
		t.Parallel()
		w := newWork(t)
		rels := truthTree(t, w.Src, 1000)
		os.MkdirAll(filepath.Join(w.Dst, "sub"), 0o755)
		chattr(t, true, filepath.Join(w.Dst, "sub"))
		r, _ := truthRun(t, w.Src, w.Dst, w.Dst, rels)
		r.Exit(t, 23)
		r.FailedAre(t, "sub/f1", "sub/f2", "sub/f3", "sub/f4")
		r.ReasonsName(t)
		if !strings.Contains(r.Stderr, "immutable") {
			t.Errorf("no hint about an immutable directory:\n%s", r.Stderr)
		}
	})
	t.Run("immutable file being updated", func(t *testing.T) {
		t.Parallel()
		w := newWork(t)
		rels := truthTree(t, w.Src, 1000)
		writeFile(t, filepath.Join(w.Dst, "top/t2"), "old", 0o644)
		chattr(t, true, filepath.Join(w.Dst, "top/t2"))
		r, _ := truthRun(t, w.Src, w.Dst, w.Dst, rels)
		r.Exit(t, 23)
		r.FailedAre(t, "top/t2")
		r.ReasonsName(t)
	})
	t.Run("a directory where a file goes", func(t *testing.T) {
		t.Parallel()
		w := newWork(t)
		rels := truthTree(t, w.Src, 1000)
		writeFile(t, filepath.Join(w.Dst, "top/t3/inside"), "x", 0o644)
		r, _ := truthRun(t, w.Src, w.Dst, w.Dst, rels)
		r.Exit(t, 23)
		r.FailedAre(t, "top/t3")
		r.ReasonsName(t)
	})
	t.Run("a read-only mount inside DEST", func(t *testing.T) {
		t.Parallel()
		w := newWork(t)
		rels := truthTree(t, w.Src, 1000)
		mountTmpfs(t, filepath.Join(w.Dst, "sub"), "size=1m,ro")
		r, _ := truthRun(t, w.Src, w.Dst, w.Dst, rels)
		r.Exit(t, 23)
		r.FailedAre(t, "sub/f1", "sub/f2", "sub/f3", "sub/f4")
		r.ReasonsName(t)
		if !strings.Contains(r.Stderr, "read-only") {
			t.Errorf("no hint about a read-only file system:\n%s", r.Stderr)
		}
	})
	t.Run("paths rsync's own options leave out", func(t *testing.T) {
		// rsync exits 0 over them: prsync fails them, unless DEST already holds them
		t.Parallel()
		for _, tt := range []struct {
			args   []string
			failed []string
		}{
			{[]string{"--", "--exclude", "*3"}, []string{"sub/f3", "top/t3"}},
			{[]string{"--", "--max-size=3500"}, []string{"sub/f4", "top/t4"}},
			{[]string{"-j", "1", "--", "-f", "- f*"}, []string{"sub/f1", "sub/f2", "sub/f3", "sub/f4"}},
		} {
			w := newWork(t)
			rels := truthTree(t, w.Src, 1000)
			r, _ := truthRun(t, w.Src, w.Dst, w.Dst, rels, tt.args...)
			if r.Code != 23 {
				t.Errorf("%v: exit %d, want 23\n%s", tt.args, r.Code, r.Stderr)
			}
			r.FailedAre(t, tt.failed...)
			r.ReasonsName(t)
			// a copy without the option, then the same run again: DEST holds them now
			truthRun(t, w.Src, w.Dst, w.Dst, rels)
			if r, _ := truthRun(t, w.Src, w.Dst, w.Dst, rels, tt.args...); r.Code != 0 {
				t.Errorf("%v over a full DEST: exit %d, want 0\n%s", tt.args, r.Code, r.Stderr)
			}
		}
	})
	t.Run("options that need a dry-run confirmation", func(t *testing.T) {
		// --no-times: an lstat cannot prove a copy, so prsync asks rsync itself
		t.Parallel()
		w := newWork(t)
		rels := truthTree(t, w.Src, 1000)
		os.MkdirAll(filepath.Join(w.Dst, "sub"), 0o755)
		chattr(t, true, filepath.Join(w.Dst, "sub"))
		r := listRun(t, w.Src, w.Dst, rels, "--", "--no-times")
		r.Exit(t, 23)
		r.FailedAre(t, "sub/f1", "sub/f2", "sub/f3", "sub/f4")
		for _, rel := range rels {
			if _, err := os.Stat(filepath.Join(w.Dst, rel)); err != nil && !strings.HasPrefix(rel, "sub/") {
				t.Errorf("%s not copied", rel)
			}
		}
		r.Identity(t, len(rels))
	})
}

// TestTruthDaemon: faults of an rsync daemon, the module's directory walked afterwards.
func TestTruthDaemon(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	if !isRoot() {
		t.Skip("the daemon cases need root (uid, chattr)")
	}
	rows := []struct {
		name     string
		module   string // module config (the daemon runs as root unless it says a uid)
		prepare  func(t testing.TB, mod string)
		args     []string // prsync args
		code     int
		failed   []string // nil: every path
		stderr   string   // a substring of stderr (the hint)
		allFail  bool
		noEvents bool
		reasons  map[string]string // path -> a substring of its path_failed reason
	}{
		{name: "immutable directory in the module",
			prepare: func(t testing.TB, mod string) {
				os.MkdirAll(filepath.Join(mod, "sub"), 0o755)
				chattr(t, true, filepath.Join(mod, "sub"))
			},
			code: 23, failed: []string{"sub/f1", "sub/f2", "sub/f3", "sub/f4"}, stderr: "immutable"},
		{name: "a module its uid cannot write", module: "uid = nobody\ngid = nogroup",
			args: []string{"-j", "2", "--chunk-files", "3"}, code: 23, allFail: true, stderr: "uid = nobody"},
		{name: "a read-only module", module: "read only = yes",
			code: 1, allFail: true, stderr: "read only"},
		{name: "a daemon-side exclude", module: "exclude = *3",
			code: 23, failed: []string{"sub/f3", "top/t3"}, stderr: "excludes"},
		{name: "an --exclude after --: rsync leaves paths out and exits 0",
			args: []string{"--", "--exclude", "*3"}, code: 23, failed: []string{"sub/f3", "top/t3"}, stderr: "--exclude after --"},
		{name: "an --exclude after -- and an immutable directory: exit 23, and what rsync did not name fails",
			prepare: func(t testing.TB, mod string) {
				os.MkdirAll(filepath.Join(mod, "sub"), 0o755)
				chattr(t, true, filepath.Join(mod, "sub"))
			},
			args: []string{"--", "--exclude", "t3"}, code: 23, failed: []string{"sub/f1", "sub/f2", "sub/f3", "sub/f4", "top/t3"}, stderr: "immutable",
			reasons: map[string]string{"top/t3": "rsync did not name it (with --exclude after --", "sub/f1": "Operation not permitted"}},
		{name: "an option the daemon refuses", module: "refuse options = compress",
			args: []string{"-z"}, code: 4, allFail: true, stderr: "refuses an option"},
		{name: "authentication required, no password given", module: "auth users = u\nsecrets file = SECRETS",
			code: 5, allFail: true, stderr: "RSYNC_PASSWORD"},
		{name: "max connections below -j", module: "max connections = 2",
			args: []string{"-j", "8", "--chunk-files", "1", "--", "--bwlimit=2m"}, code: 0, stderr: "refused a session"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel() // each row its own trees and daemon
			w := newWork(t)
			mod := filepath.Join(w.Dir, "mod")
			os.MkdirAll(mod, 0o755)
			os.Chmod(w.Dir, 0o755)
			rels := truthTree(t, w.Src, 1000)
			if row.prepare != nil {
				row.prepare(t, mod)
			}
			conf := row.module
			if strings.Contains(conf, "SECRETS") {
				sf := filepath.Join(w.Dir, "secrets")
				os.WriteFile(sf, []byte("u:secret\n"), 0o600)
				conf = strings.ReplaceAll(conf, "SECRETS", sf)
			}
			d := startDaemon(t, mod, conf)
			r, _ := truthRun(t, w.Src, d.URL(), mod, rels, row.args...)
			if r.Code != row.code {
				t.Errorf("exit %d, want %d\nstderr:\n%s", r.Code, row.code, r.Stderr)
			}
			want := row.failed
			if row.allFail {
				want = rels
			}
			r.FailedAre(t, want...)
			r.ReasonsName(t)
			for _, e := range r.OfType("path_failed") {
				if w, ok := row.reasons[fmt.Sprint(e["path"])]; ok && !strings.Contains(fmt.Sprint(e["reason"]), w) {
					t.Errorf("%s: reason %q, want it to say %q", e["path"], e["reason"], w)
				}
			}
			if !strings.Contains(r.Stderr, row.stderr) {
				t.Errorf("stderr does not say %q:\n%s", row.stderr, r.Stderr)
			}
			if row.code == 0 {
				// down to 2 by refusals; a run that then goes 3 s without one climbs a step
				// back (refusal.FarSide.Climb), which a long run on a busy machine can show
				jobs, low := r.OfType("jobs"), int64(1<<31)
				for _, j := range jobs {
					low = min(low, num(j, "new"))
					if num(j, "new") > num(j, "old") && j["reason"] != "climb" {
						t.Errorf("the limit rose but not by a climb: %v", j)
					}
				}
				if low > 2 {
					t.Errorf("the limit did not come down to the daemon's 2 connections: %v", jobs)
				}
				if n := strings.Count(r.Stderr, "refused a session"); n != 1 {
					t.Errorf("the refusal is said %d times on stderr, want once", n)
				}
			}
			noProcsLeft(t, w.Src)
		})
	}
}

// TestTruthSSHMaxStartups: sshd drops logins beyond MaxStartups; the chunks it refused are
// retried with fewer rsyncs at once, and the run ends with everything copied.
func TestTruthSSHMaxStartups(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	sshConfig, _ := startSSHD(t, "MaxStartups 3:100:3\n")
	w := newWork(t)
	rels := truthTree(t, w.Src, 20000)
	os.MkdirAll(w.Dst, 0o755)
	r, failed := truthRun(t, w.Src, "h0:"+w.Dst, w.Dst, rels, "-j", "8", "--chunk-files", "1", "--retries", "4",
		"--", "-e", "ssh -F "+sshConfig)
	if r.Code != 0 || len(failed) != 0 {
		t.Errorf("exit %d, %d failed\nstderr:\n%s", r.Code, len(failed), r.Stderr)
	}
	for _, e := range r.OfType("chunk_end") {
		if e["status"] == "retrying" && !strings.Contains(fmt.Sprint(e["error"]), "kex_exchange") &&
			!strings.Contains(fmt.Sprint(e["error"]), "Connection") {
			t.Errorf("a retry for another reason: %v", e["error"])
		}
	}
}

// TestTruthRace reproduces item 5 of the issue: an rsync that names every path on both
// streams at once. The race-built prsync must report the same outcome every time (and the
// race detector, which makes prsync exit 66, must stay silent).
func TestTruthRace(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	rels := spreadFiles(t, w.Src, 300, 7, 1)
	for run := 0; run < 6; run++ {
		r := start(t, startOpts{in: nul(rels...), env: []string{"PRSYNC_TEST_FAKE_RSYNC=both-streams"}},
			"-0", "--root", w.Src, "--no-throttle", "--rsync", fakeRsyncPath(t), "--chunk-files", "100", "-j", "3",
			"--no-quick-check", filepath.Join(w.Dst, fmt.Sprint(run))).wait(time.Minute)
		if strings.Contains(r.Stderr, "DATA RACE") {
			t.Fatalf("run %d: data race:\n%s", run, r.Stderr)
		}
		s := r.Identity(t, 300)
		if r.Code != 23 || num(s, "files_failed") != 300 || num(s, "files_transferred") != 0 {
			t.Errorf("run %d: exit %d, %d failed, %d transferred; want 23, 300, 0", run, r.Code, num(s, "files_failed"), num(s, "files_transferred"))
		}
	}
}

// TestTruthClosedStdout: the consumer of the events goes away early. prsync warns once,
// goes on copying, and exits with the code the copy earned; --failed and DEST account for
// every path; no rsync is left.
func TestTruthClosedStdout(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	src := newWork(t).Src
	rels := files(t, src, 16, 300_000)
	consumers := map[string]string{
		"head -c 1":    "head -c 1 >/dev/null",
		"head -c 300":  "head -c 300 >/dev/null",
		"head -c 1500": "head -c 1500 >/dev/null",
		"killed":       `sh -c 'head -c 700 >/dev/null; kill -KILL $$'`,
	}
	for name, consumer := range consumers {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each consumer its own DEST
			w := newWork(t)
			script := `"$0" "$@" | ` + consumer + `; exit ${PIPESTATUS[0]}`
			r := start(t, startOpts{in: nul(rels...), wrap: []string{"bash", "-c", script}},
				"-0", "--root", src, "-j", "2", "--chunk-files", "2", "--failed", w.Failed, w.Dst, "--", "--bwlimit=4m").wait(2 * time.Minute)
			if r.Code == 141 {
				t.Fatalf("prsync died of SIGPIPE\n%s", r.Stderr)
			}
			if r.Code != 0 {
				t.Errorf("exit %d, want 0 (the copy itself is fine)\n%s", r.Code, r.Stderr)
			}
			if n := strings.Count(r.Stderr, "stdout closed"); n != 1 {
				t.Errorf("%d warnings about the closed stdout, want 1:\n%s", n, r.Stderr)
			}
			if strings.Contains(r.Stderr, "prsync: status:") {
				t.Errorf("SIGPIPE was taken for a status request:\n%s", r.Stderr)
			}
			r.DestHolds(t, src, w.Dst, rels)
			noProcsLeft(t, w.Dst)
		})
	}
}

// TestTruthCtrlZ: SIGTSTP stops every rsync of the run and prsync itself; SIGCONT
// continues them; the copy completes exactly. --no-throttle: on a busy machine the
// throttle would hold groups of its own, which SIGCONT rightly leaves stopped. The stops
// and continues are waited for up to 5 s, not 1 and 2: the kernel carries them out when
// it schedules each process, later on a busy machine.
func TestTruthCtrlZ(t *testing.T) {
	needRsync(t)
	w := newWork(t)
	src, dst := w.Src, w.Dst
	rels := files(t, src, 6, 3_000_000)
	p := start(t, startOpts{in: nul(rels...)}, "-0", "--root", src, "-j", "2", "--chunk-files", "3",
		"--no-throttle", "--failed", w.Failed, dst, "--", "--bwlimit=2m")
	p.mustWaitFor("chunk_start", 30*time.Second, is("chunk_start"))
	time.Sleep(200 * time.Millisecond)
	p.signal(syscall.SIGTSTP)
	deadline := time.Now().Add(5 * time.Second)
	var states map[int]string
	for {
		states = procsMentioning(dst)
		stopped := 0
		for _, s := range states {
			if s == "T" {
				stopped++
			}
		}
		if len(states) > 0 && stopped == len(states) && procState(p.pid()) == "T" {
			break
		}
		if time.Now().After(deadline) {
			p.signal(syscall.SIGCONT)
			t.Fatalf("5 s after SIGTSTP: rsyncs %v, prsync %s; want every one stopped", states, procState(p.pid()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // stays stopped
	for pid, s := range procsMentioning(dst) {
		if s != "T" {
			t.Errorf("rsync %d is %s while the run is stopped", pid, s)
		}
	}
	p.signal(syscall.SIGCONT)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		stopped := 0
		for _, s := range procsMentioning(dst) {
			if s == "T" {
				stopped++
			}
		}
		if stopped == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d rsyncs still stopped 5 s after SIGCONT", stopped)
			break
		}
	}
	r := p.wait(time.Minute)
	r.Exit(t, 0)
	r.DestHolds(t, src, dst, rels)
	sameTree(t, src, dst)
}

// TestTruthInterrupts interrupts 40 runs (100 in make test-full) at random moments, with a
// new seed each time (every fifth gets a second SIGINT too). Each ends with exit 20 (or 0 when it finished first) and a summary, leaves
// no rsync running or stopped, and accounts for every path it read, checked against DEST.
func TestTruthInterrupts(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	src := newWork(t).Src
	var rels []string
	for i := 0; i < 30; i++ {
		rel := fmt.Sprintf("d%d/f%02d", i%3, i)
		writeFile(t, filepath.Join(src, rel), strings.Repeat("r", 1000+i*3000), 0o644)
		rels = append(rels, rel)
	}
	runs := 40
	if fullSuite() {
		runs = 100
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	delays := make([]time.Duration, runs)
	for i := range delays {
		delays[i] = time.Duration(rng.IntN(900)) * time.Millisecond
	}
	bin(t) // build before the parallel runs
	var mu sync.Mutex
	codes := map[int]int{}
	t.Run("runs", func(t *testing.T) {
		for i := 0; i < runs; i++ {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				w := newWork(t)
				p := start(t, startOpts{in: nul(rels...)}, "-0", "--root", src, "-j", "3",
					"--chunk-files", "4", "--failed", w.Failed, w.Dst, "--", "--bwlimit=3m")
				// the start event comes after prsync's signal handlers are in place; before
				// them (the Go runtime's first milliseconds) SIGINT kills any Go program, and
				// SigCgt in /proc cannot tell: the runtime sets it for SIGINT itself
				p.mustWaitFor("start", 30*time.Second, is("start"))
				time.Sleep(delays[i])
				p.signal(syscall.SIGINT)
				if i%5 == 4 {
					time.Sleep(time.Duration(i%7) * 20 * time.Millisecond)
					p.signal(syscall.SIGINT)
				}
				r := p.wait(time.Minute)
				mu.Lock()
				codes[r.Code]++
				mu.Unlock()
				if r.Code != 20 && r.Code != 0 {
					t.Errorf("SIGINT after %v: exit %d\n%s", delays[i], r.Code, r.Stderr)
				}
				r.Summary(t)
				r.DestHolds(t, src, w.Dst, rels)
				noProcsLeft(t, w.Dst)
			})
		}
	})
	t.Logf("exit codes of %d runs: %v", runs, codes)
	if codes[20] == 0 {
		t.Errorf("no run was interrupted: %v", codes)
	}
}
