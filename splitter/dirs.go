package splitter

import (
	"sort"
	"strings"
)

// Dirs collects the directories a run's paths touch, for the deletion pass: each listed
// directory and each parent of a listed path, up to the root its path is relative to
// (--root, the working directory, or "/" for an absolute path without --root, whose top
// is left out). The splitter adds to it from one goroutine; read it once Run has returned.
type Dirs struct {
	byRoot map[string]map[string]struct{}
	n      int
}

// DirList is the touched directories below one root, as --files-from entries for rsync
// (relative to Root, ending in "/"; "./" for Root itself), sorted.
type DirList struct {
	Root    string
	Entries [][]byte
}

// Len returns the number of directories collected.
func (d *Dirs) Len() int {
	if d == nil {
		return 0
	}
	return d.n
}

// add records the directories a path touches: its parents and, when dir, itself. root
// and entry are the path's rsync source and --files-from entry, as resolve made them.
func (d *Dirs) add(root, entry string, dir, keepTop bool) {
	if i := strings.Index(entry, "/./"); i >= 0 {
		root, entry = joinClean(root, entry[:i]), entry[i+3:]
	}
	entry = strings.TrimPrefix(entry, "./") // protect's "./" before '#' and ';'
	if root == "/" && !keepTop {
		if entry == "." || entry == "" {
			return
		}
	}
	if d.byRoot == nil {
		d.byRoot = map[string]map[string]struct{}{}
	}
	set := d.byRoot[root]
	if set == nil {
		set = map[string]struct{}{}
		d.byRoot[strings.Clone(root)] = set
	}
	p := entry
	if !dir {
		p = parent(entry)
	}
	for {
		if p == "." && root == "/" && !keepTop {
			return
		}
		if _, ok := set[p]; ok {
			return // its parents are in too
		}
		set[strings.Clone(p)] = struct{}{}
		d.n++
		if p == "." {
			return
		}
		p = parent(p)
	}
}

// parent returns the parent of a clean relative path: "." for a top-level name.
func parent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return "."
}

// Lists returns the directories collected, by root, sorted, as rsync entries.
func (d *Dirs) Lists() []DirList {
	if d == nil {
		return nil
	}
	roots := make([]string, 0, len(d.byRoot))
	for r := range d.byRoot {
		roots = append(roots, r)
	}
	sort.Strings(roots)
	out := make([]DirList, 0, len(roots))
	for _, r := range roots {
		dirs := make([]string, 0, len(d.byRoot[r]))
		for p := range d.byRoot[r] {
			dirs = append(dirs, p)
		}
		sort.Strings(dirs)
		l := DirList{Root: r, Entries: make([][]byte, len(dirs))}
		for i, p := range dirs {
			if p == "." {
				l.Entries[i] = []byte("./")
				continue
			}
			l.Entries[i] = []byte(protect(p) + "/")
		}
		out = append(out, l)
	}
	return out
}
