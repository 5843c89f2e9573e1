//go:build unix

package throttle

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// SignalGroup sends sig to every process in the process group pgid, as
// kill(-pgid, sig). A group that no longer exists (ESRCH) is not an error: it
// has already gone. pgid must be above 1, since kill(0) and kill(-1) would
// signal prsync's own group or every process.
func SignalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("signal group %d: not a child process group", pgid)
	}
	err := unix.Kill(-pgid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("signal group %d: %w", pgid, err)
	}
	return nil
}
