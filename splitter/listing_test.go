package splitter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeLister is a Lister whose listings are recorded, and last as long as wait says.
type fakeLister struct {
	*Lister
	mu     sync.Mutex
	listed []string // the directories listed, in the order their listings ended
	wait   chan struct{}
	n      int // what a listing returns: the entries it read
}

func newFakeLister(dest string, n int) *fakeLister {
	f := &fakeLister{Lister: NewLister(dest), n: n}
	f.list = func(dir string) int {
		if f.wait != nil {
			<-f.wait
		}
		f.mu.Lock()
		f.listed = append(f.listed, dir)
		f.mu.Unlock()
		return f.n
	}
	return f
}

func (f *fakeLister) done() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.listed...)
}

// settled waits until the listings queued have ended.
func (f *fakeLister) settled(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.Lister.mu.Lock()
		busy := false
		for _, e := range f.recent {
			busy = busy || (e != nil && e.pass != nil)
		}
		f.Lister.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("listings still pending after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestListerWarm: a directory is listed at its third path, once, and again after the
// listings' freshness has gone by; DEST itself is the directory of a path with no slash;
// paths that leave DEST, and DEST itself, list nothing.
func TestListerWarm(t *testing.T) {
	dest := t.TempDir()
	f := newFakeLister(dest, 1)
	defer f.Close()
	f.fresh = 50 * time.Millisecond
	a := filepath.Join(dest, "a")
	tests := []struct {
		path string
		want int // listings of a queued so far
	}{
		{"a/1", 0},
		{"a/2", 0},
		{"a/3", 1},
		{"a/sub", 1}, // a directory path: it lands in a as well
		{"a/4", 1},
	}
	for _, tt := range tests {
		f.Warm(tt.path)
		f.settled(t)
		if got := f.listings(a); got != tt.want {
			t.Errorf("after %s: %d listings of a, want %d", tt.path, got, tt.want)
		}
	}
	time.Sleep(60 * time.Millisecond)
	f.Warm("a/5")
	f.settled(t)
	if got := f.listings(a); got != 2 {
		t.Errorf("after the freshness went by: %d listings of a, want 2", got)
	}
	for _, p := range []string{"top1", "top2", "top3"} {
		f.Warm(p)
	}
	f.settled(t)
	if got := f.listings(dest); got != 1 {
		t.Errorf("DEST listed %d times for three paths right in it, want 1", got)
	}
	for _, p := range []string{".", "", "..", "../x/y", "../x/z", "../x/w", "/etc/passwd", "/etc/group", "/etc/hosts"} {
		f.Warm(p)
	}
	f.settled(t)
	if got := f.listings(filepath.Dir(dest)); got != -1 {
		t.Errorf("a path out of DEST led to a listing of its parent (%d)", got)
	}
	if got, want := strings.Join(f.done(), " "), a+" "+a+" "+dest; got != want {
		t.Errorf("listed %q, want %q", got, want)
	}
}

// warm3 sends three paths of directory dir through f.Warm: the third queues its listing.
func warm3(f *fakeLister, dir string) {
	for i := range 3 {
		f.Warm(fmt.Sprintf("%s/%d", dir, i))
	}
}

// TestListerSettle: a chunk waits for the first listing, and, once one has found an entry,
// for every listing queued, settleMax at most; the listings that made a chunk wait that
// long make no other chunk wait, but a listing queued after them does; in a fresh copy
// (the directories are missing) a chunk waits for the first listing only; and Close
// neither waits for a stuck listing nor lets one start after it.
func TestListerSettle(t *testing.T) {
	dest := t.TempDir()
	elapsed := func(f func()) time.Duration { t0 := time.Now(); f(); return time.Since(t0) }
	settle := func(f *fakeLister) time.Duration {
		return elapsed(func() { f.Settle(context.Background()) })
	}
	t.Run("none", func(t *testing.T) {
		f := newFakeLister(dest, 3)
		defer f.Close()
		f.wait = make(chan struct{})
		defer close(f.wait)
		f.Warm("a/0") // no listing queued yet
		if d := settle(f); d > settleMax/2 {
			t.Errorf("Settle waited %v with no listing queued", d)
		}
	})
	t.Run("first listing", func(t *testing.T) {
		// no listing has ended yet: the chunk waits to learn whether DEST has a copy
		f := newFakeLister(dest, 3)
		defer f.Close()
		f.wait = make(chan struct{})
		warm3(f, "a")
		go func() { time.Sleep(100 * time.Millisecond); close(f.wait) }()
		if d := settle(f); d < 90*time.Millisecond {
			t.Errorf("Settle returned after %v, before the first listing ended", d)
		}
	})
	t.Run("all queued", func(t *testing.T) {
		f := newFakeLister(dest, 3)
		defer f.Close()
		warm3(f, "a")
		f.settled(t) // a found an entry
		f.wait = make(chan struct{})
		warm3(f, "b")
		warm3(f, "c")
		go func() { time.Sleep(100 * time.Millisecond); close(f.wait) }()
		if d := settle(f); d < 90*time.Millisecond {
			t.Errorf("Settle returned after %v, before the listings of b and c ended", d)
		}
		if got := len(f.done()); got != 3 {
			t.Errorf("%d listings ended when Settle returned, want 3", got)
		}
	})
	t.Run("limit", func(t *testing.T) {
		f := newFakeLister(dest, 3)
		warm3(f, "a")
		f.settled(t)
		stuck := make(chan struct{})
		defer close(stuck)
		defer f.Close() // before the listing ends: it must not wait for it
		late := make(chan struct{})
		f.list = func(dir string) int {
			switch filepath.Base(dir) {
			case "b":
				<-stuck
			case "c":
				<-late
			}
			return 3
		}
		warm3(f, "b")
		if d := settle(f); d < settleMax-10*time.Millisecond || d > settleMax+5*time.Second {
			t.Errorf("Settle waited %v for a stuck listing, want about %v", d, settleMax)
		}
		if d := settle(f); d > settleMax/2 {
			t.Errorf("the next chunk waited %v for the listing that made one wait %v", d, settleMax)
		}
		warm3(f, "c") // queued after: a chunk waits for it
		go func() { time.Sleep(100 * time.Millisecond); close(late) }()
		if d := settle(f); d < 90*time.Millisecond || d > settleMax-10*time.Millisecond {
			t.Errorf("Settle waited %v for a listing queued after the stuck one, want about 100 ms", d)
		}
	})
	t.Run("fresh copy", func(t *testing.T) {
		// the first listing reads nothing (its directory is missing); the next one is stuck
		f := newFakeLister(dest, 0)
		stuck := make(chan struct{})
		defer close(stuck)
		defer f.Close()
		f.list = func(dir string) int {
			if filepath.Base(dir) != "missing1" {
				<-stuck
			}
			return 0
		}
		warm3(f, "missing1")
		f.settled(t)
		warm3(f, "missing2")
		if d := settle(f); d > settleMax/2 {
			t.Errorf("Settle waited %v in a fresh copy", d)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		f := newFakeLister(dest, 3)
		f.wait = make(chan struct{})
		defer close(f.wait)
		defer f.Close()
		warm3(f, "a")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if d := elapsed(func() { f.Settle(ctx) }); d > settleMax/2 {
			t.Errorf("Settle waited %v with its context ended", d)
		}
	})
	t.Run("closed", func(t *testing.T) {
		f := newFakeLister(dest, 1)
		f.Close()
		warm3(f, "a")
		if got := f.listings(filepath.Join(dest, "a")); got != 0 {
			t.Errorf("%d listings queued after Close", got)
		}
		f.Close() // twice: no panic
	})
}

// TestDirRefList: a listing reads a directory's entries through no symlink below DEST,
// and reads nothing from a missing directory or through a symlink.
func TestDirRefList(t *testing.T) {
	w := t.TempDir()
	dest := filepath.Join(w, "dest")
	for i := range 5 {
		writeTestFile(t, filepath.Join(dest, "d", fmt.Sprint(i)))
	}
	writeTestFile(t, filepath.Join(w, "elsewhere", "x"))
	if err := os.Symlink(filepath.Join(w, "elsewhere"), filepath.Join(dest, "link")); err != nil {
		t.Fatal(err)
	}
	r := newBeneathRef(dest)
	defer r.close()
	tests := []struct {
		dir  string
		want int
	}{
		{dest, 2}, // d and link
		{filepath.Join(dest, "d"), 5},
		{filepath.Join(dest, "missing"), 0},
		{filepath.Join(dest, "link"), 0},
		{w, 0}, // above DEST
	}
	for _, tt := range tests {
		if got := r.list(tt.dir); got != tt.want {
			t.Errorf("list(%s) = %d, want %d", tt.dir, got, tt.want)
		}
	}
}

// TestSplitterLists: with a Lister, the stat workers list the DEST directories the paths
// lead into, and a chunk is sent only once the listings queued before it ended; the
// chunks are the same as without one.
func TestSplitterLists(t *testing.T) {
	src, dest := t.TempDir(), t.TempDir()
	var input strings.Builder
	for d := range 6 {
		for i := range 4 {
			p := fmt.Sprintf("d%d/f%d", d, i)
			writeTestFile(t, filepath.Join(src, p))
			input.WriteString(p + "\n")
		}
	}
	cfg := Config{Sep: '\n', Root: src, ChunkFiles: 1000}
	plain, _ := collect(t, cfg, input.String())

	f := newFakeLister(dest, 1)
	f.found = true // as after a first listing that found entries
	close(f.first)
	f.wait = make(chan struct{})
	go func() { time.Sleep(50 * time.Millisecond); close(f.wait) }()
	cfg.List = f.Lister
	s := New(cfg, Hooks{})
	out := make(chan *Chunk, 100)
	var listedAtChunk []int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range out {
			listedAtChunk = append(listedAtChunk, len(f.done()))
		}
	}()
	if err := s.Run(context.Background(), strings.NewReader(input.String()), out); err != nil {
		t.Fatal(err)
	}
	close(out)
	<-done
	if len(listedAtChunk) != len(plain) {
		t.Fatalf("%d chunks with a Lister, %d without", len(listedAtChunk), len(plain))
	}
	if got := len(f.done()); got != 6 {
		t.Errorf("%d directories listed, want 6: %q", got, f.done())
	}
	if listedAtChunk[0] != 6 {
		t.Errorf("the chunk was sent after %d of the 6 listings ended", listedAtChunk[0])
	}
}

func writeTestFile(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}
