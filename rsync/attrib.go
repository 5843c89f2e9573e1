package rsync

import (
	"bytes"
	"path"
	"strings"
)

// Status is what became of one input path. Every path ends in exactly one.
type Status string

// The statuses of a path.
const (
	Transferred Status = "transferred"
	UpToDate    Status = "up_to_date"
	Vanished    Status = "vanished"
	Failed      Status = "failed"
	NotDone     Status = "not_done"
)

// PathState is what rsync's output said about one path of a chunk.
type PathState struct {
	Logged bool   // an out-format line named it with a change (not proof that it landed)
	Seen   bool   // an out-format line named it unchanged (rsync ran with -ii): rsync considered it
	Change string // that line's %i
	Size   int64  // that line's %l, for a regular file
	MTime  string // that line's %M, for a regular file
	File   bool   // that line is for a regular file
	Kind   Kind   // what a stderr line said against it, if any
	Reason string // that line
	Advice Advice // what that line advises
}

// Result is what rsync's output said about a chunk.
type Result struct {
	Paths []PathState
	// Unattributed are the error lines that name no path of the chunk (summary lines left out).
	Unattributed []string
	// Session is the first session failure reported, with its line.
	Session     Session
	SessionLine string
	NoSpace     bool
	MkdirRace   bool
	// Stop are the paths (one path, listed once or more) that rsync named in the message it
	// stopped on (Message.Stops), StopLine that message and StopErrno its errno; nil when
	// it stopped on none, or on a name that is no path of the chunk.
	Stop        []int
	StopLine    string
	StopErrno   int
	ReplaceRace bool
	// Last is rsync's last stderr line that is not its closing summary, or "".
	Last string
	// lastVanished: Last said a path of the chunk vanished, which is no reason for another
	// path's failure (a failure that stopped rsync on one path is: the rest never ran)
	lastVanished bool
}

// Attributor reads the output of one rsync run over a chunk and attributes each line to
// the paths it concerns. It is not safe for concurrent use: feed both output streams of
// one rsync from one goroutine, or behind one lock.
type Attributor struct {
	entries   [][]byte
	rels      []string         // where each path lands, relative to the destination
	byRel     map[string][]int // rel -> indexes (a path may be listed twice)
	bySrc     map[string][]int // the source path as the sender names it -> indexes; built on first use
	srcPath   string
	srcRemote bool
	strip     []string // prefixes that receiver- and sender-side names may carry
	res       Result
	remote    bool // a side is remote: names may carry a prefix we cannot know
	// anchors: the chunk's directories its list held besides its paths (Anchor), by where
	// they land and by the name the sender gives them, each to where it lands
	anchors map[string]string
}

// Anchors tells the Attributor the directories that rsync's list held besides the chunk's
// paths (Anchor). A message of the sender's that names one of them is about the chunk's
// paths below it: the sender could not read the directory (it vanished, say), so it could
// not read them either, and each has a message of its own.
func (a *Attributor) Anchors(dirs [][]byte) {
	if len(dirs) == 0 {
		return
	}
	a.anchors = make(map[string]string, 2*len(dirs))
	for _, d := range dirs {
		rel := LandsAt(d)
		a.anchors[rel] = rel
		a.anchors[path.Clean(strings.Replace(string(d), "/./", "/", 1))] = rel
	}
}

// NewAttributor returns an Attributor for a chunk. entries are the chunk's --files-from
// entries (relative to src, perhaps with a "/./" anchor), src and dest rsync's source and
// destination arguments, and localDest the absolute local destination directory ("" when
// it is remote).
func NewAttributor(entries [][]byte, src, dest, localDest string) *Attributor {
	a := &Attributor{
		entries: entries,
		rels:    make([]string, len(entries)),
		byRel:   make(map[string][]int, len(entries)),
		res:     Result{Paths: make([]PathState, len(entries))},
	}
	var destPath string
	var destRemote bool
	a.srcPath, a.srcRemote = endpointPath(src)
	destPath, destRemote = endpointPath(dest)
	srcPath := a.srcPath
	a.remote = a.srcRemote || destRemote
	landsAt(entries, a.rels)
	own := make([]int, len(entries)) // each path's own index: one allocation, not one a path
	for i, rel := range a.rels {
		if idx, ok := a.byRel[rel]; ok {
			a.byRel[rel] = append(idx, i) // a slice of own has capacity 1: append copies it
		} else {
			own[i] = i
			a.byRel[rel] = own[i : i+1 : i+1]
		}
	}
	add := func(p string) {
		p = strings.TrimSuffix(p, "/")
		if p != "" && p != "." {
			a.strip = append(a.strip, p+"/")
			if !strings.HasPrefix(p, "/") {
				a.strip = append(a.strip, "/"+p+"/")
			}
		}
	}
	if localDest != "" {
		add(localDest)
	}
	add(destPath)
	add(srcPath)
	return a
}

// LandsAt returns where a --files-from entry lands below the destination: the part after
// a "/./" anchor, or the whole entry, cleaned, without a "./" in front.
func LandsAt(entry []byte) string {
	if i := bytes.Index(entry, []byte("/./")); i >= 0 {
		return path.Clean(string(entry[i+3:]))
	}
	if clean(entry) {
		return string(entry) // the splitter's entries mostly are: spare the Clean
	}
	return path.Clean(string(entry))
}

// landsAt sets rels[i] to LandsAt(entries[i]). The entries that land as they are, most of
// them, share one string: one allocation for a chunk, where LandsAt makes one for each.
func landsAt(entries [][]byte, rels []string) {
	n := 0
	for _, e := range entries {
		n += len(e)
	}
	buf := make([]byte, 0, n)
	for i, e := range entries {
		if bytes.Contains(e, []byte("/./")) || !clean(e) {
			rels[i] = LandsAt(e)
			continue
		}
		buf = append(buf, e...)
	}
	all := string(buf)
	off := 0
	for i, e := range entries {
		if rels[i] == "" {
			rels[i] = all[off : off+len(e)]
			off += len(e)
		}
	}
}

// clean reports whether a relative path is already what path.Clean makes of it.
func clean(p []byte) bool {
	if len(p) == 0 || p[0] == '/' || p[len(p)-1] == '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] != '.' || (i > 0 && p[i-1] != '/') {
			continue
		}
		// a path element that starts with '.': "." and ".." are not clean
		j := i + 1
		if j < len(p) && p[j] == '.' {
			j++
		}
		if j == len(p) || p[j] == '/' {
			return false
		}
	}
	return !bytes.Contains(p, []byte("//"))
}

// sources returns the map from the source path as the sender names it to the indexes.
func (a *Attributor) sources() map[string][]int {
	if a.bySrc == nil {
		a.bySrc = make(map[string][]int, len(a.entries))
		for i, e := range a.entries {
			full := path.Clean(strings.Replace(string(e), "/./", "/", 1))
			if !a.srcRemote {
				full = path.Join(a.srcPath, full)
			}
			a.bySrc[full] = append(a.bySrc[full], i)
		}
	}
	return a.bySrc
}

// EndpointPath returns the path part of an rsync source or destination argument, and
// whether it is remote (see endpointPath).
func EndpointPath(arg string) (string, bool) { return endpointPath(arg) }

// endpointPath returns the path part of an rsync source or destination argument, and
// whether it is remote: "host:p" and "user@host:p" give p; "host::mod/p" and
// "rsync://host[:port]/mod/p" give p (relative to the module); a local path is itself.
func endpointPath(arg string) (string, bool) {
	if rest, ok := strings.CutPrefix(arg, "rsync://"); ok {
		_, p, _ := strings.Cut(rest, "/") // host[:port]
		_, p, _ = strings.Cut(p, "/")     // module
		return p, true
	}
	i := strings.IndexByte(arg, ':')
	if i < 0 || (strings.IndexByte(arg, '/') >= 0 && strings.IndexByte(arg, '/') < i) {
		return arg, false
	}
	if strings.HasPrefix(arg[i:], "::") {
		_, p, _ := strings.Cut(arg[i+2:], "/")
		return p, true
	}
	return arg[i+1:], true
}

// Stdout takes one line of rsync's standard output. It returns the file bytes the line
// reports for a path of the chunk not logged before, and whether it logged a regular file
// of the chunk for the first time.
func (a *Attributor) Stdout(line []byte) (int64, bool) {
	it, ok := ParseItem(line)
	if !ok {
		// some per-file messages go to stdout: "skipping non-regular file", "cannot
		// delete non-empty directory"
		if m := ParseMessage(line); m.Kind != KindOther {
			a.apply(m, line)
		}
		return 0, false
	}
	file := false
	var n int64
	idx, ok := a.byRel[string(it.Name)]
	if !ok {
		idx = a.byRel[path.Clean(string(it.Name))]
	}
	if it.Unchanged() {
		for _, i := range idx {
			a.res.Paths[i].Seen = true
		}
		return 0, false
	}
	for k, i := range idx {
		ps := &a.res.Paths[i]
		first := !ps.Logged
		ps.Logged, ps.Change, ps.File = true, it.Change, it.IsFile()
		if ps.File && k == 0 { // a path listed twice is copied once
			ps.Size, ps.MTime = it.Size, it.MTime
			if first {
				n += it.Size
				file = true
			}
		}
	}
	return n, file
}

// Stderr takes one line of rsync's standard error.
func (a *Attributor) Stderr(line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if IsSummaryLine(line) {
		return
	}
	a.res.Last, a.res.lastVanished = string(line), false
	if benign(line) {
		return
	}
	m := ParseMessage(line)
	a.res.NoSpace = a.res.NoSpace || m.NoSpace
	a.res.MkdirRace = a.res.MkdirRace || m.MkdirRace
	a.res.ReplaceRace = a.res.ReplaceRace || m.ReplaceRace
	if m.Session != NoSession {
		if a.res.Session == NoSession {
			a.res.Session, a.res.SessionLine = m.Session, string(line)
		}
		a.res.Unattributed = append(a.res.Unattributed, string(line))
		return
	}
	if m.Kind == KindOther || !a.apply(m, line) {
		a.res.Unattributed = append(a.res.Unattributed, string(line))
		return
	}
	a.res.lastVanished = m.Kind == KindVanished
	if m.Stops && a.res.StopLine == "" {
		a.res.Stop, a.res.StopLine, a.res.StopErrno = a.resolve(m), string(line), m.Errno
	}
}

// Full reports whether rsync stopped on a path because the destination had no room for
// it: ENOSPC, or EDQUOT (a quota).
func (r *Result) Full() bool {
	return len(r.Stop) > 0 && (r.StopErrno == enospc || r.StopErrno == edquot ||
		strings.Contains(r.StopLine, "No space left on device") || strings.Contains(r.StopLine, "Disk quota exceeded"))
}

// apply gives the paths a message names its kind and line as the reason. It reports
// whether the message named a path of the chunk.
func (a *Attributor) apply(m Message, line []byte) bool {
	idx := a.resolve(m)
	for _, i := range idx {
		ps := &a.res.Paths[i]
		if ps.Kind == KindFailed || (ps.Kind == KindVanished && m.Kind == KindVanished) {
			continue // keep the first reason; a failure outranks a vanish
		}
		ps.Kind, ps.Reason, ps.Advice = m.Kind, string(line), m.Advice()
	}
	return len(idx) > 0
}

// benign reports stderr lines that are not rsync errors.
func benign(line []byte) bool {
	return bytes.HasPrefix(line, []byte("Warning: Permanently added"))
}

// resolve returns the indexes of the paths a message names.
func (a *Attributor) resolve(m Message) []int {
	if m.Name == nil {
		return nil
	}
	name := string(m.Name)
	if idx := a.sources()[path.Clean(name)]; len(idx) > 0 && !strings.EqualFold(m.Side, "receiver") {
		return idx
	}
	cands := []string{name}
	for _, p := range a.strip {
		if rest, ok := strings.CutPrefix(name, p); ok {
			cands = append(cands, rest)
		}
	}
	if rest, ok := strings.CutPrefix(name, "/"); ok {
		cands = append(cands, rest)
	}
	for _, c := range cands {
		rel := path.Clean(landingOf(path.Clean(c)))
		if m.Scope == Below {
			if idx := a.below(rel); len(idx) > 0 {
				return idx
			}
			continue
		}
		if idx := a.byRel[rel]; len(idx) > 0 {
			return idx
		}
	}
	if idx := a.sources()[path.Clean(name)]; len(idx) > 0 {
		return idx
	}
	if a.anchors != nil && !strings.EqualFold(m.Side, "receiver") && m.Side != "generator" {
		for _, c := range cands {
			if rel, ok := a.anchors[path.Clean(c)]; ok {
				return a.below(rel)
			}
		}
	}
	if idx := a.byTempDir(path.Base(name)); len(idx) > 0 {
		return idx
	}
	if a.remote {
		return a.bySuffix(path.Clean(landingOf(name)))
	}
	return nil
}

// byTempDir returns the one path a --temp-dir temp file "NAME.XXXXXX" stands for: the
// temp dir holds base names only, so a name shared by two paths of the chunk stays
// unattributed.
func (a *Attributor) byTempDir(tmp string) []int {
	if len(tmp) < 8 || tmp[len(tmp)-7] != '.' || strings.ContainsAny(tmp[len(tmp)-6:], "./") {
		return nil
	}
	base := tmp[:len(tmp)-7]
	var found []int
	for rel, idx := range a.byRel {
		if path.Base(rel) == base {
			if found != nil {
				return nil
			}
			found = idx
		}
	}
	return found
}

// below returns the paths at dir or under it.
func (a *Attributor) below(dir string) []int {
	var idx []int
	for i, r := range a.rels {
		if r == dir || dir == "." || strings.HasPrefix(r, dir+"/") {
			idx = append(idx, i)
		}
	}
	return idx
}

// bySuffix returns the paths whose landing name is the longest suffix (at a '/') of
// name: a remote side may prefix a directory prsync cannot know (a home directory).
func (a *Attributor) bySuffix(name string) []int {
	best := ""
	for r := range a.byRel {
		if len(r) > len(best) && strings.HasSuffix(name, "/"+r) {
			best = r
		}
	}
	if best == "" {
		return nil
	}
	return a.byRel[best]
}

// Result returns what the output said so far.
func (a *Attributor) Result() *Result { return &a.res }
