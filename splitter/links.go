package splitter

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// inode identifies a file on one machine.
type inode struct{ dev, ino uint64 }

// shard routes an inode, so that all its links land in one shard: XXH64 (seed 0) of the
// inode number as 8 little-endian bytes, mod n. The device number is left out on purpose:
// on NFS, Lustre and other network filesystems st_dev is assigned at mount time and differs
// between the nodes that share one list, and a path would then fall in no shard or in two.
// Two inodes of different filesystems with one number only share a shard, which is harmless.
func (k inode) shard(n int) int {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], k.ino)
	return int(xxhash.Sum64(b[:]) % uint64(n))
}

// linkGroups holds the links of inodes with nlink > 1 until all of them were read.
type linkGroups struct {
	m     map[inode]*group
	order []inode
}

type group struct {
	nlink uint64
	recs  []rec
}

func newLinkGroups() *linkGroups { return &linkGroups{m: make(map[inode]*group)} }

// add records one link and returns the whole group once all nlink links were seen.
func (l *linkGroups) add(k inode, nlink uint64, r rec) []rec {
	g := l.m[k]
	if g == nil {
		g = &group{nlink: nlink}
		l.m[k] = g
		l.order = append(l.order, k)
	}
	g.recs = append(g.recs, r)
	if uint64(len(g.recs)) < g.nlink {
		return nil
	}
	delete(l.m, k)
	if len(l.order) > 64 && len(l.order) > 2*len(l.m) {
		l.compact()
	}
	return g.recs
}

// drain returns the groups still waiting (some links were not in the input), in first-seen order.
func (l *linkGroups) drain() [][]rec {
	var out [][]rec
	for _, k := range l.order {
		if g, ok := l.m[k]; ok {
			out = append(out, g.recs)
		}
	}
	l.m = make(map[inode]*group)
	l.order = nil
	return out
}

// compact drops finished inodes from the first-seen order, so it stays bounded by what waits.
func (l *linkGroups) compact() {
	kept := l.order[:0]
	for _, k := range l.order {
		if _, ok := l.m[k]; ok {
			kept = append(kept, k)
		}
	}
	l.order = kept
}
