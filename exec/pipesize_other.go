//go:build unix && !linux

package exec

// growPipe does nothing where a pipe's buffer cannot be resized.
func growPipe(fd, size int) {}
