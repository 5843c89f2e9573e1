// Package splitter reads path records from a stream and groups them into chunks for rsync.
package splitter

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/prsync/prsync/chunksize"
	"github.com/prsync/prsync/rsync"
)

// Chunk is a batch of paths handed to one rsync.
type Chunk struct {
	ID int
	// Inputs are the records as read, for --failed and events.
	Inputs [][]byte
	// Src is rsync's source directory for the chunk (absolute; "/" or --root or the
	// working directory). Every chunk has one; a change of Src starts a new chunk.
	Src string
	// Entries are the same paths as written to rsync's --files-from list: relative to
	// Src, with "./" in front of a name that starts with '#' or ';' (rsync would skip it
	// as a comment), and with a "/./" anchor where the destination path starts if it is
	// not Src itself.
	Entries [][]byte
	// Bytes is the sum of the sizes of the regular files in the chunk.
	Bytes int64
	// Sizes holds each path's size when the chunk may be cut in parts (Splitter.Split):
	// chunks sized by time, without -H; nil otherwise.
	Sizes []int64
	// Root says the chunk's one path is the root of its Src ("."): its rsync runs with
	// rsync.RootAlone, which copies the root alone, not what lies in it. Such chunks are
	// cut last, one per root.
	Root bool
}

// Len returns the number of paths in the chunk.
func (c *Chunk) Len() int { return len(c.Inputs) }

// DefaultStatWorkers is how many goroutines examine records when Config.StatWorkers is 0.
const DefaultStatWorkers = 8

// Config says how to split.
type Config struct {
	// Sep is the record separator: '\n' or 0.
	Sep byte
	// Root is the absolute, clean source root (--root), or "".
	Root string
	// Cwd is the absolute working directory, the base of relative paths without Root.
	Cwd string
	// Dest is a local DEST as absolute, clean paths (as given, and with its symlinks
	// resolved), or nil. When DEST lies below the directory a path is taken from (Root,
	// Cwd, or "/" for an absolute path without Root), a path at or below DEST is DEST's
	// own: it fails with InsideDest instead of being copied into DEST, a level deeper at
	// every run. (A DEST above it, as in restoring /data/archive into /data, is no loop.)
	Dest       []string
	ChunkFiles int
	ChunkBytes int64
	ChunkWait  time.Duration
	// Sizer, when set, sizes chunks by time (package chunksize), within ChunkFiles and
	// ChunkBytes; nil cuts them at ChunkFiles paths or ChunkBytes bytes exactly.
	Sizer *chunksize.Sizer
	// Slots, with Sizer, returns how many rsyncs may run at once: once the end of the
	// input has been read and the paths left would not fill every slot with a chunk of
	// the budget, they are cut in that many equal chunks.
	Slots func() int
	// Opening, with Sizer and Slots, is asked how to cut the opening of a list whose first
	// chunk is a probe of chunksize.ProbeFiles paths: a short list (one whose end was read
	// before its first chunk was cut, and whose even split over the slots gives chunks
	// under ChunkFiles), or a list still streaming when the first chunk's wait for its end
	// (endWait) ran out. It returns into how many parts to cut rest paths after the probe
	// (see chunksize.Policy.OpeningParts), and false while the probe has not shown enough
	// yet: it is asked again every openingPoll, with rest grown as more paths arrive, until
	// it answers (it bounds the wait itself). Nil splits a short list evenly over the slots
	// at once and cuts a streaming one by the Sizer's budget from its first chunk.
	Opening func(probe *Chunk, rest int) (parts int, known bool)
	// Shard and Shards select the paths whose hash mod Shards is Shard; Shards <= 1 keeps all.
	Shard, Shards int
	// HardLinks keeps all links of an inode (nlink > 1) in the same shard and chunk.
	HardLinks bool
	// BlockSize is the read size; 0 means 256 KiB.
	BlockSize int
	// Quick, when set, settles paths whose local copy already matches as up to date.
	Quick *QuickCheck
	// List, when set, lists the DEST directories the paths lead into before they go into
	// a chunk: for a DEST on a network filesystem (see "Listing a network DEST").
	List *Lister
	// StatWorkers is how many goroutines examine records (lstat, quick check) at once; 0
	// means DefaultStatWorkers, or NetStatWorkers on a network filesystem (netfs.go).
	StatWorkers int
	// Sizes says each record is SIZE<TAB>PATH (as find -printf '%s\t%P\0' writes it): the
	// size counts for ChunkBytes and the biggest-first order, and the source is not
	// lstat'ed (unless HardLinks needs its inode). A record without a tab, or with a size
	// that is not a number, is a failed path.
	Sizes bool
	// Dirs, when set, collects the directories the paths of this shard touch, for the
	// deletion pass.
	Dirs *Dirs
	// SourceLost, when set, is asked before a path whose lstat found it missing is settled
	// vanished: an error says the source's storage went away (a mount that dropped leaves
	// its bare mount point), and the path fails with it instead.
	SourceLost func(abs string) error
	// RemoteSrc, when set, is a remote source (HOST:PATH, rsync://HOST/MODULE/PATH, …):
	// every chunk's Src, paths are never lstat'ed, and Root is the path part of it that
	// absolute input paths must lie under ("" when it has none a local path can name).
	RemoteSrc string
}

// Hooks receive what the splitter settles without rsync. Any may be nil.
type Hooks struct {
	// Settled is called for a path that will not go to rsync: status is rsync.Vanished or
	// rsync.Failed.
	Settled func(input []byte, status rsync.Status, reason string)
	// Accepted is called for each path put into a chunk.
	Accepted func(size int64)
	// Fresh is called for each path the quick check found up to date.
	Fresh func(input []byte, size int64)
	// Empty is called for each empty record.
	Empty func()
	// Unsent receives the paths of a chunk that was being built when ctx ended.
	Unsent func(inputs [][]byte)
	// Flush is called after each block of input and before each chunk is sent, so that a
	// caller can batch what the hooks above told it and pass it on before the chunk.
	Flush func()
	// Examined is called once, when the input's end was read and every record before it
	// examined (lstat'ed): no stat worker has work left. The last chunks are sent after it.
	Examined func()
}

// Splitter turns a stream of records into chunks.
type Splitter struct {
	cfg   Config
	hooks Hooks

	cur    *Chunk
	budget chunksize.Budget // what cur may hold
	arena  arena
	nextID atomic.Int64 // the last chunk ID given; Split gives IDs from another goroutine
	links  *linkGroups
	srcRef *dirRef // the directory relative paths are under, for lstat
	roots  []rec   // the roots (".") read, sent last as chunks of their own (sendRoots)
	// the forms of a local DEST (Config.Dest) below the directory relative paths are taken
	// from, and below the one absolute paths are: paths under them fail (insideDest)
	destBelowBase, destBelowSlash []string

	// the records read (by feed) and applied (by Run), and whether feed has read the end:
	// then the records left are known, and the last chunks share them (tailFiles each)
	read      atomic.Int64
	eof       atomic.Bool
	applied   int64
	tailFiles int
	// probe is the first chunk of a short list or of one still streaming, cut to learn
	// what its paths cost (Config.Opening); probing says the cut of the rest waits for it
	probe   *Chunk
	probing bool
	opened  bool // the rest was cut as Opening said: tailFiles a chunk, by count alone
	// streaming says the probe was cut while the input was still being read (opening.go);
	// once it is sent (waving), the paths after it are held in wave until Opening answers
	streaming, waving bool
	wave              [][]rec
	waveFiles         int
	waveArena         arena
	// waveFloor is the paths of a part of a wave cut while the input streamed (release):
	// until the Sizer's budget is timed, the chunks after it hold at least that many
	waveFloor int
	// the paths put into chunks so far and their bytes: what a path left holds, on average
	cutFiles int64
	cutBytes int64
}

// New returns a Splitter.
func New(cfg Config, hooks Hooks) *Splitter {
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = 256 << 10
	}
	if cfg.ChunkFiles <= 0 {
		cfg.ChunkFiles = 1
	}
	cfg.StatWorkers = statWorkers(cfg)
	if cfg.ChunkBytes <= 0 {
		cfg.ChunkBytes = 1 << 62
	}
	s := &Splitter{cfg: cfg, hooks: hooks}
	if base := cmp.Or(cfg.Root, cfg.Cwd); cfg.RemoteSrc == "" && filepath.IsAbs(base) {
		s.srcRef = newDirRef(filepath.Clean(base))
	}
	if cfg.HardLinks {
		s.links = newLinkGroups()
	}
	s.destBelowBase, s.destBelowSlash = destsBelow(cfg.Dest, cmp.Or(cfg.Root, cfg.Cwd)), destsBelow(cfg.Dest, "/")
	if cfg.Root != "" {
		s.destBelowSlash = s.destBelowBase // an absolute path is taken from --root too
	}
	return s
}

// destsBelow returns the forms of DEST that lie strictly below dir.
func destsBelow(dest []string, dir string) []string {
	var out []string
	for _, d := range dest {
		if below(d, dir) {
			out = append(out, d)
		}
	}
	return out
}

// Chunks returns the number of chunks made (the highest chunk ID), those Split made
// included.
func (s *Splitter) Chunks() int { return int(s.nextID.Load()) }

// ErrRead wraps an error reading the input.
var ErrRead = errors.New("read input")

// unit is a run of records of one block, examined by one worker and then applied in
// input order.
type unit struct {
	recs  [][]byte
	looks []look
	done  chan struct{} // a worker sends on it once every record is examined
	block []byte        // set on the last unit of a block: free again once applied
	end   error         // the input ended (io.EOF) or failed; a unit without records
}

// Run reads r to EOF and sends chunks on out. It returns nil at EOF, ctx.Err() when ctx
// ends (the chunk being built goes to Hooks.Unsent), or an error wrapping ErrRead.
// Run does not close out.
//
// Records flow through three stages at once: one goroutine reads blocks and cuts them
// into units, StatWorkers goroutines examine units (the lstat of the source and of DEST),
// and Run applies the units in input order. No stage waits for a whole block to be
// examined, so a worker blocked on a cold inode never holds the others back; with a cold
// cache a re-run spends its time in those lstats, and this keeps both CPUs busy.
func (s *Splitter) Run(ctx context.Context, r io.Reader, out chan<- *Chunk) error {
	stop := make(chan struct{})
	var workers sync.WaitGroup
	defer s.srcRef.close() // after the workers, the only users of the descriptor
	defer s.cfg.List.Close()
	defer workers.Wait()
	defer close(stop)

	const lookahead = 8 // blocks read ahead of the one being applied
	free := make(chan []byte, lookahead)
	for range lookahead {
		free <- make([]byte, s.cfg.BlockSize)
	}
	// units read ahead of the one being applied: 8 per worker. The blocks alone do not
	// bound them: a block of short paths (24 bytes each) holds 80 units, and each unit's
	// looks take 37 KiB, so 8 such blocks ahead held 25 MiB.
	ahead := 8 * s.cfg.StatWorkers
	ordered := make(chan *unit, ahead)
	work := make(chan *unit, ahead)
	units := sync.Pool{New: func() any { return &unit{done: make(chan struct{}, 1)} }}
	for range s.cfg.StatWorkers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			var c cursors
			defer c.reset()
			for {
				select {
				case <-stop: // before taking more work: after a cancel, at most one unit
					return
				default:
				}
				select {
				case u := <-work:
					for i, in := range u.recs {
						s.examine(in, &u.looks[i], &c)
					}
					c.reset()
					u.done <- struct{}{}
				case <-stop:
					return
				}
			}
		}()
	}
	go s.feed(r, free, &units, ordered, work, stop)

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var poll *time.Ticker // while the wave after a streaming list's probe waits (opening.go)
	defer func() {
		if poll != nil {
			poll.Stop()
		}
	}()
	for {
		var u *unit
		var tick <-chan time.Time
		in := ordered
		if s.waving {
			if poll == nil {
				poll = time.NewTicker(openingPoll)
			}
			tick = poll.C
			if s.waveFull() {
				in = nil // the input waits as it did before the wave: memory stays bounded
			}
		}
		select {
		case <-ctx.Done():
			s.unsent()
			return ctx.Err()
		case <-timer.C:
			if err := s.flush(ctx, out); err != nil {
				return err
			}
			continue
		case <-tick:
			if err := s.openWave(ctx, out, false); err != nil {
				return err
			}
			continue
		case u = <-in:
		}
		if u.end != nil {
			if !errors.Is(u.end, io.EOF) {
				s.unsent()
				return fmt.Errorf("%w: %w", ErrRead, u.end)
			}
			if s.hooks.Examined != nil {
				s.hooks.Examined()
			}
			if s.waving {
				if err := s.openWave(ctx, out, true); err != nil {
					return err
				}
			}
			if s.links != nil {
				for _, g := range s.links.drain() {
					if e := s.addGroup(ctx, g, out); e != nil {
						return e
					}
				}
			}
			if err := s.flush(ctx, out); err != nil {
				return err
			}
			return s.sendRoots(ctx, out)
		}
		select {
		case <-u.done:
		case <-ctx.Done():
			s.unsent()
			return ctx.Err()
		}
		for i, in := range u.recs {
			s.applied++
			if err := s.apply(ctx, in, &u.looks[i], out); err != nil {
				return err
			}
		}
		if u.block != nil {
			s.flushHooks()
			free <- u.block[:cap(u.block)]
			timer.Stop()
			if s.cur != nil && s.cfg.ChunkWait > 0 {
				timer.Reset(s.cfg.ChunkWait)
			}
		}
		clear(u.looks) // drop the strings they hold
		u.recs, u.looks, u.block = u.recs[:0], u.looks[:0], nil
		units.Put(u)
	}
}

// unitRecords is the most records a unit holds: enough that workers mostly examine
// different directories at once, few enough that a block keeps them all busy.
const unitRecords = 128

// feed reads blocks from r, cuts them into records and the records into units, and
// hands each unit to the workers and, in input order, to Run. A block goes back to free
// when Run has applied its last unit. At the end of the input it sends a unit with end
// set. It stops when stop is closed, though it may stay blocked in r.Read until then.
func (s *Splitter) feed(r io.Reader, free chan []byte, units *sync.Pool, ordered, work chan<- *unit, stop <-chan struct{}) {
	send := func(u *unit) bool {
		select {
		case ordered <- u:
		case <-stop:
			return false
		}
		if u.end != nil {
			return true
		}
		select {
		case work <- u:
			return true
		case <-stop:
			return false
		}
	}
	var carry []byte
	var recs [][]byte
	for {
		var buf []byte
		select {
		case buf = <-free:
		case <-stop:
			return
		}
		n, err := r.Read(buf)
		recs = recs[:0]
		for b := buf[:n]; len(b) > 0; {
			i := bytes.IndexByte(b, s.cfg.Sep)
			if i < 0 {
				carry = append(carry, b...)
				break
			}
			rec := b[:i]
			if len(carry) > 0 {
				rec = append(bytes.Clone(carry), rec...)
				carry = carry[:0]
			}
			recs = append(recs, rec)
			b = b[i+1:]
		}
		if err != nil && len(carry) > 0 {
			recs = append(recs, bytes.Clone(carry))
			carry = carry[:0]
		}
		s.read.Add(int64(len(recs)))
		if err != nil {
			s.eof.Store(true)
		}
		if len(recs) == 0 {
			free <- buf
		}
		per := max(1, min(unitRecords, (len(recs)+s.cfg.StatWorkers-1)/s.cfg.StatWorkers))
		for lo := 0; lo < len(recs); lo += per {
			hi := min(lo+per, len(recs))
			u := units.Get().(*unit)
			u.recs = append(u.recs, recs[lo:hi]...)
			if cap(u.looks) < len(u.recs) {
				u.looks = make([]look, len(u.recs))
			}
			u.looks = u.looks[:len(u.recs)]
			if hi == len(recs) {
				u.block = buf
			}
			if !send(u) {
				return
			}
		}
		if err != nil {
			u := units.Get().(*unit)
			u.end = err
			send(u)
			return
		}
		if len(carry) > 1<<20 && cap(carry) > 4<<20 {
			// keep very long records, but do not keep a huge buffer for the rest
			carry = append([]byte(nil), carry...)
		}
	}
}

func (s *Splitter) flushHooks() {
	if s.hooks.Flush != nil {
		s.hooks.Flush()
	}
}

func (s *Splitter) unsent() {
	defer s.flushHooks()
	if s.cur != nil && s.hooks.Unsent != nil {
		s.hooks.Unsent(s.cur.Inputs)
	}
	s.unsentWave()
	s.unsentHeld(s.roots) // held for the end
	s.roots = nil
	if s.links != nil {
		for _, g := range s.links.drain() {
			s.unsentHeld(g) // held for its other links
		}
	}
	s.cur = nil
}

// unsentHeld hands records held out of every chunk to Hooks.Unsent, counting them as
// accepted first: they were never counted.
func (s *Splitter) unsentHeld(rs []rec) {
	if len(rs) == 0 || s.hooks.Unsent == nil {
		return
	}
	ins := make([][]byte, len(rs))
	for i, r := range rs {
		ins[i] = r.input
		if s.hooks.Accepted != nil {
			s.hooks.Accepted(r.size)
		}
	}
	s.hooks.Unsent(ins)
}

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

// InsideDest is the reason a path inside a local DEST fails: `cd /data && find . | prsync
// ./backup` lists the backup's own files, and copying them would nest a copy of DEST in
// itself at every run.
const InsideDest = "inside DEST: DEST's own file is not copied into DEST (leave DEST out of the list)"

// insideDest reports whether the local source path abs is DEST or below it, where DEST
// lies below the directory the path was taken from (absolute: an absolute input path).
func (s *Splitter) insideDest(abs string, absolute bool) bool {
	dests := s.destBelowBase
	if absolute {
		dests = s.destBelowSlash
	}
	for _, d := range dests {
		if abs == d || below(abs, d) {
			return true
		}
	}
	return false
}

// below reports whether the clean absolute path p lies strictly below dir.
func below(p, dir string) bool {
	if dir == "/" {
		return p != "/"
	}
	return len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir)
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

// sendRoots sends each root held by apply as a chunk of its own (Chunk.Root), after
// every other chunk: rsync then copies the root's attributes once the paths below it
// have landed.
func (s *Splitter) sendRoots(ctx context.Context, out chan<- *Chunk) error {
	for len(s.roots) > 0 {
		r := s.roots[0]
		s.roots = s.roots[1:]
		if s.hooks.Accepted != nil {
			s.hooks.Accepted(r.size)
		}
		s.flushHooks()
		c := &Chunk{ID: int(s.nextID.Add(1)), Src: r.src, Inputs: [][]byte{r.input}, Entries: [][]byte{[]byte(r.entry)}, Root: true}
		select {
		case out <- c:
		case <-ctx.Done():
			if s.hooks.Unsent != nil {
				s.hooks.Unsent(c.Inputs)
			}
			s.unsent()
			return ctx.Err()
		}
	}
	return nil
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

// addGroup puts records into the current chunk, all in the same one.
func (s *Splitter) addGroup(ctx context.Context, g []rec, out chan<- *Chunk) error {
	if s.waving {
		s.hold(g)
		return nil
	}
	var size int64
	for _, r := range g {
		size += r.size
	}
	if s.cur != nil && (s.budget.Over(s.cur.Len()+len(g), s.cur.Bytes+size) || s.cur.Src != g[0].src) {
		if err := s.flush(ctx, out); err != nil {
			return err
		}
		if s.waving { // that was the probe: g is the first path after it
			s.hold(g)
			return nil
		}
	}
	if s.cur == nil {
		s.budget = chunksize.Fixed(s.cfg.ChunkFiles, s.cfg.ChunkBytes)
		if s.cfg.Sizer != nil {
			s.budget = s.cfg.Sizer.Budget()
			if !s.budget.Timed && s.budget.Files < s.waveFloor {
				s.budget.Files = min(s.waveFloor, s.cfg.ChunkFiles)
			}
			s.shareTail(ctx)
		}
		n := min(s.budget.Files, 4096)
		s.cur = &Chunk{ID: int(s.nextID.Add(1)), Src: g[0].src, Inputs: make([][]byte, 0, n), Entries: make([][]byte, 0, n)}
		if s.probing && s.probe == nil {
			s.probe = s.cur
		}
		if s.cfg.Sizer != nil && !s.cfg.HardLinks {
			s.cur.Sizes = make([]int64, 0, n)
		}
	}
	s.cutFiles += int64(len(g))
	s.cutBytes += size
	for _, r := range g {
		s.cur.Inputs = append(s.cur.Inputs, s.arena.add(r.input))
		s.cur.Entries = append(s.cur.Entries, s.arena.addString(r.entry))
		s.cur.Bytes += r.size
		if s.cur.Sizes != nil {
			s.cur.Sizes = append(s.cur.Sizes, r.size)
		}
		if s.hooks.Accepted != nil {
			s.hooks.Accepted(r.size)
		}
	}
	if s.budget.Reached(s.cur.Len(), s.cur.Bytes) {
		return s.flush(ctx, out)
	}
	return nil
}

// endWait is how long the first chunk waits for the end of an input that is still being
// read: a list from a file, or from a find that ends within it, is then known whole and
// can be probed (Config.Opening). A file's end comes with the read after its last bytes;
// a find of 10,000 paths on a loaded 2-CPU machine took more than 50 ms. It is at most
// ChunkWait.
var endWait = 250 * time.Millisecond // a variable for the tests

// streamWait is how long the first chunk waits for the end of an input once it has read
// enough paths for a probe (more than minProbeList). A list still streaming then is probed
// at once (streamingProbe) rather than at endWait: the paths read while the probe runs are
// held, and cut as a short list's are if the input ends meanwhile, so waiting longer for the
// end gains nothing, and it delayed the first rsync of a find over a cold tree by a quarter
// of a second (the first chunk started at 0.27 s, against 0.07 s with --chunk-files).
const streamWait = 25 * time.Millisecond

// awaitEnd waits up to endWait (or ChunkWait, if shorter) for the input's end to be read,
// or until more paths have been read than a short list holds (Slots × ChunkFiles), or,
// once more than minProbeList paths have been read, up to streamWait.
func (s *Splitter) awaitEnd(ctx context.Context) {
	start := time.Now()
	deadline := start.Add(min(endWait, max(s.cfg.ChunkWait, 0)))
	long := int64(max(s.cfg.ChunkFiles, 1))
	if s.cfg.Slots != nil {
		long *= int64(max(s.cfg.Slots(), 1))
	}
	for !s.eof.Load() && s.read.Load() < long && time.Now().Before(deadline) && ctx.Err() == nil {
		if s.read.Load() > minProbeList && time.Since(start) >= streamWait {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// minProbeList is the fewest paths of a short list that is probed before it is cut
// (Config.Opening); a shorter one is split evenly over the slots at once.
const minProbeList = 4 * chunksize.ProbeFiles

// minTailFiles is the fewest paths shareTail gives a chunk: below it, another rsync's
// start costs more than the paths' share of the work saves.
const minTailFiles = 4

// shareTail, once the end of the input has been read, cuts the paths left into one chunk
// per slot when the budget would leave slots without one: a short list is spread over
// every slot from its first chunk, and the input's last chunks end together. It is called
// only with a Sizer.
func (s *Splitter) shareTail(ctx context.Context) {
	if s.cfg.Opening != nil && s.tailFiles == 0 && s.nextID.Load() == 0 && !s.probing {
		s.awaitEnd(ctx)
		if s.streamingProbe(ctx) {
			return
		}
	}
	if s.tailFiles == 0 && s.cfg.Slots != nil && s.eof.Load() {
		slots := max(s.cfg.Slots(), 1)
		left := int(s.read.Load()-s.applied) + 1 // the record being applied is not counted
		switch {
		case s.probe != nil:
			// the probe has been cut: the rest waits for what it shows
			n, ok := s.awaitOpening(ctx, left)
			if !ok {
				n = slots // the run ends: as without a probe
			}
			s.probe, s.probing, s.opened = nil, false, true
			s.tailFiles = s.partFiles(left, n)
		case s.cfg.Opening != nil && !s.probing && s.nextID.Load() == 0 && !s.budget.Timed &&
			left > minProbeList && left < slots*s.cfg.ChunkFiles:
			// a short list, complete before its first chunk: probe it first
			s.probing = true
			s.budget.Files = min(chunksize.ProbeFiles, s.cfg.ChunkFiles)
			return
		}
		if s.tailFiles == 0 && (left < slots*s.budget.Files || !s.budget.Timed) {
			// every slot a part, but no part shorter than the Sizer's MinPart as predicted
			// (the same rule as the tail split of a waiting chunk, Tail): before, the 905
			// paths left after a wave of 8 were cut into 8 parts of 114, a session each,
			// against a daemon that took 3 (bench scenario 6)
			n := s.cfg.Sizer.TailParts(left, s.meanBytes()*int64(left), slots)
			s.tailFiles = max((left+n-1)/n, minTailFiles)
			if !s.budget.Timed {
				// nothing known yet, but a wave took the slots: parts of a wave part's paths
				s.tailFiles = max(s.tailFiles, s.waveFloor)
			}
		} else if s.tailFiles == 0 {
			return
		}
	}
	if s.tailFiles == 0 {
		return
	}
	if s.opened {
		// the parts Opening chose: neither the fit of one probe nor its growth bound cut them
		s.budget = chunksize.Fixed(min(s.tailFiles, s.cfg.ChunkFiles), s.cfg.ChunkBytes)
	} else if s.budget.Timed {
		s.budget.Files = min(s.budget.Files, s.tailFiles)
	} else {
		s.budget.Files = min(s.tailFiles, s.cfg.ChunkFiles) // nothing known yet: the list's length is
	}
}

// meanBytes returns the bytes of a path put into a chunk so far, on average (0 before any).
func (s *Splitter) meanBytes() int64 {
	if s.cutFiles == 0 {
		return 0
	}
	return s.cutBytes / s.cutFiles
}

// Split cuts a chunk that has not started into parts that start at the indexes cuts
// gives (chunksize.Sizer.Split), each with a new ID and the same source; it returns nil
// when c cannot be cut (it has no Sizes: -H keeps an inode's links in one chunk). It is
// safe to call while Run runs.
func (s *Splitter) Split(c *Chunk, cuts []int) []*Chunk {
	if c.Sizes == nil || len(cuts) == 0 {
		return nil
	}
	parts := make([]*Chunk, 0, len(cuts)+1)
	lo := 0
	for k := 0; k <= len(cuts); k++ {
		hi := c.Len()
		if k < len(cuts) {
			hi = cuts[k]
		}
		if hi <= lo || hi > c.Len() {
			return nil
		}
		p := &Chunk{ID: int(s.nextID.Add(1)), Src: c.Src, Inputs: c.Inputs[lo:hi:hi], Entries: c.Entries[lo:hi:hi], Sizes: c.Sizes[lo:hi:hi], Root: c.Root}
		for _, b := range p.Sizes {
			p.Bytes += b
		}
		parts = append(parts, p)
		lo = hi
	}
	return parts
}

func (s *Splitter) flush(ctx context.Context, out chan<- *Chunk) error {
	s.flushHooks()
	if s.cur == nil {
		return nil
	}
	s.cfg.List.Settle(ctx)
	select {
	case out <- s.cur:
		if s.cur == s.probe && s.streaming {
			s.waving = true // the paths after it wait for what it shows (opening.go)
		}
		s.cur = nil
		return nil
	case <-ctx.Done():
		s.unsent()
		return ctx.Err()
	}
}

// resolve returns the absolute path to lstat, rsync's source directory and list entry
// for it, and where it lands under DEST (clean and relative, "." for DEST itself).
// Entries are kept short: rsync reads its --files-from list one byte at a time, and with
// long absolute entries that read costs more than the copy of small files.
func (s *Splitter) resolve(in []byte) (abs, src, entry, lands string, err error) {
	if bytes.IndexByte(in, 0) >= 0 {
		return "", "", "", "", errors.New("name contains a NUL byte")
	}
	if s.cfg.RemoteSrc != "" {
		src, entry, lands, err = s.resolveRemote(string(in))
		return "", src, entry, lands, err
	}
	if len(in) > 0 && in[0] == '/' {
		p := string(in)
		if !isClean(p[1:]) {
			p = filepath.Clean(p)
		}
		if s.cfg.Root == "" {
			lands = cmp.Or(p[1:], ".")
			return p, "/", protect(p[1:]), lands, nil
		}
		rest, ok := under(p, s.cfg.Root)
		if !ok {
			return "", "", "", "", fmt.Errorf("outside --root %s", s.cfg.Root)
		}
		return p, s.cfg.Root, protect(rest), rest, nil
	}
	base := s.cfg.Root
	if base == "" {
		base = s.cfg.Cwd
	}
	var rel string
	if r := trimDot(in); isClean(r) {
		// the common case, as find . prints it: one allocation for abs, rel a part of it
		if base == "/" {
			abs = "/" + string(r)
			rel = abs[1:]
		} else {
			abs = base + "/" + string(r)
			rel = abs[len(base)+1:]
		}
	} else {
		rel = filepath.Clean(string(in))
		if rel == ".." || strings.HasPrefix(rel, "../") {
			if s.cfg.Root != "" {
				return "", "", "", "", fmt.Errorf("outside --root %s", s.cfg.Root)
			}
			return "", "", "", "", errors.New("outside the working directory: use absolute paths or --root")
		}
		abs = joinClean(base, rel)
	}
	if s.cfg.Root == "" && s.cfg.HardLinks && base != "/" {
		// one source for every path, so that the links of an inode share a chunk
		return abs, "/", anchor(base[1:], rel), rel, nil
	}
	return abs, base, protect(rel), rel, nil
}

// resolveRemote places a path of a remote source: relative paths are taken from it,
// absolute ones must lie under its path part.
func (s *Splitter) resolveRemote(p string) (src, entry, lands string, err error) {
	outside := fmt.Errorf("outside --root %s", s.cfg.RemoteSrc)
	if filepath.IsAbs(p) {
		if !isClean(p[1:]) {
			p = filepath.Clean(p)
		}
		if s.cfg.Root == "" || !filepath.IsAbs(s.cfg.Root) {
			return "", "", "", fmt.Errorf("an absolute path, but --root %s names no absolute directory: give paths relative to it", s.cfg.RemoteSrc)
		}
		rest, ok := under(p, s.cfg.Root)
		if !ok {
			return "", "", "", outside
		}
		return s.cfg.RemoteSrc, protect(rest), rest, nil
	}
	rel := cleanRel(p)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", "", "", outside
	}
	return s.cfg.RemoteSrc, protect(rel), rel, nil
}

// cleanRel is filepath.Clean of a relative path, without its cost for the common
// shapes: "./a/b" (as find . prints it) and paths that are clean already.
func cleanRel(p string) string {
	if q := trimDot(p); isClean(q) {
		return q
	}
	return filepath.Clean(p)
}

// trimDot drops the leading "./" of a relative path, as find . prints it, when the rest
// is not empty and does not start with '/'.
func trimDot[T string | []byte](p T) T {
	for len(p) > 2 && p[0] == '.' && p[1] == '/' && p[2] != '/' {
		p = p[2:]
	}
	return p
}

// isClean reports whether a relative path is what filepath.Clean makes of it.
func isClean[T string | []byte](p T) bool {
	if len(p) == 0 || p[0] == '/' || p[len(p)-1] == '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch {
		case p[i] == '/' && i+1 < len(p) && p[i+1] == '/':
			return false
		case p[i] == '.' && (i == 0 || p[i-1] == '/'):
			j := i + 1
			if j < len(p) && p[j] == '.' {
				j++
			}
			if j == len(p) || p[j] == '/' {
				return false // a "." or ".." element
			}
		}
	}
	return true
}

// joinClean joins a clean absolute base and a clean relative path.
func joinClean(base, rel string) string {
	switch {
	case rel == ".":
		return base
	case base == "/":
		return "/" + rel
	}
	return base + "/" + rel
}

// protect makes rel a --files-from entry (rsync.ListEntry: "./" before a name rsync would
// read as a comment), and turns the empty path (the source directory itself) into ".".
func protect(rel string) string {
	if rel == "" {
		return "."
	}
	return rsync.ListEntry(rel)
}

// under reports whether p is root or below it, and the rest of p after root.
func under(p, root string) (string, bool) {
	if p == root {
		return ".", true
	}
	if root == "/" {
		return p[1:], true
	}
	if len(p) > len(root) && p[:len(root)] == root && p[len(root)] == '/' {
		return p[len(root)+1:], true
	}
	return "", false
}

// anchor writes base/./rel for a relative base: rsync copies it to DEST/rel.
func anchor(base, rel string) string { return base + "/./" + rel }

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

// Shard returns the shard of n that path p belongs to: xxhash64 (XXH64, seed 0) of
// the path's bytes, mod n. The function is part of prsync's stable contract.
func Shard(p []byte, n int) int {
	if n <= 1 {
		return 0
	}
	return int(xxhash.Sum64(p) % uint64(n))
}
