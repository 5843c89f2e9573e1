// Command gentree writes a deterministic, Cassandra-like directory tree for
// benchmarking prsync and its peers.
//
// Layout (as Cassandra's data directory):
//
//	OUT/<keyspace>/<table>-<32 hex uuid>/nb-<gen>-big-<Component>
//	OUT/<keyspace>/<table>-<32 hex uuid>/backups/          (empty)
//
// Every SSTable has eight components: TOC.txt, Digest.crc32, Filter.db,
// Statistics.db, Summary.db, CompressionInfo.db, Index.db and Data.db. The
// small ones are small; Data.db sizes follow a log-uniform distribution with a
// few large files. Binary content is ChaCha8 output (incompressible), seeded
// per file from -seed and the file's path, so the same seed and the same
// version of this program give a byte-identical tree with identical mtimes,
// whatever -workers is.
//
// Usage:
//
//	gentree -profile small -seed 1 -out /var/tmp/prsync-bench/trees/small-s1
//	gentree -mutate DIR -seed 1 -manifest FILE [-delete-pct 1] [-delete-dirs 2]
//	        [-modify-pct 1] [-add-pct 1] [-add-dirs 1]
//
// -mutate changes a copy of a generated tree in place, deterministically, as
// the source of a migration moves on after a first copy (bench/migrate.sh):
// it deletes the smallest -delete-dirs table directories and -delete-pct of
// the other files, modifies -modify-pct (half in place with the same size,
// half appended; each gets a new mtime), and adds -add-pct as new SSTables,
// some in -add-dirs new table directories. Never point it at a cached tree.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// Version is bumped whenever the output for a given profile and seed changes.
// bench/run.sh keys its cache of generated trees on it.
const Version = 1

// Profile describes the shape of a generated tree.
type Profile struct {
	Name         string
	Keyspaces    int
	Tables       int   // tables per keyspace
	SSTables     int   // total SSTables (8 files each)
	TargetBytes  int64 // if > 0, Data.db sizes are scaled so the tree totals about this much
	DataLo       int64 // small Data.db: log-uniform in [DataLo, DataHi)
	DataHi       int64
	BigPermille  int // per mille of Data.db files drawn from [BigLo, BigHi)
	BigLo, BigHi int64
	FixedData    int64 // if > 0, every Data.db has exactly this size
	StatsLo      int64 // Statistics.db: uniform in [StatsLo, StatsHi)
	StatsHi      int64
	Description  string
}

var profiles = map[string]Profile{
	"tiny": {
		Name: "tiny", Keyspaces: 2, Tables: 4, SSTables: 62, TargetBytes: 5_000_000,
		DataLo: 512, DataHi: 64 << 10, BigPermille: 30, BigLo: 512 << 10, BigHi: 2 << 20,
		StatsLo: 4600, StatsHi: 9000,
		Description: "496 files, ~5 MB: CI smoke",
	},
	"small": {
		Name: "small", Keyspaces: 4, Tables: 25, SSTables: 6250, TargetBytes: 1_090_000_000,
		DataLo: 512, DataHi: 256 << 10, BigPermille: 20, BigLo: 1 << 20, BigHi: 16 << 20,
		StatsLo: 4600, StatsHi: 12000,
		Description: "50,000 files, ~1.09 GB",
	},
	"many": {
		Name: "many", Keyspaces: 4, Tables: 100, SSTables: 25000,
		DataLo: 128, DataHi: 16 << 10,
		StatsLo: 1000, StatsHi: 4000,
		Description: "200,000 tiny files, ~0.2 GB",
	},
	"swarm": {
		Name: "swarm", Keyspaces: 4, Tables: 200, SSTables: 75000,
		DataLo: 128, DataHi: 16 << 10,
		StatsLo: 1000, StatsHi: 4000,
		Description: "600,000 tiny files, ~0.6 GB: the large daemon scenarios (9, 10)",
	},
	"big": {
		Name: "big", Keyspaces: 1, Tables: 2, SSTables: 20, FixedData: 100 << 20,
		StatsLo: 4600, StatsHi: 12000,
		Description: "20 Data.db files of 100 MiB (+140 small components), ~2.1 GB",
	},
}

// components in the order Cassandra lists them in TOC.txt.
var components = []string{
	"Statistics.db", "Digest.crc32", "Summary.db", "CompressionInfo.db",
	"Filter.db", "Index.db", "TOC.txt", "Data.db",
}

type sstable struct {
	dir   string // relative table directory
	gen   int
	data  int64
	stats int64
	mtime time.Time
}

// sizes of the derived components, all functions of the Data.db size.
func (s *sstable) sizes() map[string]int64 {
	d := s.data
	return map[string]int64{
		"Data.db":            d,
		"Index.db":           max(16, d/32),
		"Filter.db":          max(16, d/256),
		"Summary.db":         max(56, d/2048),
		"CompressionInfo.db": 43 + 8*((d+16383)/16384),
		"Statistics.db":      s.stats,
	}
}

type plan struct {
	tables   []string // relative table dirs
	sstables []sstable
	mtime    time.Time // for directories
}

// logUniform draws from [lo, hi) with a piecewise log-uniform distribution
// using integer arithmetic only (so the plan is the same on every platform).
func logUniform(r *rand.Rand, lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	octaves := 0
	for v := lo; v < hi; v <<= 1 {
		octaves++
	}
	k := r.IntN(octaves)
	a := lo << k
	b := min(a<<1, hi)
	return a + r.Int64N(b-a)
}

func hex32(r *rand.Rand) string {
	const digits = "0123456789abcdef"
	var b [32]byte
	for i := range b {
		b[i] = digits[r.IntN(16)]
	}
	return string(b[:])
}

var tableWords = []string{
	"users", "events", "sessions", "orders", "metrics", "audit_log", "messages",
	"devices", "inventory", "payments", "profiles", "timeline", "counters",
	"settings", "tokens", "shipments", "readings", "alerts", "carts", "votes",
}

func makePlan(p Profile, seed uint64) plan {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15^uint64(len(p.Name))))
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	pl := plan{mtime: base.Add(400 * 24 * time.Hour)}

	weights := []int{}
	total := 0
	for k := 0; k < p.Keyspaces; k++ {
		ks := fmt.Sprintf("keyspace_%02d", k+1)
		for t := 0; t < p.Tables; t++ {
			name := fmt.Sprintf("%s_%03d", tableWords[(k*p.Tables+t)%len(tableWords)], t+1)
			pl.tables = append(pl.tables, filepath.Join(ks, name+"-"+hex32(r)))
			w := 1 + r.IntN(4) // some tables hold four times as many SSTables as others
			weights = append(weights, w)
			total += w
		}
	}
	gens := make([]int, len(pl.tables))
	for i := 0; i < p.SSTables; i++ {
		x := r.IntN(total)
		t := 0
		for x >= weights[t] {
			x -= weights[t]
			t++
		}
		gens[t] += 1 + r.IntN(3) // compaction leaves gaps in generation numbers
		s := sstable{
			dir:   pl.tables[t],
			gen:   gens[t],
			stats: p.StatsLo + r.Int64N(max(1, p.StatsHi-p.StatsLo)),
			mtime: base.Add(time.Duration(r.Int64N(365*24*3600)) * time.Second),
		}
		switch {
		case p.FixedData > 0:
			s.data = p.FixedData
		case r.IntN(1000) < p.BigPermille:
			s.data = logUniform(r, p.BigLo, p.BigHi)
		default:
			s.data = logUniform(r, p.DataLo, p.DataHi)
		}
		pl.sstables = append(pl.sstables, s)
	}
	if p.TargetBytes > 0 {
		scaleTo(pl.sstables, p.TargetBytes)
	}
	return pl
}

// sstableBytes is the size of all eight components of s.
func sstableBytes(s *sstable) int64 {
	var n int64
	for _, v := range s.sizes() {
		n += v
	}
	return n + int64(len(tocText())) + 10 // Digest.crc32 is at most 10 digits
}

// scaleTo scales the Data.db sizes so that the whole tree is close to target.
// The derived components grow with Data.db, so iterate a few times.
func scaleTo(ss []sstable, target int64) {
	raw := make([]int64, len(ss))
	for i := range ss {
		raw[i] = ss[i].data
	}
	var rawSum int64
	for _, v := range raw {
		rawSum += v
	}
	k := 1.0
	for iter := 0; iter < 6; iter++ {
		var all, data int64
		for i := range ss {
			ss[i].data = max(1, int64(float64(raw[i])*k))
			all += sstableBytes(&ss[i])
			data += ss[i].data
		}
		other := all - data
		k = float64(target-other) / float64(rawSum)
	}
	for i := range ss {
		ss[i].data = max(1, int64(float64(raw[i])*k))
	}
}

func tocText() string {
	return strings.Join(components, "\n") + "\n"
}

// fileSeed derives the content seed of one file from the run seed and its path.
func fileSeed(seed uint64, rel string) [32]byte {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(rel))
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

type stats struct {
	mu    sync.Mutex
	files int64
	bytes int64
}

func (st *stats) add(n int64) {
	st.mu.Lock()
	st.files++
	st.bytes += n
	st.mu.Unlock()
}

// writeRandom writes n pseudo-random bytes to w and returns their CRC-32.
func writeRandom(w io.Writer, seed [32]byte, n int64, buf []byte) (uint32, error) {
	c := rand.NewChaCha8(seed)
	crc := crc32.NewIEEE()
	for n > 0 {
		chunk := buf
		if int64(len(chunk)) > n {
			chunk = chunk[:n]
		}
		c.Read(chunk)
		crc.Write(chunk)
		if _, err := w.Write(chunk); err != nil {
			return 0, err
		}
		n -= int64(len(chunk))
	}
	return crc.Sum32(), nil
}

func writeFile(path string, mtime time.Time, fill func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chtimes(path, mtime, mtime)
}

func writeSSTable(out string, seed uint64, s *sstable, buf []byte, st *stats) error {
	prefix := fmt.Sprintf("nb-%d-big-", s.gen)
	sizes := s.sizes()
	var digest uint32
	// Data.db first: Digest.crc32 holds its CRC-32, as in Cassandra.
	order := []string{"Data.db", "Index.db", "Filter.db", "Summary.db", "CompressionInfo.db", "Statistics.db"}
	for _, comp := range order {
		rel := filepath.Join(s.dir, prefix+comp)
		n := sizes[comp]
		err := writeFile(filepath.Join(out, rel), s.mtime, func(w io.Writer) error {
			crc, err := writeRandom(w, fileSeed(seed, rel), n, buf)
			if comp == "Data.db" {
				digest = crc
			}
			return err
		})
		if err != nil {
			return err
		}
		st.add(n)
	}
	texts := map[string]string{
		"Digest.crc32": fmt.Sprintf("%d", digest),
		"TOC.txt":      tocText(),
	}
	for _, comp := range []string{"Digest.crc32", "TOC.txt"} {
		rel := filepath.Join(s.dir, prefix+comp)
		t := texts[comp]
		if err := writeFile(filepath.Join(out, rel), s.mtime, func(w io.Writer) error {
			_, err := io.WriteString(w, t)
			return err
		}); err != nil {
			return err
		}
		st.add(int64(len(t)))
	}
	return nil
}

func run(p Profile, seed uint64, out string, workers int, force bool) (files, bytes int64, err error) {
	if ents, err := os.ReadDir(out); err == nil && len(ents) > 0 {
		if !force {
			return 0, 0, fmt.Errorf("%s exists and is not empty (use -force to replace it)", out)
		}
		if err := os.RemoveAll(out); err != nil {
			return 0, 0, err
		}
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, 0, err
	}
	pl := makePlan(p, seed)

	dirs := map[string]bool{}
	for _, t := range pl.tables {
		for d := t; d != "." && d != "/"; d = filepath.Dir(d) {
			dirs[d] = true
		}
		dirs[filepath.Join(t, "backups")] = true
	}
	for d := range dirs {
		if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
			return 0, 0, err
		}
	}

	var st stats
	work := make(chan int)
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for i := range work {
				if err := writeSSTable(out, seed, &pl.sstables[i], buf, &st); err != nil {
					errc <- err
					for range work {
					}
					return
				}
			}
		}()
	}
	for i := range pl.sstables {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errc:
		return 0, 0, err
	default:
	}

	// Directory mtimes last, deepest first, so writing files does not undo them.
	list := make([]string, 0, len(dirs)+1)
	for d := range dirs {
		list = append(list, d)
	}
	sort.Slice(list, func(i, j int) bool {
		ci, cj := strings.Count(list[i], "/"), strings.Count(list[j], "/")
		if ci != cj {
			return ci > cj
		}
		return list[i] < list[j]
	})
	list = append(list, ".")
	for _, d := range list {
		if err := os.Chtimes(filepath.Join(out, d), pl.mtime, pl.mtime); err != nil {
			return 0, 0, err
		}
	}
	return st.files, st.bytes, nil
}

func main() {
	profile := flag.String("profile", "small", "tree profile: tiny, small, many, swarm or big")
	seed := flag.Uint64("seed", 1, "PRNG seed; the same seed gives a byte-identical tree")
	out := flag.String("out", "", "output directory (created; must be empty or absent)")
	workers := flag.Int("workers", runtime.NumCPU(), "parallel writers (does not change the output)")
	force := flag.Bool("force", false, "remove a non-empty -out first")
	list := flag.Bool("list", false, "list the profiles and exit")
	version := flag.Bool("version", false, "print the generator version and exit")
	mutateDir := flag.String("mutate", "", "change the tree in DIR in place instead of generating one (see -delete-pct ...)")
	manifest := flag.String("manifest", "", "with -mutate: write the list of changes here (outside DIR)")
	var mu Mutation
	flag.Float64Var(&mu.DeletePct, "delete-pct", 1, "with -mutate: per cent of the files to delete")
	flag.IntVar(&mu.DeleteDirs, "delete-dirs", 2, "with -mutate: whole table directories to delete")
	flag.Float64Var(&mu.ModifyPct, "modify-pct", 1, "with -mutate: per cent of the files to modify")
	flag.Float64Var(&mu.AddPct, "add-pct", 1, "with -mutate: per cent of files to add")
	flag.IntVar(&mu.AddDirs, "add-dirs", 1, "with -mutate: new table directories")
	flag.Parse()

	if *mutateDir != "" {
		if err := runMutate(*mutateDir, *seed, mu, *manifest); err != nil {
			fmt.Fprintln(os.Stderr, "gentree:", err)
			os.Exit(1)
		}
		return
	}

	if *version {
		fmt.Println(Version)
		return
	}
	if *list {
		names := make([]string, 0, len(profiles))
		for n := range profiles {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Printf("%-6s %s\n", n, profiles[n].Description)
		}
		return
	}
	p, ok := profiles[*profile]
	if !ok {
		fmt.Fprintf(os.Stderr, "gentree: unknown profile %q (try -list)\n", *profile)
		os.Exit(2)
	}
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: gentree -profile NAME -seed N -out DIR")
		os.Exit(2)
	}
	start := time.Now()
	files, bytes, err := run(p, *seed, *out, max(1, *workers), *force)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentree:", err)
		os.Exit(1)
	}
	fmt.Printf("profile=%s seed=%d version=%d files=%d bytes=%d seconds=%.1f out=%s\n",
		p.Name, *seed, Version, files, bytes, time.Since(start).Seconds(), *out)
}

func runMutate(dir string, seed uint64, mu Mutation, manifest string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	var mw *bufio.Writer
	if manifest != "" {
		am, err := filepath.Abs(manifest)
		if err != nil {
			return err
		}
		if strings.HasPrefix(am, abs+string(filepath.Separator)) {
			return fmt.Errorf("the manifest %s is inside the tree %s", manifest, dir)
		}
		f, err := os.Create(manifest)
		if err != nil {
			return err
		}
		defer f.Close()
		mw = bufio.NewWriter(f)
	} else {
		mw = bufio.NewWriter(io.Discard)
	}
	start := time.Now()
	res, err := mutate(abs, seed, mu, mw)
	if err != nil {
		return err
	}
	fmt.Printf("mutate=%s seed=%d deleted_dirs=%d deleted_dir_files=%d deleted_files=%d modified=%d added=%d added_dirs=%d seconds=%.1f\n",
		dir, seed, res.DeletedDirs, res.DeletedDirFiles, res.DeletedFiles, res.Modified, res.Added, res.AddedDirs, time.Since(start).Seconds())
	return nil
}
