package splitter

import "golang.org/x/sys/unix"

// openDirFlags open a directory only to name paths under it (no read permission needed).
const openDirFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC
