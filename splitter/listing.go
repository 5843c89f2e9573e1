package splitter

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// # Listing a network DEST
//
// On a network filesystem each lstat whose attributes are not cached waits a round trip to
// the server, and the kernel looks names up in one directory one at a time. rsync's
// receiver lstat's every path of its list in DEST, to compare it with the source: on an
// sshfs mount with a 2 ms round trip, 20,085 lstats of an incremental copy's paths took
// 48 s from one thread, and 48 s from 10. A listing of a directory brings the attributes of
// all its entries at once (sftp's READDIR, NFS's READDIRPLUS, SMB's directory queries),
// and the client caches them: the same 20,085 lstats took 0.5 s after a listing of their
// 85 directories, and the listings 1.0 to 1.7 s.
//
// So with DEST on a network filesystem, each DEST directory that the paths lead into is
// listed, and the rsyncs find the attributes cached:
//
//   - A directory is listed at the third of its paths, so that a list that names a file
//     or two in a huge directory does not read it all.
//   - The stat workers do not list: they queue the directory for one of a few goroutines
//     that list in the order the directories were reached, and go on.
//   - A chunk waits, before it is sent, until the listings queued so far have ended, so
//     that its rsync finds its directories listed. Without the wait, the 16 rsyncs of an
//     sshfs copy got to their directories before the listings did, and their lstats were
//     round trips again. A chunk waits settleMax at most, and not for a listing under
//     way for longer than that; once the first listing has ended, no chunk waits unless
//     a listing found an entry (in a fresh copy DEST's directories do not exist yet).
//   - A directory is listed again once listFresh has gone by: the clients keep
//     attributes for a while (sshfs 20 s, NFS 3 to 60 s, SMB 1 s).
//
// A listing decides nothing: rsync's own check still decides what is copied, on the
// attributes its lstat finds.

// listAfter is the number of a directory's paths that go by before it is listed.
const listAfter = 2

// settleMax is the longest a chunk waits for the listings (Settle).
const settleMax = 500 * time.Millisecond

// listFresh is how long after a directory's listing it is not listed again.
const listFresh = 10 * time.Second

// listers is how many goroutines list directories at once; listQueue how many directories
// may wait for one (more are not listed: a later path there queues it again).
const (
	listers   = 8
	listQueue = 4096
)

// Lister lists the DEST directories that paths lead into (see "Listing a network DEST").
type Lister struct {
	ref   *dirRef // DEST, clean and absolute; listed through no symlink below it
	queue chan *listing
	fresh time.Duration        // listFresh; the tests shorten it
	list  func(dir string) int // ref.list; the tests replace it

	mu    sync.Mutex
	found bool          // a listing read an entry: DEST holds a copy to check against
	first chan struct{} // closed when the first listing ends
	// pending are the listings queued or under way
	pending map[*pass]struct{}
	// recent are the directories the paths led into lately: a ring, since the workers go
	// through the list in its order, and find's order keeps a directory's paths together
	recent  [64]*listing
	next    int
	closed  bool
	running int // listers started and not ended: the last one to end after Close closes ref
}

// listing is one DEST directory the paths led into.
type listing struct {
	dir  string
	seen int       // paths that led into it
	at   time.Time // when its last listing ended; zero before the first
	pass *pass     // the listing queued or under way; nil when none is
	list int       // listings queued, for the tests
}

// pass is one listing of a directory, which the chunks wait for (Settle).
type pass struct {
	done    chan struct{} // closed when the listing ends
	started time.Time     // when a lister took it up; zero while it is queued (Lister.mu)
}

// NewLister returns a Lister of DEST directory dest (absolute).
func NewLister(dest string) *Lister {
	l := &Lister{ref: newBeneathRef(filepath.Clean(dest)), queue: make(chan *listing, listQueue), fresh: listFresh,
		first: make(chan struct{}), pending: map[*pass]struct{}{}}
	l.list = l.ref.list
	return l
}

// Close ends the listings: those queued are dropped, and the descriptor of DEST is closed
// once those under way end. It does not wait for them: a listing stuck on a server that
// stopped answering must not hold up prsync's exit.
func (l *Lister) Close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	close(l.queue)
	if l.running == 0 {
		l.ref.close()
	}
}

// Warm queues a listing of the DEST directory that path rel (clean, relative to DEST)
// lands in when one is due: at its third path, and again after listFresh. It does not
// wait for the listing.
func (l *Lister) Warm(rel string) {
	if rel == "." || rel == "" || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return
	}
	dir := l.ref.dir
	if i := strings.LastIndexByte(rel, '/'); i > 0 {
		if dir == "/" {
			dir = "/" + rel[:i]
		} else {
			dir = dir + "/" + rel[:i]
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var e *listing
	for _, x := range l.recent {
		if x != nil && x.dir == dir {
			e = x
			break
		}
	}
	if e == nil {
		e = &listing{dir: dir}
		l.recent[l.next] = e
		l.next = (l.next + 1) % len(l.recent)
	}
	e.seen++
	if e.pass != nil || l.closed || e.seen <= listAfter || (!e.at.IsZero() && time.Since(e.at) < l.fresh) {
		return
	}
	if l.running == 0 {
		l.running = listers
		for range listers {
			go l.lister()
		}
	}
	e.pass = &pass{done: make(chan struct{})}
	select {
	case l.queue <- e:
		e.list++
		l.pending[e.pass] = struct{}{}
	default: // full: a later path there queues it
		e.pass = nil
	}
}

// Settle waits until the listings queued so far have ended (or until ctx ends): the
// splitter calls it before it sends a chunk, so that the chunk's rsync finds its
// directories listed. Waiting for all of them, not only those of the chunk's own
// directories, also keeps the rsyncs from crowding the listings out of the mount: an
// sshfs copy took 7.0 s that way, and 8.5 to 9.1 s when each chunk waited for its own.
//
// A chunk waits settleMax at most, and for no listing that has been under way longer
// than that (a huge directory, a slow server): such a listing holds back one chunk at
// most. An earlier draft let no chunk wait for any listing under way when one chunk had
// waited settleMax, and the first wave of an incremental copy, which waits for the
// listings of every directory the stat workers reached, then sent the later chunks
// unlisted (9.2 s against 7.1 s). Until the first listing has ended, a chunk waits for
// it; after that, only if a listing has read an entry: in a fresh copy DEST's
// directories do not exist yet, and though a listing of a missing directory fails at
// once, the chunks would wait for listings that tell nothing (an sshfs copy of 1,000
// files lost 0.4 s that way).
func (l *Lister) Settle(ctx context.Context) {
	if l == nil {
		return
	}
	l.mu.Lock()
	none := len(l.pending) == 0
	l.mu.Unlock()
	if none {
		return
	}
	t := time.NewTimer(settleMax)
	defer t.Stop()
	wait := func(done <-chan struct{}) bool {
		select {
		case <-done:
			return true
		case <-t.C:
		case <-ctx.Done():
		}
		return false
	}
	if !wait(l.first) {
		return
	}
	for {
		l.mu.Lock()
		if !l.found {
			l.mu.Unlock()
			return // a fresh copy, so far
		}
		var p *pass
		for q := range l.pending {
			if q.started.IsZero() || time.Since(q.started) < settleMax {
				p = q // one that is queued, or under way for less than settleMax
				break
			}
		}
		l.mu.Unlock()
		if p == nil || !wait(p.done) {
			return
		}
	}
}

// lister lists the directories queued until the queue is closed; those still queued then
// are dropped.
func (l *Lister) lister() {
	defer func() {
		l.mu.Lock()
		if l.running--; l.running == 0 && l.closed {
			l.ref.close()
		}
		l.mu.Unlock()
	}()
	for e := range l.queue {
		l.mu.Lock()
		closed := l.closed
		e.pass.started = time.Now()
		l.mu.Unlock()
		n := 0
		if !closed {
			n = l.list(e.dir)
		}
		l.mu.Lock()
		l.found = l.found || n > 0
		select {
		case <-l.first:
		default:
			close(l.first)
		}
		p := e.pass
		e.at, e.pass = time.Now(), nil
		delete(l.pending, p)
		l.mu.Unlock()
		close(p.done)
	}
}

// listings returns how many listings of dir (absolute) were queued, for the tests; -1
// when it is not among the recent ones.
func (l *Lister) listings(dir string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.recent {
		if x != nil && x.dir == dir {
			return x.list
		}
	}
	return -1
}
