package exec

import (
	"bytes"
	"path/filepath"
	"strings"

	"github.com/prsync/prsync/internal/storage"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// LostExitCode is the exit code of a run that stopped because DEST or the source stopped
// being the storage it was at the start: rsync's 3, errors selecting input/output files
// and directories.
const LostExitCode = 3

// A DEST that stops being the storage it was at the start proves nothing: a network mount
// that drops leaves its bare mount point, an empty directory of the filesystem below, into
// which rsync would copy, and which a confirming lstat would read. Every rsync run is
// checked against the Pool's watches before it starts and after it ends (run): a run that
// meets a loss starts no rsync, and one that ended after it proves none of its paths; the
// first loss stops the whole run (lostRun), and every path not proven before it fails.

// storageLost checks the storage that a run of rsync over entries of chunk c writes into
// and reads from (DEST below DestWatch, the source below SrcWatch), as ps directs it: a
// pass from another source or into another destination is not checked on that side.
func (p *Pool) storageLost(c *splitter.Chunk, entries [][]byte, ps pass) error {
	checkDest := p.DestWatch != nil && ps.dest == "" && (ps.src == "" || !rsync.IsRemote(ps.src))
	checkSrc := p.SrcWatch != nil && ps.src == "" && !p.SourceRemote && !rsync.IsRemote(c.Src)
	if checkDest || checkSrc {
		entries = dirRuns(entries)
	}
	if checkDest {
		rels := make([]string, len(entries))
		for i, e := range entries {
			rels[i] = rsync.LandsAt(e)
		}
		if ps.src != "" {
			rels = nil // a pass that reads DEST (src is DEST): DEST's own paths, at the top
		}
		if err := p.DestWatch.Check(rels); err != nil {
			return err
		}
	}
	if checkSrc {
		paths := make([]string, len(entries))
		for i, e := range entries {
			paths[i] = filepath.Join(c.Src, strings.Replace(string(e), "/./", "/", 1))
		}
		if err := p.SrcWatch.Check(paths); err != nil {
			return err
		}
	}
	return nil
}

// dirRuns returns the first entry of each run of entries in one directory. A check
// (storage.Watch.Check) looks at the directory that holds each path, and skips a path in
// the directory of the one before it; a chunk's paths come in such runs, so handing it the
// first of each spares a string per path. An entry whose last element is not a plain name
// ("dir/", "a/.", "..") starts a run of its own: its directory is not the text before its
// last slash.
func dirRuns(entries [][]byte) [][]byte {
	var out [][]byte
	var last []byte
	inRun := false
	for _, e := range entries {
		i := bytes.LastIndexByte(e, '/')
		name, dir := e[i+1:], e[:i+1]
		plain := len(name) > 0 && !bytes.Equal(name, []byte(".")) && !bytes.Equal(name, []byte(".."))
		if plain && inRun && bytes.Equal(dir, last) {
			continue
		}
		out = append(out, e)
		last, inRun = dir, plain
	}
	return out
}

// lostRun settles every path of run rn as failed for the storage loss lost, and stops the
// whole run: every later chunk, retry and isolating re-run would meet it too.
func (p *Pool) lostRun(st *chunkState, rn *ran, lost error) *ran {
	for _, i := range rn.set {
		st.out[i] = rsync.Outcome{Status: rsync.Failed, Reason: lost.Error(), Hint: lostHint}
	}
	rn.step = stepSettle
	rn.line = lost.Error()
	st.fatal = true
	p.abortLost(st.c.ID, lost)
	return rn
}

// abortLost stops the whole run for the storage loss lost, met by a run of chunk id.
func (p *Pool) abortLost(id int, lost error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.abort == nil {
		p.abort = &AbortError{Chunk: id, Code: LostExitCode, Msg: lost.Error(), Hint: lostHint, Lost: true}
		p.slots.stop()
	}
}

// lostHint is the advice for a run that met a storage loss.
const lostHint = "mount it again, then re-run the same command: what was copied before the loss is skipped"

// CheckStorage checks, once every chunk has run, that DEST and the source are still the
// storage they were at the start: the paths the quick check found up to date are proven
// only against that storage. A loss stops the run, as one a chunk met does.
func (p *Pool) CheckStorage() {
	p.init()
	for _, w := range []*storage.Watch{p.DestWatch, p.SrcWatch} {
		if w == nil {
			continue
		}
		if err := w.Check(nil); err != nil {
			p.abortLost(0, err)
			return
		}
	}
}
