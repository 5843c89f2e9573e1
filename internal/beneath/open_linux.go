package beneath

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// dirFlags open a directory only to name paths under it (no read permission needed).
const dirFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC

// noOpenat2 is set once openat2 was found missing (Linux before 5.6, or a seccomp
// filter that refuses it).
var noOpenat2 atomic.Bool

// openat2 opens rel below base with openat2(2): RESOLVE_BENEATH and, unless follow is
// InTree, RESOLVE_NO_SYMLINKS. It returns errNoOpenat2 where openat2 is missing.
func openat2(base int, rel string, follow Follow) (int, error) {
	if noOpenat2.Load() {
		return -1, errNoOpenat2
	}
	how := unix.OpenHow{Flags: dirFlags, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	if follow != InTree {
		how.Resolve |= unix.RESOLVE_NO_SYMLINKS
	}
	for again := 0; ; again++ {
		fd, err := unix.Openat2(base, rel, &how)
		switch {
		case err == unix.EINTR, err == unix.EAGAIN && again < 8: // EAGAIN: a rename raced a ".." in a symlink's target
			continue
		case err == unix.ENOSYS, err == unix.EPERM:
			noOpenat2.Store(true)
			return -1, errNoOpenat2
		}
		return fd, err
	}
}
