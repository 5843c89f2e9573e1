package tests

// Operations (issue 14): the throttle inside a cgroup with a CPU quota, live control from
// another process, status on SIGUSR1, and the metrics file.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"
)

// cpuCgroup makes a cgroup with a quota of half a CPU (v2 cpu.max where the machine has
// it, else v1 cfs quota) and returns a command prefix that runs a program inside it. Its
// weight is the highest there is (cpu.weight, cpu.shares), so that on a busy host what
// runs in it still gets the half CPU: the quota, not the host's load, limits it.
func cpuCgroup(t *testing.T) []string {
	t.Helper()
	if !isRoot() {
		t.Skip("making a cgroup needs root")
	}
	var dir, quotaFile, quota, weightFile, weight string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dir, quotaFile, quota = fmt.Sprintf("/sys/fs/cgroup/prsync-test-%d", os.Getpid()), "cpu.max", "50000 100000"
		weightFile, weight = "cpu.weight", "10000"
	} else if _, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); err == nil {
		dir, quotaFile, quota = fmt.Sprintf("/sys/fs/cgroup/cpu/prsync-test-%d", os.Getpid()), "cpu.cfs_quota_us", "50000"
		weightFile, weight = "cpu.shares", "262144"
	} else {
		t.Skip("no cgroup v2 cpu.max and no v1 cpu controller here")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a cgroup: %v", err)
	}
	t.Cleanup(func() {
		// the test's processes are gone by now (their own cleanups ran first); move any
		// straggler out, then remove the group
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
		os.Remove(dir)
	})
	if err := os.WriteFile(filepath.Join(dir, quotaFile), []byte(quota), 0o644); err != nil {
		t.Skipf("cannot set the cgroup's quota: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, weightFile), []byte(weight), 0o644); err != nil {
		t.Skipf("cannot set the cgroup's weight: %v", err)
	}
	return []string{"sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, dir}
}

// TestOpsCgroupThrottle: inside a 0.5-CPU cgroup saturated by busy loops, prsync pauses
// (the host has room, so a host-only measure would not); the same loop outside the cgroup
// does not make it pause. --max-suspend keeps the saturated run short.
//
// On a busy host the host's scale is hot too, and a pause may then rightly say "cpu" (the
// busier scale, the host's on a tie): the test reads each pause's figures, the load it
// saw, and asserts the reason they make, and that the cgroup's own scale was hot (its
// quota used up by others than prsync) in one pause at least. Two loops in the cgroup
// make them the quota's main user whatever the host does; they stop once such a pause is
// seen, so that the rest of the copy, still walked in DEST, does not crawl through the
// quota they fill.
func TestOpsCgroupThrottle(t *testing.T) {
	needRsync(t)
	w := newWork(t)
	var names []string
	for i := 0; i < 600; i++ {
		n := fmt.Sprintf("d%d/f%04d", i%10, i)
		writeFile(t, filepath.Join(w.Src, n), strings.Repeat("c", 100+i%900), 0o644)
		names = append(names, n)
	}
	in := nul(names...)
	prefix := cpuCgroup(t)
	const suspendAt = 80.0
	args := []string{"-0", "--root", w.Src, "-j", "2", "--chunk-files", "100", "--throttle-interval", "250ms", "--max-suspend", "2s",
		"--suspend-threshold", fmt.Sprint(suspendAt), "--resume-threshold", "60"}
	// hot is the policy's rule for one scale (throttle.Decide): above the threshold, and
	// others than prsync use the headroom above it; slack allows for the events' rounding
	hot := func(cpu, own, slack float64) bool { return cpu > suspendAt-slack && cpu-own >= 100-suspendAt-slack }
	f := func(e map[string]any, k string) float64 { v, _ := e[k].(float64); return v }

	t.Run("busy loop inside the cgroup", func(t *testing.T) {
		stop := startBusy(t, 2, prefix)
		dst := filepath.Join(t.TempDir(), "dst")
		p := start(t, startOpts{in: in, wrap: prefix}, append(args, dst)...)
		p.waitFor(time.Minute, func(e map[string]any) bool {
			return e["type"] == "throttle" && e["action"] == "suspend" && hot(f(e, "cgroup_cpu_percent"), f(e, "cgroup_own_cpu_percent"), 0.5)
		})
		stop()
		r := p.wait(3 * time.Minute)
		r.Exit(t, 0)
		st, _ := r.Start(t)["cgroup"].(map[string]any)
		if st["cpus"] != 0.5 {
			t.Errorf("start event cgroup %v, want a 0.5-CPU quota", st)
		}
		var sus []map[string]any
		for _, e := range r.OfType("throttle") {
			if e["action"] == "suspend" && (e["reason"] == "cpu" || e["reason"] == "cgroup-cpu") {
				sus = append(sus, e)
			}
		}
		if len(sus) == 0 {
			t.Fatalf("prsync never paused in a saturated cgroup")
		}
		cgroupHot, hostQuiet := 0, 0
		for _, e := range sus {
			cg, host := f(e, "cgroup_cpu_percent"), f(e, "cpu_percent")
			cgHot := hot(cg, f(e, "cgroup_own_cpu_percent"), 0.5)
			hostHot := hot(host, f(e, "own_cpu_percent")+f(e, "kernel_cpu_percent"), 0.5)
			if cgHot {
				cgroupHot++
			}
			if !hostHot {
				hostQuiet++
			}
			switch {
			case e["reason"] == "cgroup-cpu" && !cgHot:
				t.Errorf("suspend %v: reason cgroup-cpu, but the cgroup's figures are not hot", e)
			case e["reason"] == "cpu" && !hostHot:
				t.Errorf("suspend %v: reason cpu, but the host's figures are not hot (the cgroup's quota is what was used up)", e)
			case e["reason"] == "cpu" && cgHot && cg > host+0.5:
				t.Errorf("suspend %v: reason cpu, but the cgroup's scale is the busier one", e)
			}
		}
		if cgroupHot == 0 {
			t.Errorf("no pause saw the cgroup's quota used up by the loops: %v", sus)
		}
		if hostQuiet == 0 {
			t.Logf("the host was busy too (%.0f%% at the first pause): every pause had the host's scale hot too, and the reason is the busier scale's", f(sus[0], "cpu_percent"))
		}
		r.Identity(t, len(names))
		sameTree(t, w.Src, dst)
	})
	t.Run("busy loop outside the cgroup", func(t *testing.T) {
		startBusy(t, 1, nil)
		dst := filepath.Join(t.TempDir(), "dst")
		r := start(t, startOpts{in: in, wrap: prefix}, append(args, dst)...).wait(3 * time.Minute)
		r.Exit(t, 0)
		for _, e := range r.OfType("throttle") {
			if e["action"] == "suspend" && e["reason"] == "cgroup-cpu" {
				t.Errorf("a busy loop outside the cgroup made prsync pause: %v", e)
			}
		}
		r.Identity(t, len(names))
		sameTree(t, w.Src, dst)
	})
}

// ctl runs prsync ctl against the run with socket sock, and returns stdout and the code.
func ctl(t *testing.T, sock string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin(t), append([]string{"ctl", "--socket", sock}, args...)...)
	cmd.Env = cleanEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return out.String() + errb.String(), code
}

// runningRsyncs counts the rsync process groups copying into dst, running and stopped
// (each rsync is a group of its processes: client, its forks, the pipe's server).
func runningRsyncs(dst string) (running, stopped int) {
	groups := map[int]string{}
	for pid, st := range procsMentioning(dst) {
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		argv0, _, _ := bytes.Cut(cl, []byte{0})
		if filepath.Base(string(argv0)) != "rsync" {
			continue // prsync itself
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || st == "Z" {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 {
			continue
		}
		g, _ := strconv.Atoi(string(f[2]))
		if st := procState(g); st == "" || st == "Z" {
			continue // the leader is gone: a group on its way out
		}
		if groups[g] != "T" {
			groups[g] = st
		}
	}
	for _, st := range groups {
		if st == "T" {
			stopped++
		} else {
			running++
		}
	}
	return running, stopped
}

// waitRunning waits until cond holds of the rsyncs copying into dst.
func waitRunning(t *testing.T, dst, what string, d time.Duration, cond func(running, stopped int) bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r, s := runningRsyncs(dst)
		if cond(r, s) {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for pid, st := range procsMentioning(dst) {
				stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
				fmt.Fprintf(&b, "%d %s %.60s\n", pid, st, stat)
			}
			t.Fatalf("%s: %d running, %d stopped after %v\n%s", what, r, s, d, b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watchRunning looks at the rsyncs copying into dst every 20 ms for d, and returns the
// most it saw running at once and how many looks it took.
func watchRunning(dst string, d time.Duration) (most, looks int) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		r, _ := runningRsyncs(dst)
		most = max(most, r)
		looks++
	}
	return most, looks
}

// TestOpsLiveControl: from a second process, -j 4 -> 1 -> 6 is obeyed, pause stops every
// group within one interval and resume continues them, status answers (and SIGUSR1 too),
// and another uid is refused.
func TestOpsLiveControl(t *testing.T) {
	needRsync(t)
	w := newWork(t)
	names := files(t, w.Src, 40, 600_000)
	run := filepath.Join(w.Dir, "run")
	os.Mkdir(run, 0o700)
	p := start(t, startOpts{in: nul(names...), env: []string{"XDG_RUNTIME_DIR=" + run}},
		"-0", "--root", w.Src, "-j", "4", "--chunk-files", "1", "--no-throttle", "--throttle-interval", "200ms",
		"--failed", w.Failed, w.Dst, "--", "--bwlimit=500k")
	st := p.mustWaitFor("start", 30*time.Second, is("start"))
	sock := fmt.Sprint(st["control_socket"])
	if !strings.HasPrefix(sock, run+"/prsync/") {
		t.Fatalf("control socket %q, want one in $XDG_RUNTIME_DIR/prsync", sock)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode: %v %v", fi, err)
	}
	// the waits are long because they end as soon as their condition holds: only a broken
	// run pays for them, and a busy machine may need them
	waitRunning(t, w.Dst, "-j 4", 30*time.Second, func(r, _ int) bool { return r == 4 })

	if out, code := ctl(t, sock, "jobs", "1"); code != 0 || !strings.Contains(out, "4 -> 1") {
		t.Fatalf("ctl jobs 1: %d %q", code, out)
	}
	waitRunning(t, w.Dst, "-j 1 (running ones finish)", 30*time.Second, func(r, _ int) bool { return r == 1 })
	// watched for 1.5 s, not looked at once: between one chunk's rsync and the next there
	// is a moment with none, longer on a busy machine, so one look may see 0; what -j 1
	// means is never more than one, while the copy goes on
	if most, seen := watchRunning(w.Dst, 1500*time.Millisecond); most != 1 {
		t.Errorf("at -j 1, up to %d rsyncs at once (%d looks)", most, seen)
	}
	if out, code := ctl(t, sock, "jobs", "6"); code != 0 || !strings.Contains(out, "1 -> 6") {
		t.Fatalf("ctl jobs 6: %d %q", code, out)
	}
	waitRunning(t, w.Dst, "-j 6", 30*time.Second, func(r, _ int) bool { return r == 6 })

	// pause stops every group before ctl has its answer; the kernel carries the stops out
	// when it schedules each process, which on a busy machine takes longer: the bound is
	// one interval plus as long as ctl itself took, the machine's slowness as it is now
	began := time.Now()
	if out, code := ctl(t, sock, "pause"); code != 0 {
		t.Fatalf("ctl pause: %d %q", code, out)
	}
	took := time.Since(began)
	waitRunning(t, w.Dst, fmt.Sprintf("pause, within one interval (+ %v, as long as ctl took)", took.Round(time.Millisecond)),
		300*time.Millisecond+took, func(r, s int) bool { return r == 0 && s > 0 })
	time.Sleep(500 * time.Millisecond)
	if r, _ := runningRsyncs(w.Dst); r != 0 {
		t.Errorf("%d rsyncs running while paused (no new one may start)", r)
	}
	out, code := ctl(t, sock, "status", "--json")
	if code != 0 || !strings.Contains(out, `"paused":true`) || !strings.Contains(out, `"jobs":6`) {
		t.Errorf("ctl status while paused: %d %q", code, out)
	}
	if out, code := ctl(t, sock, "resume"); code != 0 {
		t.Fatalf("ctl resume: %d %q", code, out)
	}
	waitRunning(t, w.Dst, "resume", 2*time.Second+took, func(r, s int) bool { return r > 0 && s == 0 })

	p.signal(syscall.SIGUSR1)
	p.mustWaitFor("status event (SIGUSR1)", 30*time.Second, is("status", "by", "signal"))

	if out, code := ctl(t, sock, "jobs", "0"); code != 1 {
		t.Errorf("ctl jobs 0: %d %q, want a refusal", code, out)
	}
	if isRoot() {
		// another uid: the socket is opened up for this one check, so that the uid
		// check, not the file's mode, is what refuses
		openUp(t, filepath.Dir(sock))
		os.Chmod(sock, 0o666)
		copyBin := filepath.Join(w.Dir, "prsync-ctl")
		os.WriteFile(copyBin, mustRead(t, bin(t)), 0o755)
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", copyBin, "ctl", "--socket", sock, "pause")
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "prsync: error:") || !strings.Contains(string(out), "may not control") {
			t.Errorf("nobody's prsync ctl pause: %v %q; want a refusal", err, out)
		}
		os.Chmod(sock, 0o600)
		if r, s := runningRsyncs(w.Dst); s > 0 && r == 0 {
			t.Errorf("the refused pause paused the run")
		}
	}

	r := p.wait(2 * time.Minute)
	r.Exit(t, 0)
	r.DestHolds(t, w.Src, w.Dst, names)
	var changes []string
	for _, e := range r.OfType("control") {
		changes = append(changes, fmt.Sprintf("%v:%v->%v", e["what"], e["old"], e["new"]))
	}
	if strings.Join(changes, " ") != "jobs:4->1 jobs:1->6 pause:running->paused resume:paused->running" {
		t.Errorf("control events %q", changes)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("the control socket is left behind")
	}
}

// TestOpsMetrics: the metrics file parses as Prometheus text format (with the client
// library's own parser) and its counters agree with the summary.
func TestOpsMetrics(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	var names []string
	for i := 0; i < 30; i++ {
		n := fmt.Sprintf("m%02d", i)
		writeFile(t, filepath.Join(w.Src, n), strings.Repeat("m", 1000*i), 0o644)
		names = append(names, n)
	}
	names = append(names, "gone")
	mf := filepath.Join(w.Dir, "prsync.prom")
	r := start(t, startOpts{in: nul(names...)}, "-0", "--root", w.Src, "--chunk-files", "5",
		"--throttle-interval", "100ms", "--metrics-file", mf, w.Dst).wait(time.Minute)
	r.Exit(t, 24)
	f, err := os.Open(mf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(pmodel.LegacyValidation)
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("not Prometheus text format: %v", err)
	}
	val := func(name, label, value string) float64 {
		fam := fams[name]
		if fam == nil {
			t.Fatalf("no %s in the metrics file", name)
		}
		for _, m := range fam.Metric {
			ok := label == ""
			for _, l := range m.Label {
				if l.GetName() == label && l.GetValue() == value {
					ok = true
				}
			}
			if !ok {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
		t.Fatalf("no %s{%s=%q}", name, label, value)
		return 0
	}
	s := r.Summary(t)
	for status, key := range map[string]string{"transferred": "files_transferred", "up_to_date": "files_up_to_date",
		"failed": "files_failed", "vanished": "files_vanished", "not_done": "files_not_done"} {
		if got := val("prsync_files_total", "status", status); got != float64(num(s, key)) {
			t.Errorf("prsync_files_total{status=%q} %v, summary %s %d", status, got, key, num(s, key))
		}
	}
	if got := val("prsync_bytes_transferred_total", "", ""); got != float64(num(s, "bytes_transferred")) {
		t.Errorf("bytes transferred %v, summary %d", got, num(s, "bytes_transferred"))
	}
	if got := val("prsync_files_read_total", "", ""); got != float64(num(s, "files")) {
		t.Errorf("files read %v, summary %d", got, num(s, "files"))
	}
	if val("prsync_up", "", "") != 0 || val("prsync_exit_code", "", "") != 24 || val("prsync_input_done", "", "") != 1 {
		t.Errorf("end of run: up %v, exit_code %v, input_done %v", val("prsync_up", "", ""), val("prsync_exit_code", "", ""), val("prsync_input_done", "", ""))
	}
	var left []string
	ents, _ := os.ReadDir(w.Dir)
	for _, e := range ents {
		if e.Name() != "src" && e.Name() != "dst" && e.Name() != "prsync.prom" {
			left = append(left, e.Name())
		}
	}
	if len(left) > 0 {
		t.Errorf("files left beside the metrics file: %v", left)
	}
}
