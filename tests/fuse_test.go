package tests

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountSSHFS mounts dir at a new mount point with sshfs, served by a local sftp-server that
// sshfs runs in place of ssh (-o ssh_command), so no sshd is needed, and returns the mount
// point and the PIDs of sshfs and of the ssh it runs (which it double-forks, so that it is
// not its child). sshfs runs in the foreground (-f), as the test's child; cleanup
// unmounts it and stops it by its PID. sshsh is a shell fragment run (in the background)
// by the ssh command before it becomes the sftp-server: work of the ssh that serves the
// mount.
func mountSSHFS(t *testing.T, dir, sshsh string) (mnt string, pids []int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sshfs: needs root here (/dev/fuse and mount)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("sshfs: no /dev/fuse")
	}
	bins := scaleNeed(t, "sshfs", "sshfs openssh-sftp-server", "sshfs", "fusermount")
	var server string
	for _, p := range []string{"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/lib/ssh/sftp-server"} {
		if _, err := os.Stat(p); err == nil {
			server = p
		}
	}
	if server == "" {
		t.Skip("sshfs: no sftp-server (apt-get install openssh-sftp-server)")
	}
	d := t.TempDir()
	mnt = filepath.Join(d, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(d, "ssh")
	pidFile := filepath.Join(d, "ssh.pid")
	script := "#!/bin/sh\n# called as ssh [options] host -s sftp: the options are sshfs's, ignored\necho $$ >" + pidFile + "\n"
	if sshsh != "" {
		script += "( " + sshsh + " ) </dev/null >/dev/null 2>&1 &\n"
	}
	script += "exec " + server + "\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bins["sshfs"], "-f", "-o", "ssh_command="+fake, "localhost:"+dir, mnt)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a ^C to the test is not its
	if err := cmd.Start(); err != nil {
		t.Skipf("sshfs: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		exec.Command(bins["fusermount"], "-u", "-z", mnt).Run()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // its group: sshfs and the ssh it ran
			<-exited
		}
	})
	up := func() bool { _, err := os.Stat(pidFile); return err == nil && fuseMounted(mnt) }
	for deadline := time.Now().Add(10 * time.Second); !up(); time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			t.Skipf("sshfs did not mount: %s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshfs did not mount %s in 10 s: %s", mnt, stderr.String())
		}
	}
	b, err := os.ReadFile(pidFile)
	ssh, err2 := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || err2 != nil {
		t.Fatalf("the ssh's PID: %v %v", err, err2)
	}
	return mnt, []int{cmd.Process.Pid, ssh}
}

// fuseMounted reports whether the mount table lists dir as a FUSE mount point.
func fuseMounted(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[4] == dir && strings.Contains(sc.Text(), " - fuse") {
			return true
		}
	}
	return false
}

// TestFUSEOwnCPU: the sshfs that DEST, or the source root, is mounted with, and the ssh it
// runs, count as prsync's own CPU, as a daemon on this machine does: their work is the
// copy's (issue 45). Before, they were other load, and the throttle paused a copy to or from
// an sshfs mount for its own reads and writes. Here the ssh that serves the mount also keeps
// a core busy for 2 s once the copy has begun; all that sshfs and its ssh used during the
// run is in prsync's own CPU, no pause is made for it (checkOwnCPU), and DEST, walked
// through the mount and on the served directory alike, holds every file.
func TestFUSEOwnCPU(t *testing.T) {
	needRsync(t)
	for _, side := range []string{"DEST", "source"} {
		t.Run(side, func(t *testing.T) {
			w := newWork(t)
			served := filepath.Join(w.Dir, "served")
			if err := os.Mkdir(served, 0o755); err != nil {
				t.Fatal(err)
			}
			mark := filepath.Join(w.Dir, "copying")
			busy := `while [ ! -e ` + mark + ` ]; do sleep 0.05; done
end=$(($(date +%s) + 2)); n=0
while :; do n=$((n + 1)); if [ $((n % 20000)) = 0 ] && [ "$(date +%s)" -ge "$end" ]; then break; fi; done`
			mnt, pids := mountSSHFS(t, served, busy)
			src, dst := w.Src, mnt
			if side == "source" {
				src, dst = mnt, w.Dst
			}
			names := files(t, src, 40, 60_000)
			bin(t)
			cpu := watchCPU(t, pids...)
			r := start(t, startOpts{in: []byte(strings.Join(names, "\n") + "\n")}, "--root", src, "-j", "2", "--chunk-files", "5",
				"--suspend-threshold", "30", "--resume-threshold", "20", "--throttle-interval", "250ms",
				dst, "--", "--bwlimit=300")
			if r.waitFor(time.Minute, func(e map[string]any) bool { return e["type"] == "chunk_start" }) == nil {
				t.Fatal("no chunk started in a minute")
			}
			if err := os.WriteFile(mark, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			res := r.wait(2 * time.Minute)
			res.Exit(t, 0)
			sameTree(t, served, dst)
			if side == "DEST" {
				sameTree(t, w.Src, mnt)
			}
			checkOwnCPU(t, res, cpu, "sshfs and its ssh", false, 30)
		})
	}
}
