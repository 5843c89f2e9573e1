// Package storage tells whether a directory is still the storage it was when a run began.
package storage

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// A network mount that drops leaves its bare mount point behind: an empty directory of the
// filesystem below, which rsync writes into (or reads from) as if it were the mount. A
// Watch records what a directory is when the run begins (its device, inode and filesystem)
// and what the mount points below it are, and says when a path no longer leads there.

// Ident is what a directory is: its device and inode, and the type of its filesystem.
type Ident struct {
	Dev, Ino uint64
	FS       string // the filesystem's type, as statfs names it ("ext4", "tmpfs", "fuse", or its magic)
}

func (i Ident) String() string {
	return fmt.Sprintf("device %d:%d, inode %d, %s", major(i.Dev), minor(i.Dev), i.Ino, i.FS)
}

// LostError says that a directory is no longer the storage it was at the start.
type LostError struct {
	What string // "DEST" or "the source"
	Path string // the directory
	Was  Ident
	Now  Ident // the zero Ident when Err is set
	Err  error // why it could not be looked at, if it could not
}

func (e *LostError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s is no longer the storage it was at the start: %s (%s): %v", e.What, e.Path, e.Was.FS, e.Err)
	}
	return fmt.Sprintf("%s is no longer the storage it was at the start: %s was %s, is now %s (a mount that went away leaves its bare mount point)", e.What, e.Path, e.Was, e.Now)
}

// Watch checks paths below a base directory against what the storage under them was
// when it first saw them: the base itself, the mount points below the base that the
// system's mount table listed at the start, and, when asked (Tops), the directory each
// path lies in at the top level below the base. It is safe for concurrent use.
type Watch struct {
	what string
	base string // absolute, clean, as given
	real string // base with its symlinks resolved: where the mount table's paths are matched
	tops bool
	// mounts are the mount points strictly below real at the start, absolute and clean
	mounts []string

	mu   sync.Mutex
	seen map[string]Ident // a directory (absolute) -> what it was when first looked at
	lost *LostError       // the first loss: once lost, always lost
}

// Options say what a Watch looks at besides the base.
type Options struct {
	// Tops: the directory each path lies in at the top level below the base (a mount there
	// is the usual layout of a backup target), looked at first when a check meets it.
	Tops bool
	// MountsNow: the mount points below the base are looked at now, in New (DEST, whose
	// mounts are the storage written to); else when a check first meets each (a source,
	// where "/" holds every mount of the machine).
	MountsNow bool
}

// New watches base, what ("DEST", "the source") naming it in errors.
func New(what, base string, o Options) (*Watch, error) {
	abs, err := filepath.Abs(base)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	w := &Watch{what: what, base: abs, real: real, tops: o.Tops, seen: map[string]Ident{}}
	id, err := look(abs, true)
	if err != nil {
		return nil, err
	}
	w.seen[abs] = id
	for _, m := range mountPoints() {
		if below(m, real) {
			w.mounts = append(w.mounts, m)
		}
	}
	// the longest first, so that a path's own mount is the first that holds it
	slices.SortFunc(w.mounts, func(a, b string) int { return len(b) - len(a) })
	if o.MountsNow {
		for _, m := range w.mounts {
			if id, err := look(m, false); err == nil {
				w.seen[m] = id
			}
		}
	}
	return w, nil
}

// Mount is a filesystem a Watch has seen: its device, and its mount point.
type Mount struct {
	Dev   uint64
	Point string
}

// FUSE returns the FUSE filesystems the watch has seen so far (the base's, and with
// MountsNow those mounted below it), each once: the throttle counts the processes that
// serve them (an sshfs) as the copy's. A mount point is the topmost directory on the
// path to where it was seen that is on its device ("" if that cannot be told).
func (w *Watch) FUSE() []Mount {
	w.mu.Lock()
	paths := map[uint64]string{}
	for p, id := range w.seen {
		if p == w.base {
			p = w.real // seen through its symlinks
		}
		if q, ok := paths[id.Dev]; id.FS == "fuse" && (!ok || len(p) < len(q)) {
			paths[id.Dev] = p
		}
	}
	w.mu.Unlock()
	var out []Mount
	for dev, p := range paths {
		out = append(out, Mount{Dev: dev, Point: mountPointOf(p, dev)})
	}
	slices.SortFunc(out, func(a, b Mount) int { return cmp.Compare(a.Dev, b.Dev) })
	return out
}

// mountPointOf returns the topmost directory of path (absolute, clean) on device dev: its
// mount point; "" when path itself is not on dev or cannot be looked at.
func mountPointOf(path string, dev uint64) string {
	if d, ok := deviceOf(path); !ok || d != dev {
		return ""
	}
	for {
		up := filepath.Dir(path)
		if up == path {
			return path
		}
		if d, ok := deviceOf(up); !ok || d != dev {
			return path
		}
		path = up
	}
}

// Base is the directory watched, absolute.
func (w *Watch) Base() string { return w.base }

// Check reports, as a *LostError, whether the base, or what the paths given lead through,
// is no longer the storage it was when first looked at. paths are relative to the base
// (as paths land in DEST) or absolute (as source paths are; those outside the base are
// looked at only through the mount points below it). Once a check has found a loss,
// every later one returns it.
func (w *Watch) Check(paths []string) error {
	dirs := w.dirs(paths)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lost != nil {
		return w.lost
	}
	for _, d := range dirs {
		if err := w.check(d.path, d.follow, d.strict); err != nil {
			w.lost = err
			return err
		}
	}
	return nil
}

// dir is a directory a check looks at: follow says a symlink there is followed (the base
// as given), strict that its inode must be the same too (a top-level directory may be
// replaced by rsync, on the same device).
type dir struct {
	path           string
	follow, strict bool
}

// dirs returns the directories that a check of paths looks at: the base first.
func (w *Watch) dirs(paths []string) []dir {
	out := []dir{{path: w.base, follow: true, strict: true}}
	if !w.tops && len(w.mounts) == 0 {
		return out
	}
	have := map[string]int{w.base: 0} // a directory -> its place in out
	add := func(p string, strict bool) {
		if i, ok := have[p]; ok {
			out[i].strict = out[i].strict || strict // a top-level directory that is a mount point
			return
		}
		have[p] = len(out)
		out = append(out, dir{path: p, strict: strict})
	}
	last := ""
	for _, p := range paths {
		rel, inside := w.rel(p)
		real := p
		if inside {
			real = filepath.Join(w.real, rel)
		}
		parent := filepath.Dir(real)
		if parent == last {
			continue // the paths of a chunk come in runs of one directory
		}
		last = parent
		if w.tops && inside && rel != "." {
			top, _, _ := strings.Cut(rel, "/")
			if top != "." && top != ".." && strings.Contains(rel, "/") {
				add(filepath.Join(w.base, top), false)
			}
		}
		for _, m := range w.mounts {
			if below(real, m) {
				add(m, true)
				break
			}
		}
	}
	return out
}

// rel returns path relative to the base, and whether it lies at or below it: a relative
// path is taken as one already.
func (w *Watch) rel(path string) (string, bool) {
	switch {
	case !filepath.IsAbs(path):
		return path, true
	case path == w.base:
		return ".", true
	case w.base == "/":
		return path[1:], true
	}
	r, ok := strings.CutPrefix(path, w.base+"/")
	return r, ok
}

// check compares what path is now with what it was when first looked at; one not looked
// at before is recorded now, if it exists.
func (w *Watch) check(path string, follow, strict bool) *LostError {
	was, known := w.seen[path]
	now, err := look(path, follow)
	switch {
	case !known && err == nil:
		w.seen[path] = now
		return nil
	case !known:
		return nil // not there yet (a top-level directory rsync has yet to make)
	case err != nil:
		return &LostError{What: w.what, Path: path, Was: was, Err: err}
	case now.Dev != was.Dev || now.FS != was.FS || strict && now.Ino != was.Ino:
		return &LostError{What: w.what, Path: path, Was: was, Now: now}
	}
	return nil
}

// below reports whether path lies strictly below dir.
func below(path, dir string) bool {
	if dir == "/" {
		return path != "/" && strings.HasPrefix(path, "/")
	}
	return len(path) > len(dir) && path[len(dir)] == '/' && strings.HasPrefix(path, dir)
}
