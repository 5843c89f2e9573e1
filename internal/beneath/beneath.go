// Package beneath looks at paths below a directory without following the symlinks on the way, unless told to.
package beneath

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Follow says which symlinks between a root and the last name of a path a look may go
// through.
type Follow int

const (
	// NoLinks goes through none: a symlink where the path needs a directory ends the look.
	NoLinks Follow = iota
	// InTree goes through symlinks that resolve to a directory beneath the root, as
	// openat2's RESOLVE_BENEATH does. Where openat2 is missing (Linux before 5.6, macOS)
	// it goes through none.
	InTree
	// AnyLinks goes through every symlink, as a plain walk of the path does.
	AnyLinks
)

// NotDirError says that a path could not be looked at without going through a name that
// is not a directory: a symlink the look may not follow, or another kind of file.
type NotDirError struct {
	Path    string // the name, relative to the root
	Symlink bool
}

func (e *NotDirError) Error() string {
	if e.Symlink {
		return e.Path + " is a symlink"
	}
	return e.Path + " is not a directory"
}

// OpenDir opens directory rel (clean, relative; "." is base itself) below the directory
// open as base, to name paths under it, going through the symlinks on the way only as
// follow allows. Its errors are the system's: ENOENT for a missing name, and ELOOP,
// EXDEV or ENOTDIR for a name that is not a directory it may go through.
func OpenDir(base int, rel string, follow Follow) (int, error) {
	if follow == AnyLinks {
		return retry(func() (int, error) { return unix.Openat(base, rel, dirFlags, 0) })
	}
	if fd, err := openat2(base, rel, follow); err != errNoOpenat2 {
		return fd, err
	}
	return walk(base, rel)
}

// errNoOpenat2 says openat2 is missing: walk the path instead.
var errNoOpenat2 = errors.New("no openat2")

// walk opens rel below base one name at a time, following no symlink.
func walk(base int, rel string) (int, error) {
	if rel == "." {
		return retry(func() (int, error) { return unix.Openat(base, ".", dirFlags, 0) })
	}
	fd := base
	for rel != "" {
		name, rest, _ := strings.Cut(rel, "/")
		nfd, err := retry(func() (int, error) { return unix.Openat(fd, name, dirFlags|unix.O_NOFOLLOW, 0) })
		if fd != base {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd, rel = nfd, rest
	}
	return fd, nil
}

// retry calls open again while it is interrupted.
func retry(open func() (int, error)) (int, error) {
	for {
		fd, err := open()
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// notDir reports whether err says a name on the way is not a directory the look may go
// through.
func notDir(err error) bool {
	return err == unix.ELOOP || err == unix.EXDEV || err == unix.ENOTDIR
}

// Root is a directory, open (through any symlinks in its own path), to look at paths
// below it.
type Root struct {
	fd     int
	follow Follow
}

// Open opens directory dir as a Root; its own path may hold symlinks.
func Open(dir string, follow Follow) (*Root, error) {
	fd, err := retry(func() (int, error) { return unix.Open(dir, dirFlags, 0) })
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return &Root{fd: fd, follow: follow}, nil
}

// Close closes the root.
func (r *Root) Close() error { return unix.Close(r.fd) }

// parent opens the directory rel is in and returns it with rel's last name. The caller
// closes the descriptor unless it is r's own.
func (r *Root) parent(rel string) (int, string, error) {
	if rel == "" || rel == ".." || strings.HasPrefix(rel, "/") || strings.HasPrefix(rel, "../") {
		return -1, "", &fs.PathError{Op: "lstat", Path: rel, Err: errors.New("not below the root")}
	}
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return r.fd, rel, nil
	}
	fd, err := OpenDir(r.fd, rel[:i], r.follow)
	if err != nil {
		if notDir(err) {
			return -1, "", r.explain(rel[:i], err)
		}
		return -1, "", &fs.PathError{Op: "lstat", Path: rel, Err: err}
	}
	return fd, rel[i+1:], nil
}

// explain names the first name in dir that is not a directory the look may go through.
func (r *Root) explain(dir string, err error) error {
	for i := 0; ; {
		j := strings.IndexByte(dir[i:], '/')
		p := dir
		if j >= 0 {
			p = dir[:i+j]
		}
		var st unix.Stat_t
		if e := unix.Fstatat(r.fd, p, &st, unix.AT_SYMLINK_NOFOLLOW); e == nil {
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFLNK:
				return &NotDirError{Path: p, Symlink: true}
			case unix.S_IFDIR:
			default:
				return &NotDirError{Path: p}
			}
		}
		if j < 0 {
			// a race, or a symlink followed higher up: name the directory itself
			return &NotDirError{Path: dir, Symlink: err != unix.ENOTDIR}
		}
		i += j + 1
	}
}

// Lstat returns what lstat(2) says of rel (clean, relative) below the root, or a
// *NotDirError when a name on the way is not a directory the root may go through. "."
// is the root itself.
func (r *Root) Lstat(rel string) (fs.FileInfo, error) {
	var st unix.Stat_t
	if rel == "." {
		if err := unix.Fstat(r.fd, &st); err != nil {
			return nil, &fs.PathError{Op: "fstat", Path: rel, Err: err}
		}
		return fileInfo(".", &st), nil
	}
	fd, name, err := r.parent(rel)
	if err != nil {
		return nil, err
	}
	if fd != r.fd {
		defer unix.Close(fd)
	}
	for {
		err = unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: rel, Err: err}
	}
	return fileInfo(name, &st), nil
}

// Readlink returns the target of symlink rel below the root.
func (r *Root) Readlink(rel string) (string, error) {
	fd, name, err := r.parent(rel)
	if err != nil {
		return "", err
	}
	if fd != r.fd {
		defer unix.Close(fd)
	}
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		m, err := unix.Readlinkat(fd, name, buf)
		if err == unix.EINTR {
			n /= 2
			continue
		}
		if err != nil {
			return "", &fs.PathError{Op: "readlink", Path: rel, Err: err}
		}
		if m < n {
			return string(buf[:m]), nil
		}
	}
}

// ReadDir opens directory rel below the root to read its entries, going through the
// symlinks on the way only as the root may. Names in it are looked at, and removed, with
// the *at system calls relative to the file's descriptor.
func (r *Root) ReadDir(rel string) (*os.File, error) {
	fd, err := OpenDir(r.fd, rel, r.follow)
	if err != nil {
		if notDir(err) && rel != "." {
			return nil, r.explain(rel, err)
		}
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	rfd, err := retry(func() (int, error) {
		return unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(rfd), rel), nil
}

// IsDir reports whether rel below the root is a directory the root may go through: a
// real one, or with InTree or AnyLinks a symlink that resolves to one.
func (r *Root) IsDir(rel string) bool {
	fd, err := OpenDir(r.fd, rel, r.follow)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// fileStat is an fs.FileInfo of a stat(2) result, as os.Lstat makes one.
type fileStat struct {
	name string
	st   unix.Stat_t
}

func fileInfo(name string, st *unix.Stat_t) fs.FileInfo { return &fileStat{name: name, st: *st} }

func (f *fileStat) Name() string       { return f.name }
func (f *fileStat) Size() int64        { return f.st.Size }
func (f *fileStat) IsDir() bool        { return f.Mode().IsDir() }
func (f *fileStat) Sys() any           { return &f.st }
func (f *fileStat) ModTime() time.Time { return time.Unix(f.st.Mtim.Unix()) }

func (f *fileStat) Mode() fs.FileMode {
	m := fs.FileMode(f.st.Mode & 0o777)
	switch f.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	if f.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if f.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if f.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
