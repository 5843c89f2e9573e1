package exec

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// Remote lists: the chunks' lists of a push, handed to rsync through the far side.
//
// In a push (a daemon's module, an ssh destination) rsync's client is the sender, and it
// reads a list given on stdin one byte per read(2), each after a poll(2). With
// --files-from=:NAME the far side reads NAME and sends it over the protocol in blocks.
// RemoteLists writes each chunk's list to a local staging directory as the splitter cuts
// it (Offer), and uploads the lists waiting there, all in one rsync session, when a chunk
// whose list is not on the far side yet starts and the lists waiting come to MinBytes
// (For): one upload carries the lists of every chunk cut by then. The lists live in
// rsync.ListDir in DEST's root as RUNID.CHUNK, where RUNID is HOST-PID-START: a chunk's
// list goes from the staging directory once its chunk has settled (Done), and from the
// far side with the next upload (which deletes this run's lists that are no longer
// staged) or at the copy's end (Clear), which also removes the directory once it is
// empty: before the root chunk, whose rsync sets the mtime of DEST's root that the
// removal changes, or else at Close. When other lists keep the directory there, Clear
// lists it and sweeps the lists that crashed runs left: this host's whose prsync is
// gone, and any other host's older than StaleAge. The
// sweep is at the end of a run, not its start, where it would delay the first chunks: a
// listing is a session of its own (60 ms to a daemon on this machine, 0.3 s over ssh).

// ListStats say what the remote lists did in a run.
type ListStats struct {
	Uploads       int     // upload sessions that ran (failed ones too)
	UploadFailed  int     // of them, failed
	UploadBytes   int64   // list bytes uploaded
	UploadSeconds float64 // the upload sessions' time
	Remote        int     // rsyncs that read their list on the far side
	Swept         int     // lists of crashed runs swept
	Off           string  // why the remote lists were turned off during the run, or ""
	// Removal says when this run's lists left the far side: "early", "before_root" or
	// "end" (Clear); "" when they did not
	Removal string
}

// RemoteLists hands a push's chunk lists to rsync through the far side (see above). Set
// its fields before the first use; a nil *RemoteLists hands none. Its staging directory
// is made with the first list, and removed by Close.
type RemoteLists struct {
	Rsync string
	Dest  string   // the remote DEST
	Args  []string // how an rsync reaches the far side (rsync.ReachOptions)
	Env   []string // nil: prsync's own
	// MinBytes is what the lists waiting must come to for a chunk whose list is not on the
	// far side to have them uploaded; below it, the chunk's rsync reads its list on stdin
	MinBytes int64
	// ReadRate, when set, is how many bytes a second an rsync reads its list on stdin:
	// the lists waiting must then also come to what it reads in the time an upload takes,
	// as the uploads so far took it (uploadCost). 0: MinBytes alone decides.
	ReadRate float64
	// StaleAge is the age after which another host's list counts as left by a crashed run
	StaleAge time.Duration
	// Grace is how long an upload has between TERM and KILL when its context ends
	Grace time.Duration
	// OnOff, when set, is told once why the remote lists were turned off for the run
	OnOff func(reason string)
	// ended, when set (the pool), is told that an upload session ended, and whether the
	// far side had accepted it
	ended func(t time.Time, held bool)

	host, runID string
	pid         int
	// top is the run's local directory: staging holds the lists waiting and on the far
	// side, by name (what an upload sends), and tmp those being written
	top, staging, tmp string

	mu      sync.Mutex
	started bool // init ran
	lists   map[int]*chunkList
	busy    chan struct{} // closed when the upload under way ends; nil when none is
	// failures counts the uploads in a row that failed for a passing reason
	failures int
	// uploadCost is the seconds an upload takes, an average of those that went (0: none
	// went yet)
	uploadCost float64
	used       bool // an upload ran as a transfer: Clear has lists to delete
	// closing: Clear began, and For hands no list; cleared: it ended, with clearErr;
	// early, when set, is closed when the clearing BeginClear started ends
	closing, cleared bool
	clearErr         error
	early            chan struct{}
	stats            ListStats
}

// listState is where a chunk's list is.
type listState int

const (
	listStaged   listState = iota // in the staging directory, not on the far side yet
	listUploaded                  // on the far side too
	listLocal                     // its rsync reads it on stdin
	listDone                      // its chunk has settled
)

type chunkList struct {
	name    string
	bytes   int64
	state   listState
	entries [][]byte // the chunk's, which an isolating re-run's are not (it keeps the ID)
	// handed: For handed it to an rsync; reading: to one that has not logged a path yet
	// (Read), so the far side may not have opened it
	handed, reading bool
	// carried: the upload under way carries it
	carried bool
}

// DefaultStaleAge is RemoteLists.StaleAge's default: another host's list older than a day.
const DefaultStaleAge = 24 * time.Hour

// initLocked makes the run's ID and the staging directory, once; the caller holds l.mu.
// It reports whether the lists can be staged.
func (l *RemoteLists) initLocked() bool {
	if !l.started {
		l.started = true
		host, _ := os.Hostname()
		l.host = hostWord(host)
		l.pid = os.Getpid()
		l.runID = fmt.Sprintf("%s-%d-%d", l.host, l.pid, time.Now().Unix())
		if l.StaleAge <= 0 {
			l.StaleAge = DefaultStaleAge
		}
		l.lists = map[int]*chunkList{}
		sweepStaging()
		dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", stagingPrefix, l.pid))
		if err == nil {
			err = errors.Join(os.Mkdir(filepath.Join(dir, "up"), 0o700), os.Mkdir(filepath.Join(dir, "tmp"), 0o700))
			if err != nil {
				os.RemoveAll(dir)
			}
		}
		if err != nil {
			l.offLocked(fmt.Sprintf("no staging directory for the lists: %v", err))
			return false
		}
		l.top, l.staging, l.tmp = dir, filepath.Join(dir, "up"), filepath.Join(dir, "tmp")
	}
	return l.top != ""
}

// stagingPrefix begins the name of a run's staging directory in $TMPDIR, which goes on
// with its prsync's PID, a dash and random characters.
const stagingPrefix = "prsync-lists-"

// sweepStaging removes the staging directories that killed prsyncs left in $TMPDIR: those
// whose PID no longer runs.
func sweepStaging() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), stagingPrefix+"*-*"))
	for _, d := range dirs {
		p, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), stagingPrefix), "-")
		if pid, err := strconv.Atoi(p); err == nil && pid > 0 && pid != os.Getpid() && !processAlive(pid) {
			os.RemoveAll(d)
		}
	}
}

// hostWord is a host name as a list's name carries it: letters, digits and dashes, at
// most 40 of them.
func hostWord(h string) string {
	var b strings.Builder
	for _, c := range h {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	if b.Len() == 0 {
		return "host"
	}
	return b.String()
}

// RunID is the prefix of this run's lists' names, once a list was staged.
func (l *RemoteLists) RunID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runID
}

// Stats returns what the remote lists did so far.
func (l *RemoteLists) Stats() ListStats {
	if l == nil {
		return ListStats{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// Tee offers each chunk of in (Offer) and passes it on, in order.
func (l *RemoteLists) Tee(in <-chan *splitter.Chunk) <-chan *splitter.Chunk {
	if l == nil {
		return in
	}
	out := make(chan *splitter.Chunk)
	go func() {
		defer close(out)
		for c := range in {
			l.Offer(c)
			out <- c
		}
	}()
	return out
}

// Offer writes chunk c's list to the staging directory, for the next upload to carry.
func (l *RemoteLists) Offer(c *splitter.Chunk) {
	if l == nil || c.Root || c.Len() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.initLocked() && l.stats.Off == "" && l.lists[c.ID] == nil {
		l.stageLocked(c)
	}
}

// stageLocked writes c's list to the staging directory; the caller holds l.mu. The file
// appears by a rename, whole, so an upload under way carries all of it or none.
func (l *RemoteLists) stageLocked(c *splitter.Chunk) *chunkList {
	name := l.runID + "." + strconv.Itoa(c.ID)
	tmp, err := os.CreateTemp(l.tmp, "list-")
	if err != nil {
		return nil
	}
	w := bufio.NewWriterSize(tmp, 64<<10)
	var n int64
	for _, e := range c.Entries {
		w.Write(e)
		w.WriteByte(0)
		n += int64(len(e)) + 1
	}
	err = errors.Join(w.Flush(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(l.staging, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return nil
	}
	cl := &chunkList{name: name, bytes: n, entries: c.Entries}
	l.lists[c.ID] = cl
	return cl
}

// For returns the --files-from option with which the rsync of chunk c over entries reads
// its list on the far side, or "" when it reads it on stdin: a root chunk, a run over
// other entries than the chunk's (an isolating re-run), remote lists turned off, or a list
// not on the far side that an upload would not pay for (MinBytes) or that failed to go.
// It may upload the lists waiting first, in the caller's slot.
func (l *RemoteLists) For(ctx context.Context, c *splitter.Chunk, entries [][]byte) string {
	if l == nil || c.Root || len(entries) == 0 || !sameEntries(entries, c.Entries) {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.initLocked() {
		return ""
	}
	for {
		if l.stats.Off != "" || l.closing || ctx.Err() != nil {
			return ""
		}
		cl := l.lists[c.ID]
		if cl == nil {
			if cl = l.stageLocked(c); cl == nil {
				return ""
			}
		}
		if !sameEntries(entries, cl.entries) {
			return ""
		}
		switch cl.state {
		case listUploaded:
			l.stats.Remote++
			cl.handed, cl.reading = true, true
			return rsync.RemoteListArg(l.Dest, cl.name)
		case listLocal, listDone:
			return ""
		}
		if l.busy != nil && !cl.carried && l.waitingBytes() < l.minBytesLocked() {
			// the upload under way does not carry it, and the next would not pay: stdin, at
			// once. Waiting for the upload, to run another for this list alone, cost each
			// chunk of a push's tail 0.1 s or more (bench scenario 6, H66: 50 to 100 ms an
			// upload there, beside the copy's rsyncs, where reading its 49 KB took 20 ms)
			l.localLocked(cl)
			return ""
		}
		if l.busy != nil { // an upload is under way: it may carry this list, or the next
			busy := l.busy
			l.mu.Unlock()
			select {
			case <-busy:
			case <-ctx.Done():
			}
			l.mu.Lock()
			continue
		}
		if l.waitingBytes() < l.minBytesLocked() {
			l.localLocked(cl)
			return ""
		}
		switch l.uploadLocked(ctx) {
		case uploadRefused:
			return "" // stdin this time; a retry of the chunk may upload it
		case uploadFailed:
			if cl.state == listStaged {
				l.localLocked(cl) // this chunk does not wait for another upload
			}
		}
	}
}

// minBytesLocked is what the lists waiting must come to for an upload to pay for its
// session: MinBytes, and, with ReadRate, what an rsync reads on stdin in the time an
// upload takes; the caller holds l.mu. An upload to a daemon on 127.0.0.1 takes 6 to
// 25 ms alone, and 50 to 100 ms beside the copy's own rsyncs on 2 CPUs (40 ms of it the
// daemon's delayed ACK, which Nagle's algorithm meets).
func (l *RemoteLists) minBytesLocked() int64 {
	return max(l.MinBytes, int64(l.uploadCost*l.ReadRate))
}

// sameEntries reports whether a and b are the same slice.
func sameEntries(a, b [][]byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// waitingBytes is the size of the lists staged, not on the far side and not carried by
// the upload under way: what the next upload would carry; the caller holds l.mu.
func (l *RemoteLists) waitingBytes() int64 {
	var n int64
	for _, cl := range l.lists {
		if cl.state == listStaged && !cl.carried {
			n += cl.bytes
		}
	}
	return n
}

// localLocked says that cl's chunk reads its list on stdin, and drops it from the staging
// directory, once no upload is under way (one may be sending it: it goes when that ends);
// the caller holds l.mu.
func (l *RemoteLists) localLocked(cl *chunkList) {
	cl.state = listLocal
	if l.busy == nil {
		os.Remove(filepath.Join(l.staging, cl.name))
	}
}

// Done says that chunk c has settled: its list is no longer needed. It leaves the staging
// directory now, or once the upload under way has ended, and the far side with the next
// upload or at Close.
func (l *RemoteLists) Done(c *splitter.Chunk) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cl := l.lists[c.ID] // nil before init
	if cl == nil || cl.state == listDone {
		return
	}
	cl.state = listDone
	if l.busy == nil {
		os.Remove(filepath.Join(l.staging, cl.name))
	}
}

// Unread says that chunk c's rsync could not read its list on the far side: the run's
// rsyncs read their lists on stdin from now on.
func (l *RemoteLists) Unread(c *splitter.Chunk, why string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cl := l.lists[c.ID]; cl != nil && cl.state == listUploaded {
		cl.state = listLocal
	}
	l.offLocked("the far side could not read a chunk's list: " + why)
}

// offLocked turns the remote lists off for the rest of the run; the caller holds l.mu.
func (l *RemoteLists) offLocked(why string) {
	if l.stats.Off != "" {
		return
	}
	l.stats.Off = why
	if l.OnOff != nil {
		l.OnOff(why)
	}
}

// uploadEnd is how an upload ended.
type uploadEnd int

const (
	uploaded      uploadEnd = iota
	uploadFailed            // for a reason that may pass (DEST not made yet), or that turned the lists off
	uploadRefused           // the far side is full now (max connections, sshd's MaxStartups)
)

// uploadLocked runs one upload session, carrying every list staged and deleting this
// run's lists on the far side that are staged no more; the caller holds l.mu, which is
// released while the session runs. Three failures in a row that may pass, or one that
// will not (a read-only module, a directory the far side cannot write), turn the lists
// off; a refusal leaves them on, as the chunk's own session would meet it too.
func (l *RemoteLists) uploadLocked(ctx context.Context) uploadEnd {
	busy := make(chan struct{})
	l.busy = busy
	var carried []*chunkList
	var bytes int64
	for _, cl := range l.lists {
		if cl.state == listStaged {
			carried = append(carried, cl)
			bytes += cl.bytes
			cl.carried = true
		}
	}
	l.mu.Unlock()

	t0 := time.Now()
	out, err := l.session(ctx, l.uploadArgs())
	took := time.Since(t0).Seconds()

	l.mu.Lock()
	l.busy = nil
	close(busy)
	var ee *osexec.ExitError
	if err == nil || errors.As(err, &ee) && rsync.SessionRan(ee.ExitCode()) {
		l.used = true // lists may be on the far side: Close has some to delete
	}
	l.stats.Uploads++
	l.stats.UploadSeconds += took
	for _, cl := range l.lists {
		cl.carried = false
		if cl.state == listDone || cl.state == listLocal {
			os.Remove(filepath.Join(l.staging, cl.name))
		}
	}
	if err != nil {
		l.stats.UploadFailed++
		if ctx.Err() != nil {
			return uploadFailed
		}
		passes, refused := uploadPasses(out)
		if refused {
			return uploadRefused
		}
		if l.failures++; !passes || l.failures >= 3 {
			l.offLocked("the far side cannot hold the lists: " + uploadFailure(out, err))
		}
		return uploadFailed
	}
	l.failures = 0
	if l.uploadCost == 0 {
		l.uploadCost = took
	} else {
		l.uploadCost = (l.uploadCost + took) / 2
	}
	l.stats.UploadBytes += bytes
	for _, cl := range carried {
		if cl.state == listStaged {
			cl.state = listUploaded
		}
	}
	return uploaded
}

// uploadArgs are the options of an upload: the lists staged go to rsync.ListDir, each
// once (--ignore-existing: a list's name is never reused), and the far side's lists of
// this run that are staged no more are deleted; every other name there (another run's)
// is protected.
func (l *RemoteLists) uploadArgs() []string {
	args := append(append([]string(nil), l.Args...), "-r", "--ignore-existing", "--delete")
	return append(args, "--filter=P! /"+l.runID+".*", "--", l.staging+"/", rsync.ListDirArg(l.Dest))
}

// stale lists rsync.ListDir on the far side and returns the lists there that crashed
// runs left.
func (l *RemoteLists) stale(ctx context.Context) []string {
	out, err := l.session(ctx, append(append([]string(nil), l.Args...), "--list-only", "--", rsync.ListDirArg(l.Dest)))
	if err != nil && len(out) == 0 {
		return nil
	}
	var stale []string
	now := time.Now()
	for _, line := range bytes.Split(out, []byte("\n")) {
		e, ok := rsync.ParseListLine(line, 0)
		if !ok || e.Type != '-' {
			continue
		}
		mtime, _ := time.ParseInLocation("2006/01/02-15:04:05", e.MTime, time.Local)
		if l.stale1(string(e.Name), mtime, now) {
			stale = append(stale, string(e.Name))
		}
	}
	sort.Strings(stale)
	return stale
}

// stale1 reports whether a list named name, modified at mtime, was left by a crashed run:
// one of this host's whose prsync is no longer running, or another host's older than
// StaleAge. Names of other forms are not prsync's, and are left alone.
func (l *RemoteLists) stale1(name string, mtime, now time.Time) bool {
	host, pid, start, ok := parseListName(name)
	if !ok {
		return false
	}
	if host != l.host {
		return !mtime.IsZero() && now.Sub(mtime) > l.StaleAge
	}
	if pid == l.pid {
		return start != l.runID[strings.LastIndexByte(l.runID, '-')+1:]
	}
	return !processAlive(pid)
}

// parseListName reads HOST-PID-START.CHUNK.
func parseListName(name string) (host string, pid int, start string, ok bool) {
	run, chunk, found := cutLast(name, '.')
	if !found || !digits(chunk) {
		return "", 0, "", false
	}
	rest, start, found := cutLast(run, '-')
	if !found || !digits(start) {
		return "", 0, "", false
	}
	host, p, found := cutLast(rest, '-')
	if !found || host == "" || !digits(p) {
		return "", 0, "", false
	}
	pid, err := strconv.Atoi(p)
	return host, pid, start, err == nil && pid > 0
}

func cutLast(s string, sep byte) (string, string, bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// processAlive reports whether a process pid runs on this host.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// session runs one rsync side session with args and returns its output, both streams.
func (l *RemoteLists) session(ctx context.Context, args []string) ([]byte, error) {
	cmd := osexec.CommandContext(ctx, l.Rsync, args...)
	cmd.Env = l.Env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	setProcAttr(cmd)
	cmd.Cancel = func() error { return terminateGroup(cmd.Process.Pid) }
	cmd.WaitDelay = max(l.Grace, time.Second)
	err := cmd.Run()
	if l.ended != nil && cmd.ProcessState != nil {
		// a session that ran as a transfer held a slot on the far side until now
		l.ended(time.Now(), rsync.SessionRan(cmd.ProcessState.ExitCode()))
	}
	return out.Bytes(), err
}

// sessionAdmitted is session, asked again while the far side refuses it as full: the
// lists' removal at the end comes right after the copy's last sessions, whose slots a
// daemon frees a moment after they end, and a refused removal left the run's lists in DEST
// for the next run to sweep (make test: TestRemoteListFallback at max connections = 2, 1
// run in 7). It asks up to 8 times, 50 ms apart and doubling (about 6 s in all).
func (l *RemoteLists) sessionAdmitted(ctx context.Context, args []string) ([]byte, error) {
	wait := 50 * time.Millisecond
	for try := 1; ; try++ {
		out, err := l.session(ctx, args)
		if _, refused := uploadPasses(out); err == nil || !refused || try == 8 {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// uploadFailure says why an upload failed: rsync's first line of error, else err.
func uploadFailure(out []byte, err error) string {
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "@ERROR") || strings.HasPrefix(line, "ERROR") || strings.HasPrefix(line, "rsync: ") {
			return line
		}
	}
	return err.Error()
}

// uploadPasses reports whether an upload failed for a reason that may pass, from its
// output: the far side out of reach for now, or DEST not made yet (the first chunk's rsync
// makes it); refused says the far side was full (rsync.Session.Refusal).
func uploadPasses(out []byte) (passes, refused bool) {
	for _, line := range bytes.Split(out, []byte("\n")) {
		s := rsync.ParseMessage(line).Session
		if s.Refusal() {
			return true, true
		}
		if s.Transient() || bytes.Contains(line, []byte("mkdir")) && bytes.Contains(line, []byte("No such file or directory (2)")) {
			return true, false
		}
	}
	return false, false
}

// Clear deletes this run's lists on the far side, and rsync.ListDir once it holds no
// other list; when others keep it there, it sweeps those that crashed runs left (stale).
// It runs one session when no other list is there, three when there are (the deletion,
// the listing, the sweep), and none when no upload ran. The pool calls it before the root
// chunk, the run's last, since removing rsync.ListDir changes the mtime of DEST's root,
// which the root chunk sets; Close calls it in a run without one. After it, every rsync
// reads its list on stdin. It returns why the far side kept this run's lists, or nil, and
// so does Close after it; a Clear cut short by ctx is done again by Close.
func (l *RemoteLists) Clear(ctx context.Context) error { return l.clearAs(ctx, "before_root") }

// clearAs is Clear, which stats' Removal names when as.
func (l *RemoteLists) clearAs(ctx context.Context, as string) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if early := l.early; early != nil && !l.cleared {
		l.mu.Unlock()
		select { // the clearing under way (BeginClear) ends first
		case <-early:
		case <-ctx.Done():
		}
		l.mu.Lock()
	}
	if l.cleared {
		l.mu.Unlock()
		return l.clearErr
	}
	for l.busy != nil { // an upload under way (none should be: every chunk has settled)
		busy := l.busy
		l.mu.Unlock()
		<-busy
		l.mu.Lock()
	}
	l.closing = true // For hands no list from now on
	used, top := l.used, l.top
	l.mu.Unlock()
	if top == "" || !used {
		return nil
	}
	err := l.clear(ctx, top)
	l.noteCleared(ctx, err, as)
	return err
}

// noteCleared notes that Clear's sessions, named as, ended with err, unless ctx cut them short.
func (l *RemoteLists) noteCleared(ctx context.Context, err error, as string) {
	if ctx.Err() != nil {
		return
	}
	l.mu.Lock()
	l.cleared, l.clearErr = true, err
	if err == nil {
		l.stats.Removal = as
	}
	l.mu.Unlock()
}

// Read says that chunk c's rsync has logged a path: it has read its whole list (rsync
// builds the file list of a --files-from copy before it transfers anything), so the far
// side may delete it.
func (l *RemoteLists) Read(c *splitter.Chunk) {
	if l == nil {
		return
	}
	l.mu.Lock()
	if cl := l.lists[c.ID]; cl != nil {
		cl.reading = false
	}
	l.mu.Unlock()
}

// BeginClear starts Clear's sessions now, with ctx, when no list of the run may be read on
// the far side any more: the pool calls it once no chunk waits to start, so that the
// removal runs beside the copy's last chunks rather than after them (bench scenario 5: 50
// to 90 ms of a 0.5 s copy, each run). Every list must be settled, read on stdin, or
// handed to an rsync that has read it (Read), and no upload under way; For hands no list
// from then on, so a retry reads its list on stdin. Then take, which takes a slot for the
// sessions, must say yes; it is not called otherwise (a slot taken and given back wakes
// the pool, which would ask again at once). It reports whether it started them; done is
// called when they end.
func (l *RemoteLists) BeginClear(ctx context.Context, take func() bool, done func()) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing || !l.used || l.top == "" || l.busy != nil {
		return false
	}
	for _, cl := range l.lists {
		switch cl.state {
		case listStaged: // its chunk has not asked For yet, or was refused and may retry
			return false
		case listUploaded:
			if !cl.handed || cl.reading {
				return false
			}
		}
	}
	if !take() {
		return false
	}
	l.closing = true
	early, top := make(chan struct{}), l.top
	l.early = early
	go func() {
		defer close(early) // after done: the slot is back when Clear, waiting, goes on
		defer done()
		l.noteCleared(ctx, l.clear(ctx, top), "early")
	}()
	return true
}

// Close deletes this run's lists on the far side (Clear), unless Clear did, and removes
// the staging directory. It returns why the far side kept this run's lists, or nil.
func (l *RemoteLists) Close(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	top := l.top
	l.mu.Unlock()
	if top == "" {
		return nil
	}
	defer os.RemoveAll(top)
	return l.clearAs(ctx, "end")
}

// clear is Clear's sessions; top is the run's local directory.
func (l *RemoteLists) clear(ctx context.Context, top string) error {
	empty := filepath.Join(top, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("remote lists: %w", err)
	}
	out, err := l.sessionAdmitted(ctx, l.cleanArgs(empty, []string{l.runID + ".*"}))
	if err != nil {
		return fmt.Errorf("remove the lists in %s: %s", rsync.ListDirArg(l.Dest), uploadFailure(out, err))
	}
	if !bytes.Contains(out, []byte("cannot delete non-empty directory: "+rsync.ListDir)) {
		return nil
	}
	stale := l.stale(ctx)
	if len(stale) == 0 {
		return nil
	}
	if _, err := l.sessionAdmitted(ctx, l.cleanArgs(empty, stale)); err == nil {
		l.mu.Lock()
		l.stats.Swept += len(stale)
		l.mu.Unlock()
	}
	return nil
}

// cleanArgs are the options of a session that deletes the lists named by the patterns
// from rsync.ListDir, and the directory once nothing is left in it: DEST's root, one level
// (-d), against an empty directory, where every name is protected (P *) but ListDir and,
// in it, those lists. -v names what it deleted, and the directory kept non-empty.
func (l *RemoteLists) cleanArgs(empty string, patterns []string) []string {
	dir := "/" + rsync.ListDir + "/"
	args := append(append([]string(nil), l.Args...), "-d", "-v", "--delete", "--filter=+ "+dir)
	for _, p := range patterns {
		args = append(args, "--filter=+ "+dir+p)
	}
	return append(args, "--filter=P *", "--", empty+"/", rsync.RootArg(l.Dest))
}
