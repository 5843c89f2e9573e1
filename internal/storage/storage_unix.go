//go:build linux || darwin

package storage

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// look returns what path is; follow says a symlink at path is followed.
func look(path string, follow bool) (Ident, error) {
	var st unix.Stat_t
	var err error
	if follow {
		err = unix.Stat(path, &st)
	} else {
		err = unix.Lstat(path, &st)
	}
	if err != nil {
		return Ident{}, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return Ident{}, fmt.Errorf("%s is no longer a directory", path)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return Ident{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	return Ident{Dev: uint64(st.Dev), Ino: uint64(st.Ino), FS: fsName(&fs)}, nil
}

func major(dev uint64) uint32 { return unix.Major(dev) }
func minor(dev uint64) uint32 { return unix.Minor(dev) }

// deviceOf returns the device of path, not following a symlink there.
func deviceOf(path string) (uint64, bool) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return 0, false
	}
	return uint64(st.Dev), true //nolint:unconvert // Dev is int32 on darwin
}
