package tests

// A real single-node Slurm (Debian's slurmctld, slurmd, slurm-client and munge) runs the
// Slurm recipe of docs/scale-out.md, the file docs/slurm-array.sh itself, as a job array.
// See ../shared/SLURM.md. Everything is private to the test: munged on its own socket and pid
// file, slurmctld and slurmd on free ports with SLURM_CONF pointing into t.TempDir; nothing
// under /etc is written. Daemons are stopped by PID.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// scaleLook finds a program on PATH or in the sbin directories (PATH may lack them).
func scaleLook(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/usr/local/sbin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// scaleNeed returns the paths of the programs, installing the Debian packages first when they
// are missing and PRSYNC_TEST_INSTALL=1; otherwise it skips the test with the reason.
func scaleNeed(t *testing.T, what, pkgs string, progs ...string) map[string]string {
	t.Helper()
	find := func() (map[string]string, []string) {
		found, missing := map[string]string{}, []string(nil)
		for _, p := range progs {
			if path := scaleLook(p); path != "" {
				found[p] = path
			} else {
				missing = append(missing, p)
			}
		}
		return found, missing
	}
	found, missing := find()
	if len(missing) == 0 {
		return found
	}
	if os.Getenv("PRSYNC_TEST_INSTALL") != "1" {
		t.Skipf("%s: %s not installed; run with PRSYNC_TEST_INSTALL=1 (as root, Debian) to apt-get install %s", what, strings.Join(missing, ", "), pkgs)
	}
	if os.Geteuid() != 0 || scaleLook("apt-get") == "" {
		t.Skipf("%s: %s not installed, and apt-get cannot install %s here (not root, or not Debian)", what, strings.Join(missing, ", "), pkgs)
	}
	install := func() ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "--no-install-recommends"}, strings.Fields(pkgs)...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	out, err := install()
	if err != nil { // maybe the package lists were never fetched
		exec.Command("apt-get", "update").Run()
		out, err = install()
	}
	if err != nil {
		t.Skipf("%s: apt-get install %s failed: %v\n%s", what, pkgs, err, lastLines(out, 5))
	}
	if found, missing = find(); len(missing) > 0 {
		t.Skipf("%s: %s still missing after apt-get install %s", what, strings.Join(missing, ", "), pkgs)
	}
	return found
}

func lastLines(b []byte, n int) string {
	ls := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// scaleDaemon is a daemon the test started: a child (cmd) or a self-daemonized process (pid file).
type scaleDaemon struct {
	name    string
	pid     int
	cmd     *exec.Cmd
	waited  chan struct{}
	stopped bool
}

func startChildDaemon(t *testing.T, name string, env []string, logFile string, argv ...string) *scaleDaemon {
	t.Helper()
	lf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a ^C to the test is not theirs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	d := &scaleDaemon{name: name, pid: cmd.Process.Pid, cmd: cmd, waited: make(chan struct{})}
	go func() { cmd.Wait(); close(d.waited) }()
	t.Cleanup(func() { d.stop(t) })
	return d
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(st, ')'); i > 0 && len(st) > i+2 && st[i+2] == 'Z' {
		return false
	}
	return true
}

// stop sends TERM to the daemon's PID, waits up to 10 s, then KILLs it; it reports failure.
func (d *scaleDaemon) stop(t *testing.T) {
	t.Helper()
	if d.stopped || d.pid <= 0 {
		return
	}
	d.stopped = true
	gone := func() bool {
		if d.cmd != nil {
			select {
			case <-d.waited:
				return true
			default:
				return false
			}
		}
		return !alive(d.pid)
	}
	syscall.Kill(d.pid, syscall.SIGTERM)
	for i := 0; i < 200 && !gone(); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if !gone() {
		syscall.Kill(d.pid, syscall.SIGKILL)
		for i := 0; i < 40 && !gone(); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("%s (pid %d) ignored SIGTERM for 10 s", d.name, d.pid)
	}
	if alive(d.pid) {
		t.Errorf("%s (pid %d) is still running", d.name, d.pid)
	}
}

// readPid waits for a pid file.
func readPid(path string, wait time.Duration) (int, error) {
	var err error
	for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		var b []byte
		if b, err = os.ReadFile(path); err == nil {
			var pid int
			if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("pid file %s: %v", path, err)
}

// slurm is a running single-node cluster.
type slurm struct {
	dir, host string
	env       []string
	bin       map[string]string
	daemons   []*scaleDaemon // in start order
}

func (s *slurm) run(t *testing.T, extraEnv []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin[name], args...)
	cmd.Env = append(append([]string(nil), s.env...), extraEnv...)
	cmd.Dir = s.dir
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// logs returns the daemons' logs and the job outputs, for a failure message.
func (s *slurm) logs() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(s.dir, "log", "*"))
	outs, _ := filepath.Glob(filepath.Join(s.dir, "slurm-*.out"))
	for _, f := range append(files, outs...) {
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "==> %s <==\n%s\n", f, lastLines(data, 15))
	}
	return b.String()
}

// stopAll stops slurmd, slurmctld and munged (the reverse of the start order), by PID.
func (s *slurm) stopAll(t *testing.T) {
	for i := len(s.daemons) - 1; i >= 0; i-- {
		s.daemons[i].stop(t)
	}
}

// startSlurm starts munged, slurmctld and slurmd and waits until the node is idle.
func startSlurm(t *testing.T) *slurm {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("Slurm: needs root (munged runs as user munge, slurmd as root)")
	}
	bins := scaleNeed(t, "Slurm", "slurmctld slurmd slurm-client munge",
		"slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol", "munged", "munge", "unmunge", "runuser")
	mu, err := user.Lookup("munge")
	if err != nil {
		t.Skipf("Slurm: no munge user: %v", err)
	}
	if _, err := os.Stat("/etc/munge/munge.key"); err != nil {
		t.Skipf("Slurm: munge has no key: %v", err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")

	d := t.TempDir()
	// munged (user munge) and the tasks must reach the scratch dir
	for _, p := range []string{d, filepath.Dir(d)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"state", "spool", "log"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	md := filepath.Join(d, "munge")
	uid, _ := strconv.Atoi(mu.Uid)
	gid, _ := strconv.Atoi(mu.Gid)
	if err := os.Mkdir(md, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(md, uid, gid); err != nil {
		t.Fatal(err)
	}
	s := &slurm{dir: d, host: host, bin: bins}

	// munged: private socket and pid file; it daemonizes, so its PID comes from the pid file
	sock, pidFile := filepath.Join(md, "munge.socket"), filepath.Join(md, "munged.pid")
	out, err := exec.Command(bins["runuser"], "-u", "munge", "--", bins["munged"],
		"--socket="+sock, "--pid-file="+pidFile, "--log-file="+filepath.Join(md, "munged.log"),
		"--seed-file="+filepath.Join(md, "munged.seed")).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(md, "munged.log"))
		t.Fatalf("munged: %v\n%s\n%s", err, out, lastLines(log, 10))
	}
	pid, err := readPid(pidFile, 5*time.Second)
	if err != nil {
		t.Fatalf("munged: %v", err)
	}
	munged := &scaleDaemon{name: "munged", pid: pid}
	s.daemons = append(s.daemons, munged)
	t.Cleanup(func() { munged.stop(t) })
	check := exec.Command("sh", "-c", `"$1" -n --socket="$3" | "$2" --socket="$3"`, "sh", bins["munge"], bins["unmunge"], sock)
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("munge -n | unmunge: %v\n%s", err, out)
	}

	conf := filepath.Join(d, "slurm.conf")
	cfg := fmt.Sprintf(`ClusterName=prsynctest
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[3]d
SlurmdPort=%[4]d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%[5]s
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
StateSaveLocation=%[2]s/state
SlurmdSpoolDir=%[2]s/spool
SlurmctldPidFile=%[2]s/slurmctld.pid
SlurmdPidFile=%[2]s/slurmd.pid
SlurmctldLogFile=%[2]s/log/slurmctld.log
SlurmdLogFile=%[2]s/log/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=%[1]s NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=%[1]s Default=YES MaxTime=INFINITE State=UP
`, host, d, freePort(t), freePort(t), sock)
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s.env = cleanEnv("SLURM_CONF=" + conf)

	s.daemons = append(s.daemons,
		startChildDaemon(t, "slurmctld", s.env, filepath.Join(d, "log", "slurmctld.stdout"), bins["slurmctld"], "-D"),
		startChildDaemon(t, "slurmd", s.env, filepath.Join(d, "log", "slurmd.stdout"), bins["slurmd"], "-D", "-N", host))

	var state string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		state, _ = s.run(t, nil, "sinfo", "-h", "-n", host, "-o", "%t")
		if state == "idle" {
			return s
		}
		for _, dm := range s.daemons[1:] {
			select {
			case <-dm.waited:
				t.Fatalf("%s exited\n%s", dm.name, s.logs())
			default:
			}
		}
	}
	t.Fatalf("node %s is %q after 30 s, not idle\n%s", host, state, s.logs())
	return nil
}

// submit runs sbatch and returns the job id.
func (s *slurm) submit(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, err := s.run(t, env, "sbatch", append([]string{"--parsable"}, args...)...)
	if err != nil {
		t.Fatalf("sbatch %v: %v\n%s\n%s", args, err, out, s.logs())
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	if _, err := strconv.Atoi(id); err != nil {
		t.Fatalf("sbatch printed %q", out)
	}
	return id
}

// wait polls squeue until the job is gone (sbatch --wait polls only every ~10 s), then
// returns each array task's JobState and ExitCode from scontrol (no accounting, no sacct).
func (s *slurm) wait(t *testing.T, job string, timeout time.Duration) map[string]string {
	t.Helper()
	for end := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		out, err := s.run(t, nil, "squeue", "-h", "-j", job)
		if err == nil && out == "" || err != nil && strings.Contains(out, "Invalid job id") {
			break
		}
		if time.Now().After(end) {
			sc, _ := s.run(t, nil, "scontrol", "show", "job", job)
			t.Fatalf("job %s still queued after %v:\n%s\n%s\n%s", job, timeout, out, sc, s.logs())
		}
	}
	out, err := s.run(t, nil, "scontrol", "-o", "show", "job", job)
	if err != nil {
		t.Fatalf("scontrol show job %s: %v\n%s", job, err, out)
	}
	res := map[string]string{}
	re := regexp.MustCompile(`\b(ArrayTaskId|JobState|ExitCode)=(\S+)`)
	for _, line := range strings.Split(out, "\n") {
		f := map[string]string{}
		for _, m := range re.FindAllStringSubmatch(line, -1) {
			f[m[1]] = m[2]
		}
		if f["ArrayTaskId"] != "" {
			res[f["ArrayTaskId"]] = f["JobState"] + " " + f["ExitCode"]
		}
	}
	return res
}

func TestSlurmArray(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	s := startSlurm(t)
	defer s.stopAll(t)

	script, err := filepath.Abs("../docs/slurm-array.sh")
	if err != nil {
		t.Fatal(err)
	}
	prsync := bin(t)
	if err := os.Chmod(filepath.Dir(prsync), 0o755); err != nil { // readable by the tasks
		t.Fatal(err)
	}
	src, dest, logs := filepath.Join(s.dir, "src"), filepath.Join(s.dir, "dest"), filepath.Join(s.dir, "logs")
	list, paths := scaleTree(t, src, 200)
	lf := writeList(t, s.dir, list)
	env := []string{"LIST=" + lf, "SRC=" + src, "DEST=" + dest, "LOGDIR=" + logs, "PRSYNC=" + prsync}

	// the recipe's #SBATCH lines ask for --array=0-7 and 4 CPUs a task; this node has 2 CPUs
	job := s.submit(t, env, "--array=0-3", "--cpus-per-task=1", "--chdir="+s.dir,
		"--output="+filepath.Join(s.dir, "slurm-%A_%a.out"), script)
	states := s.wait(t, job, 60*time.Second)
	if len(states) != 4 {
		t.Errorf("job %s: %d array tasks, want 4: %v", job, len(states), states)
	}
	for id, st := range states {
		if st != "COMPLETED 0:0" {
			t.Errorf("array task %s: %s, want COMPLETED 0:0\n%s", id, st, s.logs())
		}
	}

	var files, transferred int64
	var logFiles []string
	for k := 0; k < 4; k++ {
		lp := filepath.Join(logs, fmt.Sprintf("prsync.%d.jsonl", k))
		data, err := os.ReadFile(lp)
		if err != nil {
			t.Errorf("task %d: %v\n%s", k, err, s.logs())
			continue
		}
		logFiles = append(logFiles, lp)
		r := &Run{Stdout: string(data), Events: parseEvents(t, data)}
		sum := r.Identity(t, len(scaleWant(paths, k, 4)))
		checkShardFields(t, r, k, 4)
		if num(sum, "exit_code") != 0 {
			t.Errorf("task %d: summary exit_code %d", k, num(sum, "exit_code"))
		}
		files += num(sum, "files")
		transferred += num(sum, "files_transferred")
		if fl, err := os.ReadFile(filepath.Join(logs, fmt.Sprintf("failed.%d", k))); err != nil || len(fl) != 0 {
			t.Errorf("task %d: --failed list: %v, %q", k, err, fl)
		}
	}
	if files != int64(len(paths)) || transferred != int64(len(paths)) {
		t.Errorf("the 4 summaries add up to files %d, transferred %d; want %d", files, transferred, len(paths))
	}
	sameTree(t, src, dest)
	if m := runJqTotals(t, logFiles...); m != nil && (num(m, "files") != int64(len(paths)) || fmt.Sprint(m["shards"]) != "[0 1 2 3]") {
		t.Errorf("jq totals: %v", m)
	}

	// the documented re-run of one task keeps N with SHARDS: its paths are all up to date
	job2 := s.submit(t, append(env, "SHARDS=4"), "--array=2", "--cpus-per-task=1", "--chdir="+s.dir,
		"--output="+filepath.Join(s.dir, "slurm-%A_%a.out"), script)
	if st := s.wait(t, job2, 30*time.Second); st["2"] != "COMPLETED 0:0" {
		t.Errorf("re-run of task 2: %v", st)
	}
	data, err := os.ReadFile(filepath.Join(logs, "prsync.2.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{Events: parseEvents(t, data)}
	checkShardFields(t, r, 2, 4)
	want := len(scaleWant(paths, 2, 4))
	r.Identity(t, want)
	r.Counts(t, map[string]int64{"files_up_to_date": int64(want)}) // the re-run of task 2

	s.stopAll(t)
	for _, d := range s.daemons {
		if alive(d.pid) {
			t.Errorf("%s (pid %d) still runs after stop", d.name, d.pid)
		}
	}
	noProcsLeft(t, s.dir)
}
