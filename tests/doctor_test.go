package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// doctorRun is one prsync doctor: its lines on stdout, by check name, and its exit code.
type doctorRun struct {
	lines  []string
	byName map[string]string // check name → its whole line
	code   int
	stderr string
}

// runDoctor runs prsync doctor with args and the list on stdin, in dir.
func runDoctor(t *testing.T, dir string, stdin []byte, args ...string) *doctorRun {
	t.Helper()
	d := &doctorRun{byName: map[string]string{}}
	var mu sync.Mutex
	// a runtime directory of its own: doctor names the user's running prsyncs, when a
	// daemon refuses it, from their control sockets, and the suite's others are not its
	run := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	p := start(t, startOpts{dir: dir, in: stdin, env: []string{"XDG_RUNTIME_DIR=" + run}, onLine: func(l []byte) {
		mu.Lock()
		defer mu.Unlock()
		d.lines = append(d.lines, string(l))
	}}, append([]string{"doctor"}, args...)...)
	r := p.wait(time.Minute)
	d.code, d.stderr = r.Code, r.Stderr
	for _, l := range d.lines {
		if f := strings.Fields(l); len(f) > 1 {
			d.byName[strings.TrimSuffix(f[1], ":")] = l
		}
	}
	return d
}

// status returns the status word of a check's line, or "" when it has none.
func (d *doctorRun) status(name string) string {
	if f := strings.Fields(d.byName[name]); len(f) > 0 {
		return f[0]
	}
	return ""
}

func (d *doctorRun) String() string {
	return fmt.Sprintf("exit %d\n%s\nstderr: %s", d.code, strings.Join(d.lines, "\n"), d.stderr)
}

// rsyncWrapper writes a script that says it is rsync 3.4.3 to --version and runs the real
// rsync otherwise.
func rsyncWrapper(t *testing.T) string {
	t.Helper()
	real, err := exec.LookPath("rsync")
	if err != nil {
		t.Skip("rsync is not installed")
	}
	p := filepath.Join(t.TempDir(), "rsync-3.4.3")
	script := fmt.Sprintf(`#!/bin/sh
for a in "$@"; do
	if [ "$a" = --version ]; then
		echo 'rsync  version 3.4.3  protocol version 32'
		echo 'Copyright (C) 1996-2026 by Andrew Tridgell, Wayne Davison, and others.'
		exit 0
	fi
done
exec %s "$@"
`, real)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A misconfigured run: an rsync that says 3.4.3, a source with a hard-link pair and a
// sparse file and no -H or -S, and a daemon module with max connections = 2 at -j 8.
// doctor names each, leaves DEST and the daemon as they were, and a run afterwards gets
// the daemon's slots.
func TestDoctorMisconfigured(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	src, dst := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(src, "a"), "linked", 0o644)
	if err := os.Link(filepath.Join(src, "a"), filepath.Join(src, "b")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "plain"), "plain", 0o644)
	if err := exec.Command("truncate", "-s", "16M", filepath.Join(src, "holes")).Run(); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, dst, "max connections = 2")
	list := nul("a", "b", "plain", "holes")
	wrapper := rsyncWrapper(t)

	// --suspend-threshold 100 never pauses: a busy machine's throttle-now warning is not this test's
	r := runDoctor(t, "", list, "-0", "-j", "8", "--rsync", wrapper, "-C", src, "--suspend-threshold", "100", d.URL())
	t.Logf("prsync doctor:\n%s", r)
	if r.code != 0 || r.stderr != "" {
		t.Errorf("warnings only: want exit 0 and no stderr\n%s", r)
	}
	want := map[string][]string{
		"rsync-local":        {"warning", "is GNU rsync 3.4.3", "issues/910", "fix: use rsync 3.4.4 or newer"},
		"rsync-remote":       {"ok", fmt.Sprintf("127.0.0.1:%d speaks protocol 32", d.Port)},
		"remote-connections": {"warning", "admitted 2 of 8 connections at once (max connections = 2", "below -j 8", "fix: use -j 2"},
		"source":             {"ok", "4 paths, 16.78 MB; examined all of them"},
		"source-hard-links":  {"warning", "2 of the 4 paths sampled are hard links", "-H is off", "fix: add -H after --"},
		"source-sparse":      {"warning", "1 of the 4 paths sampled are sparse", filepath.Join(src, "holes"), "fix: add -S after --"},
		"dest-space":         {"ok", "is remote"},
	}
	for name, subs := range want {
		line := r.byName[name]
		if r.status(name) != subs[0] {
			t.Errorf("%s: want %s, got %q", name, subs[0], line)
		}
		for _, s := range subs[1:] {
			if !strings.Contains(line, s) {
				t.Errorf("%s: want %q in %q", name, s, line)
			}
		}
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 0 {
		t.Errorf("doctor wrote into the daemon's module: %v", ents)
	}

	// --json: one object with the same checks
	j := runDoctor(t, "", list, "-0", "-j", "8", "--rsync", wrapper, "-C", src, "--suspend-threshold", "100", "--json", d.URL())
	var obj struct {
		OK       bool `json:"ok"`
		Errors   int  `json:"errors"`
		Warnings int  `json:"warnings"`
		Checks   []struct{ Name, Status, Message, Fix string }
	}
	if len(j.lines) != 1 || json.Unmarshal([]byte(j.lines[0]), &obj) != nil {
		t.Fatalf("--json: want one JSON line\n%s", j)
	}
	if !obj.OK || obj.Errors != 0 || obj.Warnings != 4 || len(obj.Checks) != len(r.lines) {
		t.Errorf("--json: %+v\n%s", obj, j)
	}

	// the slots were given back: a run at -j 2 copies everything, with -H and -S
	run := runPrsync(t, "", list, "-0", "-j", "2", "-C", src, d.URL(), "--", "-HS")
	run.Exit(t, 0)
	run.Identity(t, 4)
	var a, b syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(dst, "a"), &a); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Lstat(filepath.Join(dst, "b"), &b); err != nil || a.Ino != b.Ino {
		t.Errorf("DEST's a and b are not one inode: %v", err)
	}
	var h syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(dst, "holes"), &h); err != nil || h.Size != 16<<20 || h.Blocks*512 >= h.Size/2 {
		t.Errorf("DEST's holes: size %d, %d blocks (%v): want 16 MiB, sparse", h.Size, h.Blocks, err)
	}
}

// A DEST on a full file system is an error, and doctor creates nothing there.
func TestDoctorFullDest(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	mnt := t.TempDir()
	mountTmpfs(t, mnt, "size=1m")
	// fill it
	fh, err := os.Create(filepath.Join(mnt, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = fh.Write(make([]byte, 64<<10))
	}
	fh.Close()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "f"), strings.Repeat("x", 100<<10), 0o644)

	r := runDoctor(t, "", []byte("f\n"), "-C", src, filepath.Join(mnt, "backup"))
	t.Logf("prsync doctor:\n%s", r)
	if r.code != 1 || r.status("dest-space") != "error" || !strings.Contains(r.byName["dest-space"], "the list holds 102.40 kB and "+mnt+" has 0 B free") {
		t.Errorf("want exit 1 and a dest-space error\n%s", r)
	}
	if r.status("dest-writable") != "ok" || r.status("dest-inodes") != "ok" {
		t.Errorf("want the rest of DEST ok\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(mnt, "backup")); err == nil {
		t.Error("doctor created DEST")
	}

	// --sizes gives the size without an lstat
	r = runDoctor(t, "", []byte("2000000\tf\n"), "--sizes", "-C", src, filepath.Join(mnt, "backup"))
	if r.code != 1 || !strings.Contains(r.byName["dest-space"], "the list holds 2.00 MB") {
		t.Errorf("--sizes: want the list's own size\n%s", r)
	}
}

// TestDoctorThrottleNow: doctor samples the machine as the run's throttle would, and says
// whether the run would be paused at once. The hogs fill every core; a threshold of 30 is
// far below what they make, whatever else the machine runs, and one of 100 can never be
// crossed.
func TestDoctorThrottleNow(t *testing.T) {
	needRsync(t)
	if runtime.GOOS != "linux" {
		t.Skip("own CPU is measured on Linux only")
	}
	stopHog := startHog(t)
	time.Sleep(200 * time.Millisecond) // the hogs are running
	r := runDoctor(t, "", nil, "--suspend-threshold", "30", "--resume-threshold", "20", t.TempDir())
	t.Logf("prsync doctor under the hogs:\n%s", r)
	line := r.byName["throttle-now"]
	if r.status("throttle-now") != "warning" || r.code != 0 {
		t.Errorf("throttle-now under the hogs: want a warning (and exit 0), got exit %d: %q", r.code, line)
	}
	for _, want := range []string{"the machine now (a 1s sample): CPU ", "load ", "the throttle would pause the run's rsyncs at once: ",
		"above --suspend-threshold 30", "; fix: to pause less, raise --suspend-threshold", "--no-throttle"} {
		if !strings.Contains(line, want) {
			t.Errorf("throttle-now lacks %q: %q", want, line)
		}
	}
	r = runDoctor(t, "", nil, "--suspend-threshold", "30", "--resume-threshold", "20", "--no-throttle", t.TempDir())
	if line := r.byName["throttle-now"]; r.status("throttle-now") != "ok" || !strings.Contains(line, "--no-throttle: the run never pauses") {
		t.Errorf("throttle-now with --no-throttle: %q", line)
	}
	stopHog()
	r = runDoctor(t, "", nil, "--suspend-threshold", "100", t.TempDir())
	if line := r.byName["throttle-now"]; r.status("throttle-now") != "ok" || !strings.Contains(line, "rsyncs would start") {
		t.Errorf("throttle-now with --suspend-threshold 100: %q", line)
	}
}
