package splitter

import "golang.org/x/sys/unix"

// openDirFlags open a directory to name paths under it.
const openDirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
