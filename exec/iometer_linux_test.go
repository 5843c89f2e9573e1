package exec

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestGroupWrites starts a real tree of processes in a group of its own, a shell that
// writes 100,000 bytes and a child shell that writes 200,000, and reads what each wrote,
// both ways groupWrites can.
func TestGroupWrites(t *testing.T) {
	if !childrenListed() {
		t.Log("this kernel lists no children: only the scan is tested")
	}
	for _, tc := range []struct {
		name string
		fn   func(map[int]bool) map[int]written
		skip bool
	}{
		{"trees", writesOfTrees, !childrenListed()},
		{"scan", writesByScan, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip {
				t.Skip("no /proc/PID/task/TID/children here")
			}
			cmd := exec.Command("sh", "-c", `printf '%0100000d' 0 >/dev/null
sh -c "printf '%0200000d' 0 >/dev/null; sleep 60" &
sleep 60`)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			g := cmd.Process.Pid
			t.Cleanup(func() {
				_ = syscall.Kill(-g, syscall.SIGKILL)
				_ = cmd.Wait()
			})
			other := map[int]bool{g + 1_000_000: true} // no such group
			deadline := time.Now().Add(20 * time.Second)
			for {
				got := tc.fn(map[int]bool{g: true})
				var big, small int
				for pid, w := range got {
					if w.pgid != g {
						t.Fatalf("pid %d counted in group %d, want %d", pid, w.pgid, g)
					}
					switch {
					case w.bytes >= 200_000:
						big++
					case w.bytes >= 100_000:
						small++
					}
				}
				if big == 1 && small == 1 && got[g].bytes >= 100_000 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("group %d: %v, want the leader at 100,000 bytes or more and one other at 200,000", g, got)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if got := tc.fn(other); len(got) != 0 {
				t.Errorf("a group with no process: %v, want nothing", got)
			}
		})
	}
}
