package splitter

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// QuickCheck decides, for a local DEST, that a path needs no rsync because its copy already
// matches, exactly as rsync's own quick check with --archive would decide: same type, and for a
// regular file the same size, modification time (whole seconds, rsync's default
// --modify-window 0), permission bits and group (and owner when prsync runs as root, since rsync
// preserves owners only then); for a symlink the same target, time and group; for a
// directory the same time, permission bits and group. Devices and special files always go
// to rsync. It looks at DEST through no symlink below DEST (DEST's own path may hold
// some): rsync without -K replaces a symlink where the source has a directory, so a copy
// found through one is not in DEST, and the path goes to rsync.
type QuickCheck struct {
	// Dest is the absolute local destination directory.
	Dest string
	// Owner compares owners too (rsync -o takes effect only as root).
	Owner bool

	refOnce sync.Once
	ref     *dirRef // Dest, for lstat through no symlink below it
	dest    string  // Dest, clean

	any atomic.Bool // a directory was ever found missing: the ring is worth reading
	mu  sync.Mutex
	// missing are DEST directories found missing lately: their files, and those of
	// their subdirectories, need no lstat. It is a ring, as the lstat workers each walk
	// a directory of their own.
	missing [16]string
	next    int
}

// isMissing reports whether DEST directory dir, or one above it, was found missing.
func (q *QuickCheck) isMissing(dir string) bool {
	if !q.any.Load() {
		return false // a re-run: no lock on every path
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range q.missing {
		if m != "" && strings.HasPrefix(dir, m) && (len(dir) == len(m) || dir[len(m)] == '/') {
			return true
		}
	}
	return false
}

// setMissing notes that DEST directory dir is missing.
func (q *QuickCheck) setMissing(dir string) {
	q.any.Store(true)
	q.mu.Lock()
	q.missing[q.next] = dir
	q.next = (q.next + 1) % len(q.missing)
	q.mu.Unlock()
}

// upToDate reports whether dest/rel already matches the source whose lstat is src. rel
// is clean and relative, and not above DEST ("." is DEST itself).
// c, when not nil, is the calling worker's cursor in DEST.
func (q *QuickCheck) upToDate(rel string, src *syscall.Stat_t, srcPath string, c *cursor) bool {
	kind := src.Mode & syscall.S_IFMT
	if kind != syscall.S_IFREG && kind != syscall.S_IFLNK && kind != syscall.S_IFDIR {
		return false
	}
	q.refOnce.Do(func() {
		q.dest = filepath.Clean(q.Dest)
		q.ref = newBeneathRef(q.dest)
	})
	// filepath.Join and Dir would Clean what is clean already: a tenth of a re-run's
	// own CPU
	dp := q.dest
	switch {
	case rel == ".":
	case dp == "/":
		dp = "/" + rel
	default:
		dp = dp + "/" + rel
	}
	dir := dp[:max(1, strings.LastIndexByte(dp, '/'))]
	if q.isMissing(dir) {
		return false // a fresh copy: one lstat per directory instead of one per file
	}
	var dst syscall.Stat_t
	if err := q.ref.lstatIn(c, dp, &dst); err != nil {
		if err == syscall.ENOENT && q.ref.lstat(dir, &dst) == syscall.ENOENT {
			q.setMissing(dir)
		}
		return false
	}
	if dst.Mode&syscall.S_IFMT != kind || dst.Gid != src.Gid || (q.Owner && dst.Uid != src.Uid) {
		return false
	}
	if mtimeSec(&dst) != mtimeSec(src) {
		return false
	}
	if kind == syscall.S_IFLNK {
		a, err1 := os.Readlink(srcPath)
		b, err2 := q.ref.readlinkIn(c, dp)
		return err1 == nil && err2 == nil && a == b
	}
	if kind == syscall.S_IFDIR {
		return dst.Mode&0o7777 == src.Mode&0o7777
	}
	return dst.Size == src.Size && dst.Mode&0o7777 == src.Mode&0o7777
}

// Fresh reports whether the copy at Dest/rel of the source file srcPath is up to date. A
// rel that leaves DEST is never up to date.
func (q *QuickCheck) Fresh(srcPath, rel string) bool {
	var st syscall.Stat_t
	rel = filepath.Clean(rel)
	if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") || syscall.Lstat(srcPath, &st) != nil {
		return false
	}
	return q.upToDate(rel, &st, srcPath, nil)
}
