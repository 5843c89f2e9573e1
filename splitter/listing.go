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
//   - A chunk waits, before it is sent, until the listings queued so far have ended. The
//     first chunks of an incremental copy thus wait for the listings of every directory
//     the stat workers reached meanwhile, and every rsync then finds its directories
//     listed. Without the wait, the 16 rsyncs of an sshfs copy got to their directories
//     before the listings did, and their lstats were round trips again. The chunks sent
//     in one spell of listings wait settleMax at most, together; and none waits until a
//     listing has found an entry (in a fresh copy DEST's directories do not exist yet).
//   - A directory is listed again once listFresh has gone by: the clients keep
//     attributes for a while (sshfs 20 s, NFS 3 to 60 s, SMB 1 s).
//
// A listing decides nothing: rsync's own check still decides what is copied, on the
// attributes its lstat finds.

// listAfter is the number of a directory's paths that go by before it is listed.
const listAfter = 2

// settleMax is the longest the chunks wait for listings, in one spell of them (Settle).
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

	mu      sync.Mutex
	pending int           // listings queued or under way
	found   bool          // a listing read an entry: DEST holds a copy to check against
	idle    chan struct{} // closed when pending falls to 0; nil while it is 0
	// until is when Settle stops waiting in this busy spell (since pending rose from 0):
	// settleMax after its start, for all the chunks sent in it together
	until time.Time
	// recent are the directories the paths led into lately: a ring, since the workers go
	// through the list in its order, and find's order keeps a directory's paths together
	recent  [64]*listing
	next    int
	closed  bool
	running int // listers started and not ended: the last one to end after Close closes ref
}

// listing is one DEST directory the paths led into.
type listing struct {
	dir    string
	seen   int       // paths that led into it
	at     time.Time // when its last listing ended; zero before the first
	queued bool      // a listing of it is queued or under way
	list   int       // listings queued, for the tests
}

// NewLister returns a Lister of DEST directory dest (absolute).
func NewLister(dest string) *Lister {
	l := &Lister{ref: newBeneathRef(filepath.Clean(dest)), queue: make(chan *listing, listQueue), fresh: listFresh}
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
// wait for the listing: the path goes on into a chunk, and its rsync starts later.
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
	if l.closed || e.queued || e.seen <= listAfter || (!e.at.IsZero() && time.Since(e.at) < l.fresh) {
		return
	}
	if l.running == 0 {
		l.running = listers
		for range listers {
			go l.lister()
		}
	}
	select {
	case l.queue <- e:
		e.queued = true
		e.list++
		if l.pending++; l.idle == nil {
			l.idle = make(chan struct{})
			l.until = time.Now().Add(settleMax)
		}
	default: // full: a later path there queues it
	}
}

// Settle waits until the listings queued so far have ended (or until ctx ends): the
// splitter calls it before it sends a chunk, so that the chunk's rsync finds its
// directories listed. The chunks sent while listings are under way wait no longer than
// settleMax together, from when the first of those listings was queued: a directory
// that takes longer (a huge one, a slow server) holds the copy back that long once, not
// at every chunk. Until a listing has read an entry, it does not wait: in a fresh copy
// the directories do not exist yet, and the chunks would wait for nothing (an sshfs copy
// of 1,000 files lost 0.4 s that way).
func (l *Lister) Settle(ctx context.Context) {
	if l == nil {
		return
	}
	l.mu.Lock()
	idle, found, wait := l.idle, l.found, time.Until(l.until)
	l.mu.Unlock()
	if idle == nil || !found || wait <= 0 {
		return // none under way; none found a thing yet (a fresh copy); or waited enough
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
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
		l.mu.Unlock()
		n := 0
		if !closed {
			n = l.list(e.dir)
		}
		l.mu.Lock()
		l.found = l.found || n > 0
		e.at, e.queued = time.Now(), false
		if l.pending--; l.pending == 0 {
			close(l.idle)
			l.idle = nil
		}
		l.mu.Unlock()
	}
}

// listings returns how many listings of dir (absolute) were started, for the tests; -1
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
