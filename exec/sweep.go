package exec

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// SweepTemp removes the temp files that killed rsyncs left in a local DEST: for each path
// of a chunk whose rsync was killed, a ".<name>.XXXXXX" file (6 characters, mode 0600,
// regular, modified since since) beside where the path lands. Only those directories are
// read, and only those names match, so a huge DEST is not walked and the temp files of
// other rsyncs sharing DEST are left alone. It returns how many files it removed.
func (p *Pool) SweepTemp(since time.Time) int {
	if isRemote(p.Dest) {
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
			_, rel := splitEntry(e)
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
			base, ok := tempOf(de.Name())
			if !ok || !names[base] || !de.Type().IsRegular() {
				continue
			}
			fi, err := de.Info()
			if err != nil || fi.Mode().Perm() != 0o600 || fi.ModTime().Before(since) {
				continue
			}
			if os.Remove(filepath.Join(d, de.Name())) == nil {
				n++
			}
		}
	}
	return n
}

// tempOf returns the file name an rsync temp name (".<name>.XXXXXX") stands for.
func tempOf(tmp string) (string, bool) {
	if len(tmp) < 9 || tmp[0] != '.' || tmp[len(tmp)-7] != '.' {
		return "", false
	}
	if strings.ContainsAny(tmp[len(tmp)-6:], "./") {
		return "", false
	}
	return tmp[1 : len(tmp)-7], true
}
