//go:build unix

package throttle

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func TestSignalGroup(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	pid := cmd.Process.Pid
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() {
		// Kill by PID whatever happened, and reap.
		_ = syscall.Kill(pid, syscall.SIGKILL)
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
			t.Errorf("sleep %d was not reaped", pid)
		}
	})

	if err := SignalGroup(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	waitState(t, pid, 'T')
	if err := SignalGroup(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT: %v", err)
	}
	waitState(t, pid, 'S')
	if err := SignalGroup(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	select {
	case err := <-waited:
		waited <- err // for the cleanup
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("sleep ended with %v, want killed by SIGKILL", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sleep did not die")
	}

	// The group has gone now: ESRCH is not an error.
	if err := SignalGroup(pid, syscall.SIGCONT); err != nil {
		t.Errorf("signal to a gone group: %v, want nil", err)
	}
}

func TestSignalGroupRefusesOwnAndAll(t *testing.T) {
	for _, pgid := range []int{-5, 0, 1} {
		if err := SignalGroup(pgid, syscall.Signal(0)); err == nil {
			t.Errorf("SignalGroup(%d) = nil, want an error", pgid)
		}
	}
}

// waitState waits until /proc/PID/stat shows state, on Linux only.
func waitState(t *testing.T, pid int, state byte) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	var got byte
	for range 200 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// The state follows the command name, which is in parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
			got = b[i+2]
			if got == state {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d in state %q, want %q", pid, got, state)
}
