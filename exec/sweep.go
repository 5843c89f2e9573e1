package exec

import (
	"os"
	"path/filepath"

	"github.com/prsync/prsync/rsync"
)

// SweepTemp removes the temp files that killed rsyncs left in a local DEST: for each path
// of a chunk whose rsync was killed, a regular file ".<name>.XXXXXX" (6 characters) beside
// where the path lands. Only those directories are read, and only those names match, so
// a huge DEST is not walked. Mode and time are not checked: a receiver killed after it
// wrote the data but before its rename has already given the temp file the source's mode
// and mtime. It returns how many files it removed.
func (p *Pool) SweepTemp() int {
	if rsync.IsRemote(p.Dest) {
		return 0
	}
	dest, err := filepath.Abs(p.Dest)
	if err != nil {
		return 0
	}
	p.mu.Lock()
	chunks := append(p.killedChunks[:0:0], p.killedChunks...)
	p.mu.Unlock()
	byDir := map[string]map[string]bool{} // directory -> base names copied into it
	for _, c := range chunks {
		for _, e := range c.Entries {
			rel := rsync.LandsAt(e)
			d := filepath.Join(dest, filepath.Dir(rel))
			if byDir[d] == nil {
				byDir[d] = map[string]bool{}
			}
			byDir[d][filepath.Base(rel)] = true
		}
	}
	n := 0
	for d, names := range byDir {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, de := range ents {
			base, ok := rsync.TempOf(de.Name())
			if !ok || !names[base] || !de.Type().IsRegular() {
				continue
			}
			if os.Remove(filepath.Join(d, de.Name())) == nil {
				n++
			}
		}
	}
	return n
}
