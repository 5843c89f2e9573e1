package splitter

import (
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirRef lstat's paths under one directory relative to a descriptor of it, so that the
// kernel does not walk the directory's own path again for every file. A cold re-run's
// quick check is almost all lstat: 100,000 of them on a cold cache took 0.53-0.59 s
// relative to the two trees' descriptors, against 0.58-0.65 s by absolute path. Paths not
// under the directory, or any path when it cannot be opened, are lstat'ed by path.
type dirRef struct {
	dir  string // clean and absolute
	once sync.Once
	fd   int // -1: not open
}

func newDirRef(dir string) *dirRef { return &dirRef{dir: dir, fd: -1} }

// lstat is syscall.Lstat(path, st).
func (d *dirRef) lstat(path string, st *syscall.Stat_t) error {
	if d == nil || d.dir == "" {
		return syscall.Lstat(path, st)
	}
	rel, ok := strings.CutPrefix(path, d.dir)
	if d.dir != "/" {
		ok = ok && len(rel) > 1 && rel[0] == '/'
		rel = strings.TrimPrefix(rel, "/")
	}
	if !ok || rel == "" {
		return syscall.Lstat(path, st)
	}
	d.once.Do(func() {
		if fd, err := unix.Open(d.dir, openDirFlags, 0); err == nil {
			d.fd = fd
		}
	})
	if d.fd < 0 {
		return syscall.Lstat(path, st)
	}
	for {
		// unix.Stat_t is the same struct as syscall.Stat_t (both are the kernel's struct
		// stat); TestDirRefLstat compares them field by field
		err := unix.Fstatat(d.fd, rel, (*unix.Stat_t)(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			return err
		}
	}
}

// close closes the descriptor, if it was opened.
func (d *dirRef) close() {
	if d != nil && d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
}

// the two Stat_t types are the same size, or this does not compile
var _ = [1]struct{}{}[unsafe.Sizeof(unix.Stat_t{})-unsafe.Sizeof(syscall.Stat_t{})]
