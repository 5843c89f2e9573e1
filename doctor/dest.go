package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/prsync/prsync/internal/human"
)

// Check names of DEST.
const (
	NameDestWritable = "dest-writable"
	NameDestSpace    = "dest-space"
	NameDestInodes   = "dest-inodes"
)

// DestFacts is what a look at a local DEST found, without creating or writing anything.
type DestFacts struct {
	Path       string
	Exists     bool
	NotDir     bool   // DEST exists and is not a directory
	Existing   string // DEST, or its nearest existing parent, which the run would create it in
	Writable   error  // nil when Existing is writable and searchable (access(2) W_OK|X_OK)
	Statfs     error  // the error of statfs(2) on Existing
	FreeBytes  uint64 // for an unprivileged user (f_bavail)
	FreeInodes uint64
	Inodes     uint64 // 0 when the file system does not count them (btrfs)
}

// LookDest looks at a local DEST: whether it exists, the nearest existing directory
// (DEST or a parent), whether that is writable, and its file system's free space and
// inodes.
func LookDest(dest string) DestFacts {
	f := DestFacts{Path: dest}
	abs, err := filepath.Abs(dest)
	if err != nil {
		f.Writable, f.Statfs = err, err
		return f
	}
	p := abs
	for {
		fi, err := os.Stat(p)
		if err == nil {
			f.Exists = p == abs
			f.NotDir = !fi.IsDir() // DEST, or a parent of it, is a file
			break
		} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
			f.Writable = err
			break
		}
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	f.Existing = p
	if f.Writable == nil && !f.NotDir {
		if err := unix.Access(p, unix.W_OK|unix.X_OK); err != nil {
			f.Writable = &fs.PathError{Op: "access", Path: p, Err: err}
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		f.Statfs = &fs.PathError{Op: "statfs", Path: p, Err: err}
		return f
	}
	f.FreeBytes = uint64(st.Bavail) * uint64(st.Bsize)
	f.FreeInodes, f.Inodes = uint64(st.Ffree), uint64(st.Files)
	return f
}

// Dest checks a local DEST: that the run can write it (or create it), and that its file
// system has room for the list: bytes (when the source's size is known) and one inode
// per path.
func Dest(f DestFacts, src SourceFacts) []Check {
	var out []Check
	switch {
	case f.NotDir:
		out = append(out, fail(NameDestWritable, "DEST must be a directory (it is created when missing)", "%s is not a directory", f.Existing))
	case f.Writable != nil:
		out = append(out, fail(NameDestWritable, "pick a DEST you can write, or run prsync as a user who can",
			"%s cannot be written: %v", f.Existing, f.Writable))
	case f.Exists:
		out = append(out, ok(NameDestWritable, "%s is a writable directory", f.Path))
	default:
		out = append(out, ok(NameDestWritable, "%s does not exist: the run creates it in %s, which is writable", f.Path, f.Existing))
	}
	if f.Statfs != nil {
		return append(out, warn(NameDestSpace, "", "free space unknown: %v", f.Statfs))
	}
	free := human.Bytes(int64(min(f.FreeBytes, 1<<62)))
	switch {
	case !src.SizeKnown:
		out = append(out, ok(NameDestSpace, "%s free in %s; the list's size is unknown (a remote source without --sizes)", free, f.Existing))
	case uint64(src.Bytes) > f.FreeBytes:
		out = append(out, fail(NameDestSpace, "free space there, or pick another DEST (files DEST already holds are skipped, so a re-run needs less)",
			"the list holds %s%s and %s has %s free", human.Bytes(src.Bytes), estimated(src), f.Existing, free))
	case float64(src.Bytes) > 0.9*float64(f.FreeBytes):
		out = append(out, warn(NameDestSpace, "free space there first: a run that fills the file system fails its last paths",
			"the list holds %s%s, more than 90%% of the %s free in %s", human.Bytes(src.Bytes), estimated(src), free, f.Existing))
	default:
		out = append(out, ok(NameDestSpace, "the list holds %s%s; %s free in %s", human.Bytes(src.Bytes), estimated(src), free, f.Existing))
	}
	switch {
	case f.Inodes == 0:
		out = append(out, ok(NameDestInodes, "the file system of %s does not count inodes", f.Existing))
	case uint64(src.Records) > f.FreeInodes:
		out = append(out, fail(NameDestInodes, "pick a file system with more inodes (mkfs -N, or one that allocates them as it goes)",
			"the list has %d paths and %s has %d free inodes", src.Records, f.Existing, f.FreeInodes))
	default:
		out = append(out, ok(NameDestInodes, "the list has %d paths; %d inodes free in %s", src.Records, f.FreeInodes, f.Existing))
	}
	return out
}

func estimated(src SourceFacts) string {
	if src.Estimated {
		return fmt.Sprintf(" (estimated from the first %d paths)", src.SizedPaths)
	}
	return ""
}

// RemoteDest is the DEST check of a remote DEST, which doctor does not reach into.
func RemoteDest(dest string) Check {
	return ok(NameDestSpace, "%s is remote: its free space and permissions are not checked (rsync reports them per path)", dest)
}
