package splitter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"github.com/prsync/prsync/rsync"
)

// What the stat workers find of each record (examine), and what is done with it in input
// order (apply).

type rec struct {
	input []byte
	entry string
	src   string
	size  int64
}

// look is what examining one record found. examine only reads the file system, so
// records are examined in parallel, ahead of the one being applied: a run that is mostly
// up to date spends its time in the lstats of the source and of DEST.
type look struct {
	empty, skip bool   // an empty record; another shard's path
	path        []byte // the path part of the record (all of it, unless Sizes)
	size        int64  // the size the record gives (Sizes)
	abs, src    string
	entry       string
	lands       string // where the path lands under DEST
	err         error  // the path cannot be given to rsync
	statErr     error
	st          syscall.Stat_t
	stat        bool // st holds the source's lstat
	fresh       bool // the quick check found DEST's copy up to date
}

// SplitSized splits a SIZE<TAB>PATH record at its first tab (a path may hold tabs). A
// record with no path after its tab is the list's root: find's %P is empty for the
// starting point it names, so `find ROOT -printf '%s\t%P\0'` begins with ROOT itself, which
// is "." below --root, as `find .` prints it.
func SplitSized(rec []byte) (size int64, path []byte, err error) {
	i := bytes.IndexByte(rec, '\t')
	if i < 0 {
		return 0, nil, errors.New("--sizes: the record has no tab between size and path")
	}
	if i == 0 {
		return 0, nil, errors.New("--sizes: the record has no size before its tab")
	}
	for _, c := range rec[:i] {
		if c < '0' || c > '9' {
			return 0, nil, fmt.Errorf("--sizes: size %q is not a number of bytes", rec[:i])
		}
	}
	n, err := strconv.ParseInt(string(rec[:i]), 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("--sizes: size %q is out of range", rec[:i])
	}
	if i+1 == len(rec) {
		return n, []byte("."), nil
	}
	return n, rec[i+1:], nil
}

// needStat reports whether examine lstat's the source.
func (s *Splitter) needStat() bool { return s.cfg.Stats() }

// Stats reports whether a splitter with this configuration lstats the paths it reads: a
// local source, unless --sizes gives their sizes and neither -H nor the quick check needs
// more.
func (c Config) Stats() bool {
	return c.RemoteSrc == "" && (!c.Sizes || c.HardLinks || c.Quick != nil)
}

// otherShard reports whether a path (not an inode) falls in another shard.
func (s *Splitter) otherShard(in []byte) bool {
	return s.cfg.Shards > 1 && Shard(in, s.cfg.Shards) != s.cfg.Shard
}

// cursors are one worker's directory descriptors in the source tree and in DEST.
type cursors struct{ src, dst cursor }

func (c *cursors) reset() {
	c.src.reset()
	c.dst.reset()
}

// examine reads what apply needs of one record: where it goes, its lstat, and the quick
// check. c are the calling worker's cursors.
func (s *Splitter) examine(in []byte, l *look, c *cursors) {
	*l = look{path: in}
	if len(in) == 0 {
		l.empty = true
		return
	}
	if s.cfg.Sizes {
		size, p, err := SplitSized(in)
		if err != nil {
			l.err = err
			return
		}
		l.size, l.path = size, p
	}
	if !s.cfg.HardLinks && s.otherShard(l.path) {
		l.skip = true
		return
	}
	if l.abs, l.src, l.entry, l.lands, l.err = s.resolve(l.path); l.err != nil {
		return
	}
	if s.insideDest(l.abs, len(l.path) > 0 && l.path[0] == '/') {
		l.err = errors.New(InsideDest)
		return
	}
	if s.crlf(l.path, l.abs) {
		// a line of a CRLF list, even with --sizes: not vanished, which it would be
		// called here (or by rsync), nor sent to rsync
		l.err = errors.New(CRLF)
		return
	}
	if s.cfg.List != nil {
		s.cfg.List.Warm(l.lands)
	}
	if !s.needStat() {
		return
	}
	if l.statErr = s.srcRef.lstatIn(&c.src, l.abs, &l.st); l.statErr != nil {
		return
	}
	l.stat = true
	if s.cfg.Quick != nil && !s.linked(l) && !(s.cfg.HardLinks && s.otherShard(l.path)) {
		l.fresh = s.cfg.Quick.upToDate(l.lands, &l.st, l.abs, &c.dst)
	}
}

// linked reports whether a file is routed by its inode: a hard link under -H.
func (s *Splitter) linked(l *look) bool {
	return s.cfg.HardLinks && l.stat && l.st.Mode&syscall.S_IFMT != syscall.S_IFDIR && l.st.Nlink > 1
}

// apply settles a record or puts it into a chunk, from what examine found.
func (s *Splitter) apply(ctx context.Context, in []byte, l *look, out chan<- *Chunk) error {
	switch {
	case l.empty:
		if s.hooks.Empty != nil {
			s.hooks.Empty()
		}
		return nil
	case l.skip:
		return nil
	case l.err != nil:
		if s.cfg.HardLinks && s.otherShard(l.path) {
			return nil
		}
		s.settle(in, rsync.Failed, l.err.Error())
		return nil
	case l.statErr != nil:
		if s.cfg.HardLinks && s.otherShard(l.path) {
			return nil
		}
		s.touch(l)
		gone := errors.Is(l.statErr, syscall.ENOENT) || errors.Is(l.statErr, syscall.ENOTDIR)
		var lost error
		if gone && s.cfg.SourceLost != nil {
			lost = s.cfg.SourceLost(l.abs)
		}
		switch {
		case lost != nil:
			s.settle(in, rsync.Failed, "lstat: "+l.statErr.Error()+"; "+lost.Error())
		case gone:
			s.settle(in, rsync.Vanished, "lstat: "+l.statErr.Error())
		default:
			s.settle(in, rsync.Failed, "lstat: "+l.statErr.Error())
		}
		return nil
	}
	st := &l.st
	size := l.size
	if l.stat && !s.cfg.Sizes {
		size = 0
		if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			size = st.Size
		}
	}
	if !s.linked(l) && !(s.cfg.HardLinks && s.otherShard(l.path)) {
		s.touch(l)
	}
	if l.fresh {
		if s.hooks.Fresh != nil {
			s.hooks.Fresh(in, size)
		}
		return nil
	}
	r := rec{input: in, entry: l.entry, src: l.src, size: size}
	if s.linked(l) {
		key := inode{dev: uint64(st.Dev), ino: uint64(st.Ino)}
		if s.cfg.Shards > 1 && key.shard(s.cfg.Shards) != s.cfg.Shard {
			return nil
		}
		s.touch(l)
		r.input = bytes.Clone(in)
		if g := s.links.add(key, uint64(st.Nlink), r); g != nil {
			return s.addGroup(ctx, g, out)
		}
		return nil
	}
	if s.cfg.HardLinks && s.otherShard(l.path) {
		return nil
	}
	if l.lands == "." {
		r.input = bytes.Clone(in)
		s.roots = append(s.roots, r) // sent alone at the end (sendRoots)
		return nil
	}
	return s.addGroup(ctx, []rec{r}, out)
}

// touch records the directories a path of this shard touches, for the deletion pass. A
// path is a directory when its lstat says so, or, where the source is not lstat'ed
// (--sizes, a remote source), when the record ends in "/".
func (s *Splitter) touch(l *look) {
	if s.cfg.Dirs == nil {
		return
	}
	dir := false
	switch {
	case l.stat:
		dir = l.st.Mode&syscall.S_IFMT == syscall.S_IFDIR
	case l.statErr == nil:
		dir = len(l.path) > 0 && l.path[len(l.path)-1] == '/'
	}
	keepTop := s.cfg.Root != "" || s.cfg.RemoteSrc != "" || len(l.path) == 0 || l.path[0] != '/'
	s.cfg.Dirs.add(l.src, l.entry, dir, keepTop)
}

func (s *Splitter) settle(in []byte, status rsync.Status, reason string) {
	if s.hooks.Settled != nil {
		s.hooks.Settled(in, status, reason)
	}
}

// arena hands out copies of byte slices from blocks of 64 KiB, so that the paths of a
// chunk cost a few allocations, not two each. A block lives as long as a chunk uses it.
type arena struct{ buf []byte }

func (a *arena) add(b []byte) []byte {
	if cap(a.buf)-len(a.buf) < len(b) {
		a.buf = make([]byte, 0, max(64<<10, len(b)))
	}
	i := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[i:len(a.buf):len(a.buf)]
}

func (a *arena) addString(s string) []byte {
	if cap(a.buf)-len(a.buf) < len(s) {
		a.buf = make([]byte, 0, max(64<<10, len(s)))
	}
	i := len(a.buf)
	a.buf = append(a.buf, s...)
	return a.buf[i:len(a.buf):len(a.buf)]
}
