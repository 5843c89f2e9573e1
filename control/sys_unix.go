//go:build unix

package control

import (
	"errors"
	"io/fs"
	"syscall"
)

// fileOwner returns the uid that owns a file.
func fileOwner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(st.Uid), true
}

// processGone reports whether no process has the ID pid.
func processGone(pid int) bool {
	return pid > 0 && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
