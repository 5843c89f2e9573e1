package exec

import "syscall"

// growPipe asks for a pipe buffer of size bytes; the kernel may refuse (beyond
// /proc/sys/fs/pipe-max-size, or a user's pipe-user-pages-soft), and the pipe then
// keeps its size.
func growPipe(fd, size int) {
	const setPipeSize = 1031 // F_SETPIPE_SZ
	syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), setPipeSize, uintptr(size))
}
