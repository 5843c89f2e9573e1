//go:build !linux

package beneath

import "golang.org/x/sys/unix"

// dirFlags open a directory to name paths under it.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC

// openat2 is Linux's: elsewhere every look walks the path one name at a time.
func openat2(int, string, Follow) (int, error) { return -1, errNoOpenat2 }
