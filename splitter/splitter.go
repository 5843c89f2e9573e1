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
	"sync"
	"sync/atomic"
	"time"

	"github.com/prsync/prsync/plan"
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
	Dest []string
	// Plan is the copy's planner: it sizes chunks and says when they are cut (package
	// plan). Nil cuts them at ChunkFiles paths or ChunkBytes bytes exactly.
	Plan       *plan.Planner
	ChunkFiles int
	ChunkBytes int64
	// ListBytes, when above 0, is the most bytes a chunk's --files-from list may hold: its
	// entries, one byte more each. A pull's lists are bounded so (rsync.AnchoredListBytes).
	ListBytes int64
	// ChunkWait sends the chunk being built when no path came for this long.
	ChunkWait time.Duration
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
	plan  *plan.Planner

	cur    *Chunk
	budget plan.Budget // what cur may hold
	list   int64       // the bytes of cur's list (Config.ListBytes)
	arena  arena
	nextID atomic.Int64 // the last chunk ID given; Split gives IDs from another goroutine
	links  *linkGroups
	srcRef *dirRef // the directory relative paths are under, for lstat
	roots  []rec   // the roots (".") read, sent last as chunks of their own (sendRoots)
	// the forms of a local DEST (Config.Dest) below the directory relative paths are taken
	// from, and below the one absolute paths are: paths under them fail (insideDest)
	destBelowBase, destBelowSlash []string

	// the records read (by feed) and applied (by Run), and whether feed has read the end
	read    atomic.Int64
	eof     atomic.Bool
	eofRead chan struct{} // closed by feed when it has read the end
	applied int64
	// the paths held while the planner has not said how to cut them (opening.go)
	holding   bool
	until     time.Time     // when to ask it again, if nothing else happens first
	unread    bool          // while holding, no more records are placed: what feed reads ahead decides
	readMore  chan struct{} // feed signals each block it reads
	held      [][]rec
	heldFiles int
	heldArena arena
	next      *plan.Budget     // the budget of the next chunk, when the planner has said it
	force     *plan.Budget     // the budget of every chunk cut while a wave is
	asked     func(plan.Input) // tests: told what ask asks the planner
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
	s := &Splitter{cfg: cfg, hooks: hooks, plan: cfg.Plan, eofRead: make(chan struct{}), readMore: make(chan struct{}, 1)}
	if s.plan == nil {
		s.plan = plan.New(plan.Config{Files: cfg.ChunkFiles, Bytes: cfg.ChunkBytes})
	}
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

	idle := time.NewTimer(time.Hour) // the chunk being built waited ChunkWait for a path
	idle.Stop()
	defer idle.Stop()
	again := time.NewTimer(time.Hour) // when to ask the planner again about the paths held
	again.Stop()
	defer again.Stop()
	var againAt time.Time
	eofRead := s.eofRead
	ended := false // the input's end was applied
	for {
		if ended && !s.holding {
			if err := s.flush(ctx, out); err != nil {
				return err
			}
			return s.sendRoots(ctx, out)
		}
		in := ordered
		var news, eofC, more <-chan struct{}
		var againC <-chan time.Time
		if s.holding {
			news, eofC = s.plan.Wake(), eofRead
			if s.unread {
				in, more = nil, s.readMore // the reader reads ahead; its count decides
			}
			if !s.until.IsZero() {
				if !s.until.Equal(againAt) {
					againAt = s.until
					again.Reset(max(time.Until(s.until), time.Millisecond))
				}
				againC = again.C
			}
			if s.heldFiles >= s.plan.HoldCap() {
				in = nil // the input waits: memory stays bounded
			}
		}
		if ended {
			in = nil
		}
		var u *unit
		select {
		case <-ctx.Done():
			s.unsent()
			return ctx.Err()
		case <-idle.C:
			if err := s.flush(ctx, out); err != nil {
				return err
			}
			continue
		case <-againC:
			againAt = time.Time{}
		case <-news:
		case <-eofC:
			eofRead = nil
		case <-more:
		case u = <-in:
		}
		if u == nil {
			building := s.cur != nil
			if err := s.ask(ctx, out); err != nil {
				return err
			}
			if !building && s.cur != nil && s.cfg.ChunkWait > 0 {
				idle.Reset(s.cfg.ChunkWait) // the paths held went into a chunk
			}
			continue
		}
		if u.end != nil {
			if !errors.Is(u.end, io.EOF) {
				s.unsent()
				return fmt.Errorf("%w: %w", ErrRead, u.end)
			}
			if s.hooks.Examined != nil {
				s.hooks.Examined()
			}
			ended = true
			if err := s.ask(ctx, out); err != nil {
				return err
			}
			if s.links != nil {
				for _, g := range s.links.drain() {
					if e := s.addGroup(ctx, g, out); e != nil {
						return e
					}
				}
			}
			continue
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
		if err := s.ask(ctx, out); err != nil {
			return err
		}
		// paths came: the chunk being built waits ChunkWait from here for more. This also
		// drops a wait that ran out while apply waited to hand a chunk on, which was not a
		// wait for paths (TestIdleWaitBlocked).
		idle.Stop()
		if s.cur != nil && s.cfg.ChunkWait > 0 {
			idle.Reset(s.cfg.ChunkWait)
		}
		if u.block != nil {
			s.flushHooks()
			free <- u.block[:cap(u.block)]
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
			close(s.eofRead)
		}
		select {
		case s.readMore <- struct{}{}:
		default:
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
	s.unsentHold()
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

// Split cuts a chunk that has not started into parts that start at the indexes cuts
// gives (plan.Planner.TailCuts), each with a new ID and the same source; it returns nil
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
	s.plan.Cut(s.cur.ID, s.cur.Len(), s.cur.Bytes) // before the pool may start it
	select {
	case out <- s.cur:
		s.cur = nil
		return nil
	case <-ctx.Done():
		s.unsent()
		return ctx.Err()
	}
}
