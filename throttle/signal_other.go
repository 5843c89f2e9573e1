//go:build !unix

package throttle

import (
	"errors"
	"fmt"
	"syscall"
)

// SignalGroup sends sig to every process in the process group pgid. This
// system has no process groups, so it always fails with errors.ErrUnsupported.
func SignalGroup(pgid int, sig syscall.Signal) error {
	return fmt.Errorf("signal group %d: %w", pgid, errors.ErrUnsupported)
}
