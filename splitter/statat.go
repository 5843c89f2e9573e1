package splitter

import (
	"os"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/prsync/prsync/internal/beneath"
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
	// beneath: a path under dir is looked at without going through a symlink below dir
	// (the directory's own path may hold some), as rsync writes DEST without -K. A
	// symlink on the way fails the lookup (ELOOP, or ENOTDIR) instead, and so does dir
	// that cannot be opened.
	beneath bool
	openErr error // why dir could not be opened
}

func newDirRef(dir string) *dirRef { return &dirRef{dir: dir, fd: -1} }

// newBeneathRef returns a dirRef that goes through no symlink below dir.
func newBeneathRef(dir string) *dirRef { return &dirRef{dir: dir, fd: -1, beneath: true} }

// lstat is syscall.Lstat(path, st).
func (d *dirRef) lstat(path string, st *syscall.Stat_t) error { return d.lstatIn(nil, path, st) }

// lstatIn is lstat, looking the name up in c's directory when path lies in it (c may be
// nil). A warm re-run spends a seventh less system time than when the kernel walks every
// path's directories again.
func (d *dirRef) lstatIn(c *cursor, path string, st *syscall.Stat_t) error {
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
	d.open()
	if d.fd < 0 {
		if d.beneath {
			return d.openErr
		}
		return syscall.Lstat(path, st)
	}
	fd, name := d.fd, rel
	if i := strings.LastIndexByte(rel, '/'); d.beneath && i > 0 {
		dfd, err := d.openDir(c, rel[:i])
		if err != nil {
			return err
		}
		if c == nil {
			defer unix.Close(dfd)
		}
		fd, name = dfd, rel[i+1:]
	} else if c != nil && i > 0 {
		if dfd, ok := c.open(d.fd, rel[:i]); ok {
			fd, name = dfd, rel[i+1:]
		}
	}
	for {
		// unix.Stat_t is the same struct as syscall.Stat_t (both are the kernel's struct
		// stat); TestDirRefLstat compares them field by field
		err := unix.Fstatat(fd, name, (*unix.Stat_t)(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			return err
		}
	}
}

// open opens the directory, once.
func (d *dirRef) open() {
	d.once.Do(func() {
		fd, err := unix.Open(d.dir, openDirFlags, 0)
		if err == nil {
			d.fd = fd
		}
		d.openErr = err
	})
}

// openDir opens directory dir (relative to a beneath dirRef, which is open) going
// through no symlink: c's descriptor when c is not nil, one the caller closes when c is
// nil.
func (d *dirRef) openDir(c *cursor, dir string) (int, error) {
	if c != nil {
		return c.openBeneath(d.fd, dir)
	}
	return beneath.OpenDir(d.fd, dir, beneath.NoLinks)
}

// readlinkIn returns the target of the symlink path under a beneath dirRef, going
// through no symlink on the way, in c's directory when path lies in it.
func (d *dirRef) readlinkIn(c *cursor, path string) (string, error) {
	rel, ok := strings.CutPrefix(path, d.dir)
	if d.dir != "/" {
		ok = ok && len(rel) > 1 && rel[0] == '/'
		rel = strings.TrimPrefix(rel, "/")
	}
	if !d.beneath || !ok || rel == "" {
		return os.Readlink(path)
	}
	d.open()
	if d.fd < 0 {
		return "", d.openErr
	}
	fd, name := d.fd, rel
	if i := strings.LastIndexByte(rel, '/'); i > 0 {
		dfd, err := d.openDir(c, rel[:i])
		if err != nil {
			return "", err
		}
		if c == nil {
			defer unix.Close(dfd)
		}
		fd, name = dfd, rel[i+1:]
	}
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(fd, name, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return "", err
		case n < len(buf):
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}

// list reads directory dir (clean, absolute, dir or under it) through no symlink below
// dir, and drops what it read: a network filesystem's client caches the attributes its
// listing brought (see "Listing a network DEST"). It returns how many entries it read: 0
// where it cannot open dir.
func (d *dirRef) list(dir string) int {
	rel, ok := strings.CutPrefix(dir, d.dir)
	if !ok || (rel != "" && rel[0] != '/' && d.dir != "/") {
		return 0
	}
	rel = strings.TrimPrefix(rel, "/")
	if rel == "" {
		rel = "."
	}
	d.open()
	if d.fd < 0 {
		return 0
	}
	dfd, err := beneath.OpenDir(d.fd, rel, beneath.NoLinks)
	if err != nil {
		return 0
	}
	fd, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	unix.Close(dfd)
	if err != nil {
		return 0
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	n := 0
	for {
		names, err := f.Readdirnames(1024)
		n += len(names)
		if len(names) == 0 || err != nil {
			return n
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

// cursor holds a descriptor of the directory that one worker lstat'ed files in last,
// under one dirRef, so that the next file there costs the kernel one name to look up
// instead of a walk of the whole relative path. Under a plain dirRef it opens a
// directory only at the second file in a row there, so a list in no order of
// directories (sorted by size, say) costs no extra system calls, and opening it follows
// symlinks on the way, as that walk would. Under a beneath dirRef it opens the directory
// at the first file, going through no symlink (openat2, or one name at a time), and
// keeps the failure too: that one check per directory is what proves no file in it was
// reached through a symlink. The worker resets it after each unit of records, so a
// directory renamed or replaced since is never looked into.
type cursor struct {
	dir    string // relative to the dirRef: the directory of the last file
	fd     int
	ok     bool  // fd is open on dir
	failed bool  // dir could not be opened: look paths in it up whole
	err    error // why, under a beneath dirRef
}

// open returns a descriptor of dir (relative to base), or false: when the last file was
// elsewhere, or dir cannot be opened. Then an lstat of the whole path gives what lstat
// by path would, the error included.
func (c *cursor) open(base int, dir string) (int, bool) {
	if c.dir != dir {
		c.reset()
		c.dir = dir
		return 0, false
	}
	if c.ok || c.failed {
		return c.fd, c.ok
	}
	fd, err := unix.Openat(base, dir, openDirFlags, 0)
	if err != nil {
		c.failed = true
		return 0, false
	}
	c.fd, c.ok = fd, true
	return fd, true
}

// openBeneath returns a descriptor of dir (relative to base) opened through no symlink,
// or why it cannot be opened, from the first file in dir on.
func (c *cursor) openBeneath(base int, dir string) (int, error) {
	if c.dir == dir && (c.ok || c.failed) {
		return c.fd, c.err
	}
	c.reset()
	c.dir = dir
	fd, err := beneath.OpenDir(base, dir, beneath.NoLinks)
	if err != nil {
		c.failed, c.err = true, err
		return -1, err
	}
	c.fd, c.ok = fd, true
	return fd, nil
}

// reset closes the descriptor and forgets the directory.
func (c *cursor) reset() {
	if c.ok {
		unix.Close(c.fd)
	}
	*c = cursor{}
}

// the two Stat_t types are the same size, or this does not compile
var _ = [1]struct{}{}[unsafe.Sizeof(unix.Stat_t{})-unsafe.Sizeof(syscall.Stat_t{})]
