//go:build unix

package exec

import (
	osexec "os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func setProcAttr(cmd *osexec.Cmd) {
	// Its own process group (never its own session: a stopped group in another
	// session outlives a crashed prsync; see RSYNC-NOTES §3).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func signalGroup(pgid int, sig syscall.Signal) error {
	if err := unix.Kill(-pgid, sig); err != nil && err != unix.ESRCH {
		return err
	}
	return nil
}

func stopGroup(pgid int) error     { return signalGroup(pgid, unix.SIGSTOP) }
func continueGroup(pgid int) error { return signalGroup(pgid, unix.SIGCONT) }
func killGroup(pgid int) error     { return signalGroup(pgid, unix.SIGKILL) }

// terminateGroup sends TERM, then CONT: a stopped process acts on TERM only once continued.
func terminateGroup(pgid int) error {
	err := signalGroup(pgid, unix.SIGTERM)
	if cerr := signalGroup(pgid, unix.SIGCONT); err == nil {
		err = cerr
	}
	return err
}

// waitGroupGone waits until no live process of the group is left, up to d. A killed
// receiver may still be in the kernel, about to leave its temp file. Zombies whose
// parent is gone count as gone: an init that reaps slowly must not delay prsync.
func waitGroupGone(pgid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if unix.Kill(-pgid, 0) == unix.ESRCH || !groupAlive(pgid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
