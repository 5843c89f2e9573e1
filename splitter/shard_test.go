package splitter

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/prsync/prsync/rsync"
)

// shardVectors freeze the --shard hash: XXH64, seed 0, over the raw record bytes, mod N.
// They were computed once with this implementation and cross-checked, every one of them,
// against the independent C implementation behind Debian's python3-xxhash 3.2.0:
//
//	python3 -c 'import xxhash; print(hex(xxhash.xxh64(b"abc", seed=0).intdigest()))'
//
// "" and "abc" are also the published XXH64 reference values. Changing any of these
// numbers changes which machine copies which path: it is a breaking change.
var shardVectors = []struct {
	path              string
	hash              uint64
	mod3, mod8, mod1k int
}{
	{"", 0xef46db3751d8e999, 0, 1, 921},
	{"a", 0xd24ec4f1a98c6e5b, 2, 3, 955},
	{"abc", 0x44bc2cf5ad770999, 0, 1, 249},
	{"/data/a.txt", 0xe7ba0068da1c2fe2, 2, 2, 370},
	{"./x/y", 0xfe6cd81211e43e83, 2, 3, 419},
	{"dir/file name.txt", 0xb878518000f19a94, 0, 4, 436},
	{"new\nline", 0xabf24e5576e4bb02, 1, 2, 66},
	{"bad\xffutf8", 0x510fd590e280438f, 0, 7, 287},
	{"/var/lib/cassandra/data/ks/t-1/nb-1-big-Data.db", 0xd8c4a3806686a0c5, 0, 5, 141},
	{"h\xc3\xa9llo/\xc3\xbcn\xc3\xaf", 0xfef737031a1229e7, 2, 7, 335},
}

func TestShardVectors(t *testing.T) {
	for _, v := range shardVectors {
		p := []byte(v.path)
		if got := xxhash.Sum64(p); got != v.hash {
			t.Errorf("XXH64(%q) = %#016x, want %#016x", v.path, got, v.hash)
		}
		for _, c := range []struct{ n, want int }{{3, v.mod3}, {8, v.mod8}, {1000, v.mod1k}, {1, 0}, {0, 0}, {-2, 0}} {
			if got := Shard(p, c.n); got != c.want {
				t.Errorf("Shard(%q, %d) = %d, want %d", v.path, c.n, got, c.want)
			}
		}
	}
}

// inodeVectors freeze the hard-link routing: XXH64, seed 0, of the inode number as
// 8 little-endian bytes, mod N (cross-checked with python3-xxhash and struct.pack("<Q", ino)).
var inodeVectors = []struct {
	ino              uint64
	mod2, mod3, mod8 int
}{
	{1, 1, 1, 5},
	{12, 1, 2, 1},
	{131074, 1, 1, 5},
	{9437185, 1, 0, 1},
	{1 << 40, 1, 2, 3},
}

func TestInodeShardVectors(t *testing.T) {
	for _, v := range inodeVectors {
		// The device number must not matter: it differs between NFS clients of one export.
		for _, dev := range []uint64{0, 1, 0x2f, 64769} {
			k := inode{dev: dev, ino: v.ino}
			for _, c := range []struct{ n, want int }{{2, v.mod2}, {3, v.mod3}, {8, v.mod8}} {
				if got := k.shard(c.n); got != c.want {
					t.Errorf("inode{dev %d, ino %d}.shard(%d) = %d, want %d", dev, v.ino, c.n, got, c.want)
				}
			}
		}
	}
}

func TestShardBalance(t *testing.T) {
	const total, n = 100_000, 8
	var counts [n]int
	for i := 0; i < total; i++ {
		p := fmt.Sprintf("/data/proj%02d/run-%04d/sample_%d.fastq.gz", i%37, i/37, i)
		counts[Shard([]byte(p), n)]++
	}
	lo, hi := total/n*95/100, total/n*105/100
	for k, c := range counts {
		if c < lo || c > hi {
			t.Errorf("shard %d/%d got %d of %d paths, want %d..%d", k, n, c, total, lo, hi)
		}
	}
	t.Logf("paths per shard: %v", counts)

	// hard-linked paths are routed by inode number; consecutive numbers must spread too
	var ic [n]int
	for i := uint64(0); i < total; i++ {
		ic[inode{dev: 2049, ino: 1_000_000 + i}.shard(n)]++
	}
	for k, c := range ic {
		if c < lo || c > hi {
			t.Errorf("inode shard %d/%d got %d of %d, want %d..%d", k, n, c, total, lo, hi)
		}
	}
}

// result is what one splitter run produced.
type result struct {
	chunks   [][]string // inputs per chunk, in send order
	accepted int
	fresh    []string
	settled  map[string]rsync.Status
	empty    int
}

func (r *result) all() []string {
	var out []string
	for _, c := range r.chunks {
		out = append(out, c...)
	}
	sort.Strings(out)
	return out
}

func split(t *testing.T, cfg Config, input []byte) *result {
	t.Helper()
	res := &result{settled: map[string]rsync.Status{}}
	if cfg.Sep == 0 && !bytes.Contains(input, []byte{0}) {
		cfg.Sep = '\n'
	}
	if cfg.Cwd == "" {
		cfg.Cwd = "/"
	}
	sp := New(cfg, Hooks{
		Settled:  func(in []byte, status rsync.Status, _ string) { res.settled[string(in)] = status },
		Accepted: func(int64) { res.accepted++ },
		Fresh:    func(in []byte, _ int64) { res.fresh = append(res.fresh, string(in)) },
		Empty:    func() { res.empty++ },
	})
	out := make(chan *Chunk, 100_000)
	if err := sp.Run(context.Background(), bytes.NewReader(input), out); err != nil {
		t.Fatalf("Run: %v", err)
	}
	close(out)
	for c := range out {
		var ins []string
		for _, in := range c.Inputs {
			ins = append(ins, string(in))
		}
		if len(c.Entries) != len(c.Inputs) {
			t.Fatalf("chunk %d: %d entries for %d inputs", c.ID, len(c.Entries), len(c.Inputs))
		}
		res.chunks = append(res.chunks, ins)
	}
	return res
}

func lines(paths []string) []byte {
	return []byte(strings.Join(paths, "\n") + "\n")
}

func makeFiles(t *testing.T, n int) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("d%d", i%7), fmt.Sprintf("f%03d", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return dir, paths
}

func TestShardPartition(t *testing.T) {
	_, paths := makeFiles(t, 300)
	in := lines(append(paths, "", "/nonexistent/zzz"))
	want := append([]string(nil), paths...)
	sort.Strings(want)

	// --shard 0/1 is the same as no flag: every path
	for _, cfg := range []Config{{ChunkFiles: 7}, {ChunkFiles: 7, Shard: 0, Shards: 1}, {ChunkFiles: 7, Shards: 1, HardLinks: true}} {
		r := split(t, cfg, in)
		if got := r.all(); !slices.Equal(got, want) {
			t.Errorf("%+v: got %d paths, want all %d", cfg, len(got), len(want))
		}
		if r.accepted != 300 || r.settled["/nonexistent/zzz"] != rsync.Vanished || r.empty != 1 {
			t.Errorf("%+v: accepted %d, settled %v, empty %d", cfg, r.accepted, r.settled, r.empty)
		}
	}

	// K/3: disjoint, and together all of them; the vanished path is settled by its shard only
	for _, hl := range []bool{false, true} {
		var union []string
		vanished := 0
		for k := 0; k < 3; k++ {
			r := split(t, Config{ChunkFiles: 7, Shard: k, Shards: 3, HardLinks: hl}, in)
			for _, p := range r.all() {
				if got := Shard([]byte(p), 3); got != k {
					t.Errorf("hardlinks=%v: %s in shard %d, its hash says %d", hl, p, k, got)
				}
			}
			union = append(union, r.all()...)
			vanished += len(r.settled)
			if r.accepted != len(r.all()) {
				t.Errorf("accepted %d, chunked %d", r.accepted, len(r.all()))
			}
		}
		sort.Strings(union)
		if !slices.Equal(union, want) {
			t.Errorf("hardlinks=%v: union of 3 shards has %d paths (dups or gaps), want %d", hl, len(union), len(want))
		}
		if vanished != 1 {
			t.Errorf("hardlinks=%v: vanished path settled by %d shards, want 1", hl, vanished)
		}
	}
}

// linkTree makes groups of hard links; group g has sizes[g] links, spread over directories.
// It returns the groups' paths and some plain files.
func linkTree(t *testing.T, sizes []int, plain int) (groups [][]string, files []string) {
	t.Helper()
	dir := t.TempDir()
	for g, n := range sizes {
		var ps []string
		for i := 0; i < n; i++ {
			p := filepath.Join(dir, fmt.Sprintf("dir%d", (g+i*3)%5), fmt.Sprintf("g%d-link%d", g, i))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				if err := os.WriteFile(p, []byte(fmt.Sprintf("group %d\n", g)), 0o644); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Link(ps[0], p); err != nil {
				t.Skipf("hard links not supported here: %v", err)
			}
			ps = append(ps, p)
		}
		groups = append(groups, ps)
	}
	for i := 0; i < plain; i++ {
		p := filepath.Join(dir, fmt.Sprintf("dir%d", i%5), fmt.Sprintf("plain%03d", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("plain"), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	return groups, files
}

// interleave spreads the links of every group far apart: link i of every group comes
// after a stretch of plain files.
func interleave(groups [][]string, files []string, only map[string]bool) []string {
	var out []string
	fi := 0
	for round := 0; ; round++ {
		any := false
		for _, g := range groups {
			if round < len(g) {
				if only == nil || only[g[round]] {
					out = append(out, g[round])
				}
				any = true
			}
		}
		for j := 0; j < 10 && fi < len(files); j++ {
			out = append(out, files[fi])
			fi++
		}
		if !any && fi >= len(files) {
			return out
		}
	}
}

func chunkOf(r *result) map[string]int {
	m := map[string]int{}
	for i, c := range r.chunks {
		for _, p := range c {
			m[p] = i
		}
	}
	return m
}

func TestHardLinkGrouping(t *testing.T) {
	groups, files := linkTree(t, []int{2, 3, 4, 2, 5, 3}, 60)
	// drop the last link of groups 4 and 5: they stay incomplete until EOF
	missing := map[string]bool{groups[4][4]: true, groups[5][2]: true}
	only := map[string]bool{}
	for _, g := range groups {
		for _, p := range g {
			only[p] = !missing[p]
		}
	}
	in := interleave(groups, files, only)
	dirs := []string{filepath.Dir(files[0]), filepath.Dir(files[1])} // directories have nlink > 1
	in = append(in, dirs...)
	total := len(in)

	incomplete := func(g int) bool { return g == 4 || g == 5 }

	cases := []struct {
		name          string
		cfg           Config
		grouped       bool
		shards        int
		wantTotal     int
		drainedAtLast bool
	}{
		{name: "links grouped, chunk-files 3", cfg: Config{ChunkFiles: 3, HardLinks: true}, grouped: true, drainedAtLast: true},
		{name: "links grouped, chunk-files 1", cfg: Config{ChunkFiles: 1, HardLinks: true}, grouped: true, drainedAtLast: true},
		{name: "links grouped, 3 shards", cfg: Config{ChunkFiles: 3, HardLinks: true}, grouped: true, shards: 3},
		{name: "no -H: links are plain paths", cfg: Config{ChunkFiles: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := max(tc.shards, 1)
			var union []string
			for k := 0; k < n; k++ {
				cfg := tc.cfg
				cfg.Shard, cfg.Shards = k, n
				r := split(t, cfg, lines(in))
				union = append(union, r.all()...)
				where := chunkOf(r)
				for ci, c := range r.chunks {
					if len(c) > cfg.ChunkFiles {
						// only a whole link group may overflow a chunk
						var ino uint64
						for _, p := range c {
							var st syscall.Stat_t
							if err := syscall.Lstat(p, &st); err != nil || st.Nlink < 2 || (ino != 0 && st.Ino != ino) {
								t.Errorf("chunk %d has %d paths > %d and is not one link group: %q", ci, len(c), cfg.ChunkFiles, c)
								break
							}
							ino = st.Ino
						}
					}
				}
				if !tc.grouped {
					continue
				}
				for g, ps := range groups {
					ci, seen := -1, 0
					for _, p := range ps {
						if missing[p] {
							continue
						}
						c, ok := where[p]
						if !ok {
							continue
						}
						seen++
						if ci >= 0 && c != ci {
							t.Errorf("shard %d/%d: group %d split over chunks %d and %d", k, n, g, ci, c)
						}
						ci = c
					}
					if seen != 0 && seen != len(ps)-len(missingIn(ps, missing)) {
						t.Errorf("shard %d/%d: group %d has %d links here, the rest elsewhere", k, n, g, seen)
					}
					if tc.drainedAtLast && incomplete(g) {
						// held until EOF: drained after every complete group and every plain file was sent
						for _, f := range files {
							if where[f] > ci {
								t.Errorf("incomplete group %d (chunk %d) was sent before plain file %s (chunk %d)", g, ci, f, where[f])
								break
							}
						}
					}
				}
				// directories (nlink > 1) are never held as link groups: each is sent in input order
				if tc.drainedAtLast {
					for _, d := range dirs {
						if c, ok := where[d]; ok && c < where[files[len(files)-1]] {
							t.Errorf("directory %s sent in chunk %d, before the last plain file", d, c)
						}
					}
				}
			}
			sort.Strings(union)
			want := append([]string(nil), in...)
			sort.Strings(want)
			if !slices.Equal(union, want) {
				t.Errorf("got %d paths over %d shard(s), want each of %d exactly once", len(union), n, total)
			}
		})
	}
}

func missingIn(ps []string, missing map[string]bool) []string {
	var out []string
	for _, p := range ps {
		if missing[p] {
			out = append(out, p)
		}
	}
	return out
}

// TestHardLinkDrainOrder checks the drain at EOF on its own: a link whose mates never come is
// sent at EOF, not earlier, and not lost; with a -0 list too.
func TestHardLinkDrainOrder(t *testing.T) {
	groups, files := linkTree(t, []int{3}, 4)
	in := []string{groups[0][0], files[0], files[1], files[2], files[3]}
	var nulIn []byte
	for _, p := range in {
		nulIn = append(append(nulIn, p...), 0)
	}
	for _, input := range [][]byte{lines(in), nulIn} {
		r := split(t, Config{ChunkFiles: 3, HardLinks: true}, input)
		// the link is read first but held; at EOF it joins the open chunk, after the plain files
		want := [][]string{{files[0], files[1], files[2]}, {files[3], groups[0][0]}}
		if !slices.EqualFunc(r.chunks, want, slices.Equal) {
			t.Errorf("chunks = %q, want %q", r.chunks, want)
		}
		if r.accepted != 5 {
			t.Errorf("accepted %d, want 5", r.accepted)
		}
	}
}

// TestShardQuickCheckHardLinks: with the local quick check on and -H detected, a hard link is
// routed by inode and always goes to rsync with its group; every path is counted by exactly one
// shard, fresh or chunked. (The quick check used to take links by their path hash: counted twice.)
func TestShardQuickCheckHardLinks(t *testing.T) {
	groups, files := linkTree(t, []int{2, 3, 2, 4, 2, 2, 3, 2}, 40)
	root := filepath.Dir(filepath.Dir(files[0]))
	in := interleave(groups, files, nil)
	linked := map[string]bool{}
	for _, g := range groups {
		for _, p := range g {
			linked[p] = true
		}
	}
	var union []string
	for k := 0; k < 3; k++ {
		// DEST is the source itself, so every regular file is up to date
		cfg := Config{Root: root, ChunkFiles: 3, HardLinks: true, Shard: k, Shards: 3, Quick: &QuickCheck{Dest: root, Owner: true}}
		r := split(t, cfg, lines(in))
		for _, p := range r.fresh {
			if linked[p] {
				t.Errorf("shard %d: hard link %s settled by the quick check instead of going to rsync with its group", k, p)
			}
			if Shard([]byte(p), 3) != k {
				t.Errorf("shard %d: quick check took %s of shard %d", k, p, Shard([]byte(p), 3))
			}
		}
		union = append(append(union, r.all()...), r.fresh...)
	}
	sort.Strings(union)
	want := append([]string(nil), in...)
	sort.Strings(want)
	if !slices.Equal(union, want) {
		t.Errorf("3 shards counted %d paths (fresh or chunked), want each of %d exactly once", len(union), len(want))
	}
}
