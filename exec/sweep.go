package exec

import (
	"path"

	"golang.org/x/sys/unix"

	"github.com/prsync/prsync/rsync"
)

// SweepTemp removes the temp files that killed rsyncs left in a local DEST: for each path
// of a chunk whose rsync was killed, a regular file ".<name>.XXXXXX" (6 characters) beside
// where the path lands. Only those directories are read, and only those names match, so
// a huge DEST is not walked; each is reached through no symlink below DEST that rsync
// does not go through (a temp file beyond one is not rsync's). Mode and time are not
// checked: a receiver killed after it wrote the data but before its rename has already
// given the temp file the source's mode and mtime. It returns how many files it removed.
func (p *Pool) SweepTemp() int {
	if rsync.IsRemote(p.Dest) {
		return 0
	}
	p.init()
	p.mu.Lock()
	chunks := append(p.killedChunks[:0:0], p.killedChunks...)
	p.mu.Unlock()
	if len(chunks) == 0 || p.localDest == "" {
		return 0
	}
	byDir := map[string]map[string]bool{} // directory (below DEST) -> base names copied into it
	for _, c := range chunks {
		for _, e := range c.Entries {
			rel := rsync.LandsAt(e)
			d := path.Dir(rel)
			if byDir[d] == nil {
				byDir[d] = map[string]bool{}
			}
			byDir[d][path.Base(rel)] = true
		}
	}
	dest := p.openDest()
	defer dest.close()
	if dest.root == nil {
		return 0
	}
	n := 0
	for d, names := range byDir {
		f, err := dest.root.ReadDir(d)
		if err != nil {
			continue
		}
		ents, _ := f.ReadDir(-1)
		for _, de := range ents {
			base, ok := rsync.TempOf(de.Name())
			if !ok || !names[base] || !de.Type().IsRegular() {
				continue
			}
			if unix.Unlinkat(int(f.Fd()), de.Name(), 0) == nil {
				n++
			}
		}
		f.Close()
	}
	return n
}
