package splitter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prsync/prsync/rsync"
)

// collect runs a Splitter over input and returns the chunks and the settled paths.
func collect(t *testing.T, cfg Config, input string) ([]*Chunk, []string) {
	t.Helper()
	var settled []string
	s := New(cfg, Hooks{Settled: func(in []byte, status rsync.Status, reason string) {
		settled = append(settled, string(status)+":"+string(in))
	}})
	out := make(chan *Chunk, 1000)
	if err := s.Run(context.Background(), strings.NewReader(input), out); err != nil {
		t.Fatal(err)
	}
	close(out)
	var cs []*Chunk
	for c := range out {
		cs = append(cs, c)
	}
	return cs, settled
}

func sizes(cs []*Chunk) string {
	var b []string
	for _, c := range cs {
		b = append(b, fmt.Sprintf("%d/%d", c.Len(), c.Bytes))
	}
	return strings.Join(b, " ")
}

func TestChunkBounds(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, size int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b, c, big, d := mk("a", 10), mk("b", 10), mk("c", 10), mk("big", 100), mk("d", 10)
	list := func(ps ...string) string { return strings.Join(ps, "\n") + "\n" }
	tests := []struct {
		name  string
		files int
		bytes int64
		in    string
		want  string
	}{
		{"count", 2, 1000, list(a, b, c, d), "2/20 2/20"},
		{"bytes", 100, 25, list(a, b, c, d), "2/20 2/20"},
		{"big file alone", 100, 50, list(a, big, b), "1/10 1/100 1/10"},
		{"big file first", 100, 50, list(big, a, b), "1/100 2/20"},
		{"exact bytes", 100, 20, list(a, b, c), "2/20 1/10"},
		{"one per chunk", 1, 1000, list(a, b), "1/10 1/10"},
		{"no final newline", 10, 1000, a + "\n" + b, "2/20"},
		{"empty records skipped", 10, 1000, "\n" + a + "\n\n" + b + "\n", "2/20"},
		{"nothing", 10, 1000, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, _ := collect(t, Config{Sep: '\n', Cwd: "/", ChunkFiles: tt.files, ChunkBytes: tt.bytes}, tt.in)
			if got := sizes(cs); got != tt.want {
				t.Errorf("chunks %q, want %q", got, tt.want)
			}
			for i, c := range cs {
				if c.ID != i+1 {
					t.Errorf("chunk %d has ID %d", i, c.ID)
				}
			}
		})
	}
}

// TestListBytes: Config.ListBytes bounds the bytes of a chunk's list (each entry and its
// separator) alongside the count and the bytes of the files.
func TestListBytes(t *testing.T) {
	dir := t.TempDir()
	var ps []string
	for _, name := range []string{"a", "b", "c", "d"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, make([]byte, 10), 0o644); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	in := strings.Join(ps, "\n") + "\n"
	cs, _ := collect(t, Config{Sep: '\n', Cwd: "/", ChunkFiles: 100, ChunkBytes: 1000}, in)
	if len(cs) != 1 || cs[0].Len() != 4 {
		t.Fatalf("unbounded: chunks %q, want one of 4", sizes(cs))
	}
	e := int64(len(cs[0].Entries[0])) + 1 // the four entries are as long
	tests := []struct {
		name  string
		files int
		list  int64
		want  string
	}{
		{"no bound", 100, 0, "4/40"},
		{"two entries exactly", 100, 2 * e, "2/20 2/20"},
		{"a byte short of two", 100, 2*e - 1, "1/10 1/10 1/10 1/10"},
		{"three entries", 100, 3*e + e/2, "3/30 1/10"},
		{"the count first", 1, 4 * e, "1/10 1/10 1/10 1/10"},
		{"smaller than one entry: one a chunk", 100, 1, "1/10 1/10 1/10 1/10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, _ := collect(t, Config{Sep: '\n', Cwd: "/", ChunkFiles: tt.files, ChunkBytes: 1000, ListBytes: tt.list}, in)
			if got := sizes(cs); got != tt.want {
				t.Errorf("chunks %q, want %q", got, tt.want)
			}
			for _, c := range cs {
				var n int64
				for _, en := range c.Entries {
					n += int64(len(en)) + 1
				}
				if tt.list > 0 && c.Len() > 1 && n > tt.list {
					t.Errorf("chunk %d holds %d bytes of list, bound %d", c.ID, n, tt.list)
				}
			}
		})
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		root, cwd, in string
		links         bool
		want          string // src|entry, or "error"
	}{
		{"", "/work", "/var/lib/x", false, "/|var/lib/x"},
		{"", "/work", "/var//lib/./x/", false, "/|var/lib/x"},
		{"", "/work", "/", false, "/|."},
		{"", "/work", "/#hash", false, "/|./#hash"},
		{"", "/work", "a/b", false, "/work|a/b"},
		{"", "/work", "./a/b", false, "/work|a/b"},
		{"", "/work", "a/b", true, "/|work/./a/b"},
		{"", "/", "a", true, "/|a"},
		{"", "/", "a", false, "/|a"},
		{"", "/work", "../x", false, "error"},
		{"/var/lib", "/work", "/var/lib/cassandra/x", false, "/var/lib|cassandra/x"},
		{"/var/lib", "/work", "/var/lib/cassandra/x", true, "/var/lib|cassandra/x"},
		{"/var/lib", "/work", "/var/lib", false, "/var/lib|."},
		{"/var/lib", "/work", "/var/libx/y", false, "error"},
		{"/var/lib", "/work", "/etc/passwd", false, "error"},
		{"/var/lib", "/work", "cassandra/x", false, "/var/lib|cassandra/x"},
		{"/var/lib", "/work", ";semi", false, "/var/lib|./;semi"},
		{"/var/lib", "/work", "a/../../x", false, "error"},
		{"/", "/work", "/etc/x", false, "/|etc/x"},
		{"", "/work", "#hash", false, "/work|./#hash"},
		{"", "/work", "-e touch", false, "/work|-e touch"},
		{"", "/work", "a\x00b", false, "error"},
		{"", "/work", ".", false, "/work|."},
		{"", "/work", "./", false, "/work|."},
		{"", "/work", "./.", false, "/work|."},
		{"", "/work", "a/./b//c/", false, "/work|a/b/c"},
		{"", "/work", "./;semi", false, "/work|./;semi"},
		{"", "/work", "a/..", false, "/work|."},
		{"", "/", "./x", false, "/|x"},
		{"/var/lib", "/work", "./a", true, "/var/lib|a"},
	}
	for _, tt := range tests {
		s := New(Config{Root: tt.root, Cwd: tt.cwd, HardLinks: tt.links}, Hooks{})
		abs, src, e, lands, err := s.resolve([]byte(tt.in))
		got := src + "|" + string(e)
		if err != nil {
			got = "error"
		}
		if got != tt.want {
			t.Errorf("root %q cwd %q links %v: resolve(%q) = %q, want %q", tt.root, tt.cwd, tt.links, tt.in, got, tt.want)
		}
		if err != nil {
			continue
		}
		// where the path lands is what rsync makes of the entry, and abs is the source path
		if want := rsync.LandsAt([]byte(e)); lands != want {
			t.Errorf("resolve(%q): lands %q, want %q", tt.in, lands, want)
		}
		if want := filepath.Join(src, e); abs != want {
			t.Errorf("resolve(%q): abs %q, want %q", tt.in, abs, want)
		}
	}
}

func TestSettled(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	os.WriteFile(ok, []byte("x"), 0o644)
	long := strings.Repeat("x", 1<<20)
	in := strings.Join([]string{ok, filepath.Join(dir, "gone"), "/outside/root", long}, "\x00") + "\x00"
	cs, settled := collect(t, Config{Sep: 0, Root: dir, Cwd: "/", ChunkFiles: 10, ChunkBytes: 1 << 30}, in)
	if sizes(cs) != "1/1" {
		t.Errorf("chunks %s", sizes(cs))
	}
	want := []string{"vanished:" + filepath.Join(dir, "gone"), "failed:/outside/root", "failed:" + long}
	if len(settled) != len(want) {
		t.Fatalf("settled %d paths, want %d", len(settled), len(want))
	}
	for i := range want {
		if settled[i] != want[i] {
			t.Errorf("settled[%d] = %.60q, want %.60q", i, settled[i], want[i])
		}
	}
}

func TestEveryByteKept(t *testing.T) {
	dir := t.TempDir()
	names := []string{"new\nline", "bad\xffutf8", " lead", "trail ", `back\slash`, "cr\r", "-e x", "#h", ";s"}
	var in []byte
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		in = append(append(in, p...), 0)
	}
	cs, settled := collect(t, Config{Sep: 0, Root: dir, Cwd: "/", ChunkFiles: 100, ChunkBytes: 1 << 30}, string(in))
	if len(settled) != 0 || len(cs) != 1 {
		t.Fatalf("settled %q, %d chunks", settled, len(cs))
	}
	for i, n := range names {
		if got := string(cs[0].Inputs[i]); got != filepath.Join(dir, n) {
			t.Errorf("input %q, want %q", got, filepath.Join(dir, n))
		}
		want := n
		if n[0] == '#' || n[0] == ';' {
			want = "./" + n
		}
		if got := string(cs[0].Entries[i]); got != want || cs[0].Src != dir {
			t.Errorf("entry %q in %q, want %q in %q", got, cs[0].Src, want, dir)
		}
	}
}

// TestIdleWait: a chunk closes when no new path arrived for ChunkWait, while the input is still open.
func TestIdleWait(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, nil, 0o644)
	pr, pw := io.Pipe()
	s := New(Config{Sep: '\n', Cwd: "/", ChunkFiles: 1000, ChunkBytes: 1 << 30, ChunkWait: 50 * time.Millisecond}, Hooks{})
	out := make(chan *Chunk)
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background(), pr, out) }()
	fmt.Fprintf(pw, "%s\n%s\n", p, p)
	select {
	case c := <-out:
		if c.Len() != 2 {
			t.Errorf("chunk of %d, want 2", c.Len())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no chunk while the input stayed open")
	}
	fmt.Fprintf(pw, "%s\n", p)
	pw.Close()
	if c := <-out; c.Len() != 1 {
		t.Errorf("last chunk of %d, want 1", c.Len())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestIdleWaitBlocked: time the splitter spends waiting for its consumer to take a chunk is
// not a wait for paths. With the whole input there at once and the consumer taking each
// chunk long after ChunkWait, every chunk is full: a pull over ssh at -j 1 had cut every
// other chunk at the 11 to 289 paths read after the consumer took the one before, each one
// more ssh session (bench H87).
func TestIdleWaitBlocked(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const n, per = 4000, 1000
	s := New(Config{Sep: '\n', Cwd: "/", ChunkFiles: per, ChunkBytes: 1 << 30, ChunkWait: 20 * time.Millisecond, BlockSize: 4096}, Hooks{})
	out := make(chan *Chunk)
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background(), strings.NewReader(strings.Repeat(p+"\n", n)), out) }()
	var got []int
	for ended := false; !ended; {
		select {
		case c := <-out:
			got = append(got, c.Len())
			time.Sleep(150 * time.Millisecond) // the consumer is busy: the splitter waits on out
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			ended = true
		}
	}
	if want := []int{per, per, per, per}; !slices.Equal(got, want) {
		t.Errorf("chunks of %v, want %v", got, want)
	}
}

// TestCancelReportsUnsent: when ctx ends, the chunk being built is handed to Unsent.
func TestCancelReportsUnsent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, nil, 0o644)
	pr, pw := io.Pipe()
	defer pw.Close()
	var unsent int
	got := make(chan struct{})
	s := New(Config{Sep: '\n', Cwd: "/", ChunkFiles: 1000, ChunkBytes: 1 << 30}, Hooks{
		Accepted: func(int64) { got <- struct{}{} },
		Unsent:   func(in [][]byte) { unsent += len(in) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, pr, make(chan *Chunk)) }()
	fmt.Fprintf(pw, "%s\n", p)
	<-got
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if unsent != 1 {
		t.Errorf("unsent %d, want 1", unsent)
	}
}

type errReader struct{ n int }

func (r *errReader) Read(b []byte) (int, error) {
	if r.n == 0 {
		r.n++
		return copy(b, "/x\n"), nil
	}
	return 0, fmt.Errorf("disk on fire")
}

func TestReadError(t *testing.T) {
	s := New(Config{Sep: '\n', Cwd: "/", ChunkFiles: 10}, Hooks{})
	err := s.Run(context.Background(), &errReader{}, make(chan *Chunk, 10))
	if err == nil || !strings.Contains(err.Error(), "read input: disk on fire") {
		t.Fatalf("Run = %v", err)
	}
}

// FuzzRecords: whatever the input and block size, the records read are exactly the
// input split at the separator, with empty records dropped.
func FuzzRecords(f *testing.F) {
	f.Add([]byte("a\x00b\x00"), byte(0), 3)
	f.Add([]byte("a\nb\n\nc"), byte('\n'), 1)
	f.Add([]byte("\xff\xfe\x00\n\x00"), byte(0), 7)
	f.Fuzz(func(t *testing.T, in []byte, sep byte, block int) {
		if sep != 0 {
			sep = '\n'
		}
		block = block%64 + 1
		var got [][]byte
		var empty int
		s := New(Config{Sep: sep, Root: "/", Cwd: "/", ChunkFiles: 1 << 20, BlockSize: block}, Hooks{
			Settled: func(in []byte, _ rsync.Status, _ string) { got = append(got, bytes.Clone(in)) },
			Empty:   func() { empty++ },
		})
		out := make(chan *Chunk, 1<<10)
		if err := s.Run(context.Background(), bytes.NewReader(in), out); err != nil {
			t.Fatal(err)
		}
		close(out)
		for c := range out {
			got = append(got, c.Inputs...)
		}
		var want [][]byte
		wantEmpty := 0
		parts := bytes.Split(in, []byte{sep})
		if len(parts) > 0 && len(parts[len(parts)-1]) == 0 {
			parts = parts[:len(parts)-1]
		}
		for _, p := range parts {
			if len(p) == 0 {
				wantEmpty++
			} else {
				want = append(want, p)
			}
		}
		if empty != wantEmpty {
			t.Fatalf("%d empty records, want %d", empty, wantEmpty)
		}
		// chunks come out in order, but settled paths are reported at once: compare as multisets
		count := map[string]int{}
		for _, w := range want {
			count[string(w)]++
		}
		for _, g := range got {
			count[string(g)]--
		}
		for k, v := range count {
			if v != 0 {
				t.Fatalf("record %q: count off by %d", k, v)
			}
		}
	})
}

// BenchmarkSplit measures records per second through the splitter, lstat included
// (paths that do not exist, the cheapest lstat).
func BenchmarkSplit(b *testing.B) {
	var in bytes.Buffer
	for i := 0; i < 100000; i++ {
		fmt.Fprintf(&in, "/nonexistent/dir/file-%07d.db\x00", i)
	}
	benchSplit(b, in.Bytes(), 100000)
}

// BenchmarkSplitExisting is the same with files that exist, so they land in chunks.
func BenchmarkSplitExisting(b *testing.B) {
	dir := b.TempDir()
	var in bytes.Buffer
	for i := 0; i < 2000; i++ {
		p := filepath.Join(dir, fmt.Sprintf("f%04d", i))
		os.WriteFile(p, []byte("x"), 0o644)
		for j := 0; j < 50; j++ {
			fmt.Fprintf(&in, "%s\x00", p)
		}
	}
	benchSplit(b, in.Bytes(), 100000)
}

// benchSplit runs the splitter over data (n NUL-terminated paths) b.N times.
func benchSplit(b *testing.B, data []byte, n int) {
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := New(Config{Sep: 0, Cwd: "/", ChunkFiles: 2000, ChunkBytes: 1 << 30}, Hooks{})
		out := make(chan *Chunk, 100)
		go func() {
			for range out {
			}
		}()
		if err := s.Run(context.Background(), bytes.NewReader(data), out); err != nil {
			b.Fatal(err)
		}
		close(out)
	}
	b.ReportMetric(float64(b.N)*float64(n)/b.Elapsed().Seconds(), "paths/s")
}

func TestCleanRel(t *testing.T) {
	for _, p := range []string{"a", "./a", "././a/b", "a/b", "a//b", "a/./b", "a/../b", "../a", ".", "./", "..", ".hidden",
		"a/.b", "a/..b", "a/b/", "./.", "...", "a/...", ".//a", "a/.", "a/..", "x/y/z"} {
		if got, want := cleanRel(p), filepath.Clean(p); got != want {
			t.Errorf("cleanRel(%q) = %q, want %q", p, got, want)
		}
	}
	for _, tt := range [][3]string{{"/", "a/b", "/a/b"}, {"/x", "a", "/x/a"}, {"/x", ".", "/x"}} {
		if got := joinClean(tt[0], tt[1]); got != tt[2] || got != filepath.Join(tt[0], tt[1]) {
			t.Errorf("joinClean(%q, %q) = %q", tt[0], tt[1], got)
		}
	}
}

func TestSplitSized(t *testing.T) {
	tests := []struct {
		rec  string
		size int64
		path string
		ok   bool
	}{
		{"12\ta/b", 12, "a/b", true}, {"0\tx", 0, "x", true}, {"5\ta\tb", 5, "a\tb", true},
		{"no tab", 0, "", false}, {"\tx", 0, "", false}, {"-1\tx", 0, "", false}, {"1e3\tx", 0, "", false},
		{"12\t", 12, ".", true}, {"99999999999999999999\tx", 0, "", false}, {" 12\tx", 0, "", false},
	}
	for _, tt := range tests {
		size, p, err := SplitSized([]byte(tt.rec))
		if (err == nil) != tt.ok || (tt.ok && (size != tt.size || string(p) != tt.path)) {
			t.Errorf("SplitSized(%q) = %d, %q, %v", tt.rec, size, p, err)
		}
	}
}

// TestSizesNoStat: with Sizes, paths that do not exist are chunked by their given sizes,
// not settled by an lstat (there is none); with a remote source too.
func TestSizesNoStat(t *testing.T) {
	for _, cfg := range []Config{
		{Sep: 0, Cwd: "/", Root: "/nonexistent", Sizes: true, ChunkFiles: 10, ChunkBytes: 100},
		{Sep: 0, Cwd: "/", Root: "/data", RemoteSrc: "nas:/data", ChunkFiles: 10, ChunkBytes: 100},
	} {
		in := "60\ta\x0060\tb\x00/nonexistent/c\x00"
		if cfg.RemoteSrc != "" {
			in = "a\x00b\x00/data/c\x00/elsewhere\x00"
		}
		cs, settled := collect(t, cfg, in)
		total := 0
		for _, c := range cs {
			total += c.Len()
			if c.Src != "/nonexistent" && c.Src != "nas:/data" {
				t.Errorf("chunk Src %q", c.Src)
			}
		}
		want := 2
		if cfg.RemoteSrc != "" {
			want = 3
		}
		if cfg.Sizes {
			if len(cs) != 2 || cs[0].Bytes != 60 {
				t.Errorf("sizes: chunks %s, want 2 closing at the given 60+60 > 100", sizes(cs))
			}
			if fmt.Sprint(settled) != "[failed:/nonexistent/c]" {
				t.Errorf("sizes: settled %v (a record without a size fails)", settled)
			}
		} else if total != want || fmt.Sprint(settled) != "[failed:/elsewhere]" {
			t.Errorf("remote: %d paths chunked, settled %v", total, settled)
		}
	}
}

func TestConfigStats(t *testing.T) {
	q := &QuickCheck{Dest: "/dst"}
	for _, tt := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"a local list", Config{}, true},
		{"the quick check", Config{Quick: q}, true},
		{"--sizes", Config{Sizes: true}, false},
		{"--sizes with -H: links go by inode", Config{Sizes: true, HardLinks: true}, true},
		{"--sizes with the quick check", Config{Sizes: true, Quick: q}, true},
		{"a remote source", Config{RemoteSrc: "rsync://h/m/"}, false},
		{"a remote source with -H", Config{RemoteSrc: "h:/src", HardLinks: true, Quick: q}, false},
	} {
		if got := tt.cfg.Stats(); got != tt.want {
			t.Errorf("%s: Stats() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestInsideDest: a path at or below a local DEST fails only where DEST lies below the
// directory the path is taken from; a DEST above it (restoring an archive into its parent)
// or equal to it is no loop.
func TestInsideDest(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		abs      string
		absolute bool
		want     bool
	}{
		{"DEST below the working directory: its own file", Config{Cwd: "/data", Dest: []string{"/data/backup"}}, "/data/backup/d/f", false, true},
		{"DEST itself", Config{Cwd: "/data", Dest: []string{"/data/backup"}}, "/data/backup", false, true},
		{"a sibling that shares DEST's prefix", Config{Cwd: "/data", Dest: []string{"/data/backup"}}, "/data/backup2/f", false, false},
		{"another path of the tree", Config{Cwd: "/data", Dest: []string{"/data/backup"}}, "/data/d/f", false, false},
		{"DEST below --root", Config{Root: "/data", Cwd: "/", Dest: []string{"/data/backup"}}, "/data/backup/f", false, true},
		{"DEST above the root: a restore into the parent", Config{Root: "/data/archive", Dest: []string{"/data"}}, "/data/archive/f", false, false},
		{"DEST is the working directory", Config{Cwd: "/data", Dest: []string{"/data"}}, "/data/f", false, false},
		{"an absolute path without --root: from /", Config{Cwd: "/elsewhere", Dest: []string{"/data/backup"}}, "/data/backup/f", true, true},
		{"the second form of DEST (its symlinks resolved)", Config{Cwd: "/data", Dest: []string{"/data/link", "/data/real"}}, "/data/real/f", false, true},
		{"no local DEST", Config{Cwd: "/data"}, "/data/backup/f", false, false},
		{"a remote source: no local path", Config{Cwd: "/data", Dest: []string{"/data/backup"}}, "", false, false},
	}
	for _, tt := range tests {
		s := New(tt.cfg, Hooks{})
		if got := s.insideDest(tt.abs, tt.absolute); got != tt.want {
			t.Errorf("%s: insideDest(%q) = %v, want %v", tt.name, tt.abs, got, tt.want)
		}
	}
}
