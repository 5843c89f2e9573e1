package storage

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

func fsName(st *unix.Statfs_t) string { return unix.ByteSliceToString(st.Fstypename[:]) }

// mountPoints returns the mount points getfsstat(2) lists, or none.
func mountPoints() []string {
	n, err := unix.Getfsstat(nil, unix.MNT_NOWAIT)
	if err != nil || n <= 0 {
		return nil
	}
	buf := make([]unix.Statfs_t, n)
	n, err = unix.Getfsstat(buf, unix.MNT_NOWAIT)
	if err != nil {
		return nil
	}
	out := make([]string, 0, n)
	for _, st := range buf[:n] {
		out = append(out, filepath.Clean(unix.ByteSliceToString(st.Mntonname[:])))
	}
	return out
}
