package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Mutation says how -mutate changes a generated tree, to make it need the
// final pass of a migration (bench/migrate.sh): the tree has moved on since
// an old copy was taken.
type Mutation struct {
	DeletePct  float64 // per cent of the files deleted, scattered
	DeleteDirs int     // whole table directories deleted (the smallest ones)
	ModifyPct  float64 // per cent of the files modified (half in place, same size; half appended)
	AddPct     float64 // per cent of the files added, as whole new SSTables
	AddDirs    int     // new table directories, holding some of the new SSTables
}

// MutateResult counts what -mutate did.
type MutateResult struct {
	DeletedFiles, DeletedDirFiles, DeletedDirs int
	Modified, Added, AddedDirs                 int
}

var genRe = regexp.MustCompile(`^nb-([0-9]+)-big-`)

// mutate changes the tree at root in place, deterministically for a given
// tree, seed and mutation, and writes a manifest: one line per change,
// "R dir" (directory removed), "D file" (deleted), "M file" (modified),
// "N dir" (new directory), "A file" (added); paths relative to root.
func mutate(root string, seed uint64, mu Mutation, manifest *bufio.Writer) (MutateResult, error) {
	var res MutateResult
	var files []string
	sizes := map[string]int64{}
	perDir := map[string][]string{}
	var latest time.Time
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files = append(files, rel)
		sizes[rel] = info.Size()
		perDir[filepath.Dir(rel)] = append(perDir[filepath.Dir(rel)], rel)
		if info.ModTime().After(latest) {
			latest = info.ModTime()
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	if len(files) == 0 {
		return res, fmt.Errorf("%s holds no files", root)
	}
	sort.Strings(files)
	// Changes are a day after the newest file, a second apart.
	base := latest.Truncate(time.Second).Add(24 * time.Hour)
	tick := 0
	stamp := func() time.Time { tick++; return base.Add(time.Duration(tick) * time.Second) }
	r := rand.New(rand.NewPCG(seed, 0x6d75746174650a))
	n := len(files)
	count := func(pct float64) int { return int(float64(n)*pct/100 + 0.5) }
	touched := map[string]bool{}

	// Table directories, smallest first; whole ones go first (DROP TABLE).
	var dirs []string
	for d := range perDir {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool {
		a, b := len(perDir[dirs[i]]), len(perDir[dirs[j]])
		if a != b {
			return a < b
		}
		return dirs[i] < dirs[j]
	})
	gone := map[string]bool{}
	for i := 0; i < mu.DeleteDirs && i < len(dirs)-1; i++ {
		d := dirs[i]
		if err := os.RemoveAll(filepath.Join(root, d)); err != nil {
			return res, err
		}
		fmt.Fprintf(manifest, "R %s\n", d)
		for _, f := range perDir[d] {
			gone[f] = true
		}
		touched[filepath.Dir(d)] = true
		res.DeletedDirs++
		res.DeletedDirFiles += len(perDir[d])
	}
	var alive []string
	for _, f := range files {
		if !gone[f] {
			alive = append(alive, f)
		}
	}
	// Scattered deletions, then modifications, from one shuffle of the rest.
	perm := r.Perm(len(alive))
	nDel, nMod := min(count(mu.DeletePct), len(alive)), count(mu.ModifyPct)
	nMod = min(nMod, len(alive)-nDel)
	for _, i := range perm[:nDel] {
		f := alive[i]
		if err := os.Remove(filepath.Join(root, f)); err != nil {
			return res, err
		}
		fmt.Fprintf(manifest, "D %s\n", f)
		touched[filepath.Dir(f)] = true
		gone[f] = true
		res.DeletedFiles++
	}
	buf := make([]byte, 64<<10)
	for k, i := range perm[nDel : nDel+nMod] {
		f := alive[i]
		p := filepath.Join(root, f)
		if err := modify(p, sizes[f], k%2 == 1, r, buf); err != nil {
			return res, err
		}
		t := stamp()
		if err := os.Chtimes(p, t, t); err != nil {
			return res, err
		}
		fmt.Fprintf(manifest, "M %s\n", f)
		res.Modified++
	}

	// New SSTables (eight files each), Data.db sizes drawn from the tree's.
	var dataSizes []int64
	var tables []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(root, d)); err == nil && filepath.Base(d) != "backups" {
			tables = append(tables, d)
		}
	}
	for _, f := range alive {
		if strings.HasSuffix(f, "-Data.db") && !gone[f] {
			dataSizes = append(dataSizes, sizes[f])
		}
	}
	if len(dataSizes) == 0 {
		for _, f := range alive {
			dataSizes = append(dataSizes, max(1, sizes[f]))
		}
	}
	nSS := (count(mu.AddPct) + len(components) - 1) / len(components)
	var newDirs []string
	for i := 0; i < mu.AddDirs && nSS > 0 && len(tables) > 0; i++ {
		ks := filepath.Dir(tables[r.IntN(len(tables))])
		d := filepath.Join(ks, fmt.Sprintf("migrated_%03d-%s", i+1, hex32(r)))
		if err := os.MkdirAll(filepath.Join(root, d, "backups"), 0o755); err != nil {
			return res, err
		}
		fmt.Fprintf(manifest, "N %s\nN %s\n", d, filepath.Join(d, "backups"))
		touched[ks] = true
		touched[d] = true
		touched[filepath.Join(d, "backups")] = true
		newDirs = append(newDirs, d)
		res.AddedDirs++
	}
	nextGen := map[string]int{}
	gen := func(d string) int {
		if g, ok := nextGen[d]; ok {
			nextGen[d] = g + 1
			return g
		}
		g := 0
		for _, f := range perDir[d] {
			if m := genRe.FindStringSubmatch(filepath.Base(f)); m != nil {
				v, _ := strconv.Atoi(m[1])
				g = max(g, v)
			}
		}
		nextGen[d] = g + 2
		return g + 1
	}
	var st stats
	big := make([]byte, 1<<20)
	for i := 0; i < nSS && len(tables) > 0; i++ {
		d := tables[r.IntN(len(tables))]
		if len(newDirs) > 0 && i%10 == 0 {
			d = newDirs[(i/10)%len(newDirs)]
		}
		s := sstable{dir: d, gen: gen(d), data: dataSizes[r.IntN(len(dataSizes))],
			stats: 4600 + r.Int64N(4000), mtime: stamp()}
		if err := writeSSTable(root, seed^0x5eed, &s, big, &st); err != nil {
			return res, err
		}
		prefix := fmt.Sprintf("nb-%d-big-", s.gen)
		for _, c := range components {
			fmt.Fprintf(manifest, "A %s\n", filepath.Join(d, prefix+c))
		}
		touched[d] = true
		res.Added += len(components)
	}
	// Directories whose entries changed get one fixed mtime, so the result
	// does not depend on when it ran.
	for d := range touched {
		if d == "" {
			d = "."
		}
		if err := os.Chtimes(filepath.Join(root, d), base, base); err != nil && !os.IsNotExist(err) {
			return res, err
		}
	}
	return res, manifest.Flush()
}

// modify changes a file's content: in place (same size, a block of new
// bytes at a random offset) or by appending up to 16 KiB.
func modify(path string, size int64, appendData bool, r *rand.Rand, buf []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	var n int64
	var off int64
	if appendData || size == 0 {
		n, off = 1+r.Int64N(16<<10), size
	} else {
		n = min(size, 4096)
		off = r.Int64N(size - n + 1)
	}
	b := buf[:n]
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
