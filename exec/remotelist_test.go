package exec

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prsync/prsync/splitter"
)

// fakeUploads is an rsync that copies an upload's staged lists (the argument before the
// last) into far, appends its arguments to far/../calls, and, while far/../fail holds a
// line, prints it and exits 5; while far/../hold exists it waits, its arguments written
// (30 s at most: a test killed meanwhile leaves no process behind for long).
func fakeUploads(t *testing.T) (rsync, far string) {
	t.Helper()
	w := t.TempDir()
	far = filepath.Join(w, "far")
	os.Mkdir(far, 0o755)
	rsync = filepath.Join(w, "rsync")
	script := fmt.Sprintf(`#!/bin/sh
echo "$*" >>%[1]q/calls
i=0; while [ -e %[1]q/hold ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done
if [ -s %[1]q/fail ]; then cat %[1]q/fail >&2; exit 5; fi
for a in "$@"; do prev=$src; src=$a; done
cp "$prev"* %[2]q/ 2>/dev/null
exit 0
`, w, far)
	if err := os.WriteFile(rsync, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return rsync, far
}

func listChunk(id, paths int) *splitter.Chunk {
	c := &splitter.Chunk{ID: id}
	for i := range paths {
		e := []byte(fmt.Sprintf("dir/file-%03d-%03d", id, i))
		c.Inputs, c.Entries = append(c.Inputs, e), append(c.Entries, e)
	}
	return c
}

func uploads(t *testing.T, far string) int {
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(far), "calls"))
	return strings.Count(string(b), "--ignore-existing")
}

func TestRemoteListsFor(t *testing.T) {
	ctx := context.Background()
	const dest = "rsync://h/mod/sub/"
	newLists := func(t *testing.T, min int64) (*RemoteLists, string) {
		rsync, far := fakeUploads(t)
		l := &RemoteLists{Rsync: rsync, Dest: dest, MinBytes: min}
		t.Cleanup(func() { l.Close(ctx) })
		return l, far
	}

	t.Run("below MinBytes: stdin, no upload", func(t *testing.T) {
		l, far := newLists(t, 1<<20)
		c := listChunk(1, 10)
		if arg := l.For(ctx, c, c.Entries); arg != "" || uploads(t, far) != 0 {
			t.Errorf("For = %q after %d uploads, want stdin and none", arg, uploads(t, far))
		}
		if arg := l.For(ctx, c, c.Entries); arg != "" {
			t.Errorf("a chunk that read its list on stdin reads it remotely on its retry: %q", arg)
		}
	})

	t.Run("one upload carries every list offered", func(t *testing.T) {
		l, far := newLists(t, 1)
		cs := []*splitter.Chunk{listChunk(1, 20), listChunk(2, 20), listChunk(3, 20)}
		for _, c := range cs {
			l.Offer(c)
		}
		for _, c := range cs {
			arg := l.For(ctx, c, c.Entries)
			name := l.RunID() + "." + fmt.Sprint(c.ID)
			if arg != "--files-from=:sub/.prsync-lists/"+name {
				t.Fatalf("chunk %d: For = %q", c.ID, arg)
			}
			got, err := os.ReadFile(filepath.Join(far, name))
			want := strings.Join(func() []string {
				var s []string
				for _, e := range c.Entries {
					s = append(s, string(e)+"\x00")
				}
				return s
			}(), "")
			if err != nil || string(got) != want {
				t.Errorf("chunk %d's list on the far side: %q (%v), want %q", c.ID, got, err, want)
			}
		}
		if n := uploads(t, far); n != 1 {
			t.Errorf("%d uploads, want 1", n)
		}
		if s := l.Stats(); s.Remote != 3 || s.Uploads != 1 || s.UploadBytes != 3*20*int64(len("dir/file-001-000")+1) {
			t.Errorf("stats %+v", s)
		}
		// an isolating re-run keeps the chunk's ID with other entries: stdin
		sub := &splitter.Chunk{ID: 1, Inputs: cs[0].Inputs[:5], Entries: cs[0].Entries[:5]}
		if arg := l.For(ctx, sub, sub.Entries); arg != "" {
			t.Errorf("a re-run over 5 of the chunk's paths: For = %q, want stdin", arg)
		}
	})

	t.Run("a refused upload: stdin, and the list stays for a retry", func(t *testing.T) {
		l, far := newLists(t, 1)
		fail := filepath.Join(filepath.Dir(far), "fail")
		os.WriteFile(fail, []byte("@ERROR: max connections (3) reached -- try again later\n"), 0o644)
		c := listChunk(1, 20)
		if arg := l.For(ctx, c, c.Entries); arg != "" {
			t.Fatalf("refused: For = %q, want stdin", arg)
		}
		os.Remove(fail)
		if arg := l.For(ctx, c, c.Entries); arg == "" {
			t.Errorf("the retry after a refusal: stdin, want the list uploaded")
		}
		if s := l.Stats(); s.Off != "" || s.Uploads != 2 || s.UploadFailed != 1 {
			t.Errorf("stats %+v", s)
		}
	})

	// With ReadRate, a list must also be worth what an upload takes: once one has gone
	// (and its time is known), a chunk whose list reads faster on stdin than an upload takes
	// reads it there.
	for _, tt := range []struct {
		rate    float64
		uploads int
	}{{0, 2}, {1e12, 1}} {
		t.Run(fmt.Sprintf("ReadRate %g: %d upload(s)", tt.rate, tt.uploads), func(t *testing.T) {
			l, far := newLists(t, 1)
			l.ReadRate = tt.rate
			c1, c2 := listChunk(1, 20), listChunk(2, 20)
			if l.For(ctx, c1, c1.Entries) == "" {
				t.Fatal("the first list: stdin, want it uploaded (nothing measured yet)")
			}
			arg := l.For(ctx, c2, c2.Entries)
			if n := uploads(t, far); n != tt.uploads || (arg != "") != (tt.uploads == 2) {
				t.Errorf("the second list: For = %q after %d uploads, want %d", arg, n, tt.uploads)
			}
		})
	}

	// A chunk whose list the upload under way does not carry does not wait for it when the
	// next would not pay: it reads its list on stdin at once, and its staged copy goes
	// once the upload has ended. One whose list would pay waits, and uploads it next.
	for _, tt := range []struct {
		paths   int
		wait    bool
		uploads int
	}{{5, false, 1}, {200, true, 2}} {
		t.Run(fmt.Sprintf("an upload under way, a list of %d paths", tt.paths), func(t *testing.T) {
			l, far := newLists(t, 1<<10)
			hold := filepath.Join(filepath.Dir(far), "hold")
			os.WriteFile(hold, nil, 0o644)
			t.Cleanup(func() { os.Remove(hold) }) // before Close, which waits for the upload
			c1, c2 := listChunk(1, 200), listChunk(2, tt.paths)
			first := make(chan string, 1)
			go func() { first <- l.For(ctx, c1, c1.Entries) }()
			for deadline := time.Now().Add(10 * time.Second); uploads(t, far) == 0; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the first upload did not start")
				}
			}
			l.Offer(c2)
			second := make(chan string, 1)
			go func() { second <- l.For(ctx, c2, c2.Entries) }()
			// one that must not wait gets 5 s, for a busy machine; one that must, 0.3 s to
			// show that it does
			patience := 5 * time.Second
			if tt.wait {
				patience = 300 * time.Millisecond
			}
			var arg string
			select {
			case arg = <-second:
				if tt.wait {
					t.Fatalf("For = %q with the upload under way, want it to wait", arg)
				}
			case <-time.After(patience):
				if !tt.wait {
					t.Fatal("For waited for an upload that does not carry its list")
				}
			}
			os.Remove(hold)
			if <-first == "" {
				t.Error("the first chunk's list: stdin, want it uploaded")
			}
			if tt.wait {
				arg = <-second
			}
			if (arg != "") != tt.wait || uploads(t, far) != tt.uploads {
				t.Errorf("For = %q after %d uploads, want remote %v after %d", arg, uploads(t, far), tt.wait, tt.uploads)
			}
			name := l.RunID() + ".2"
			if _, err := os.Stat(filepath.Join(l.staging, name)); !tt.wait && err == nil {
				t.Error("the list read on stdin is still staged after the upload")
			}
		})
	}

	t.Run("a read-only module turns them off", func(t *testing.T) {
		l, far := newLists(t, 1)
		var told []string
		l.OnOff = func(why string) { told = append(told, why) }
		os.WriteFile(filepath.Join(filepath.Dir(far), "fail"), []byte("ERROR: module is read only\n"), 0o644)
		c1, c2 := listChunk(1, 20), listChunk(2, 20)
		l.For(ctx, c1, c1.Entries)
		if arg := l.For(ctx, c2, c2.Entries); arg != "" || uploads(t, far) != 1 {
			t.Errorf("after a read-only module: For = %q after %d uploads, want stdin after 1", arg, uploads(t, far))
		}
		if s := l.Stats(); !strings.Contains(s.Off, "module is read only") || len(told) != 1 {
			t.Errorf("stats %+v, told %q", s, told)
		}
	})

	t.Run("a list unread turns them off", func(t *testing.T) {
		l, _ := newLists(t, 1)
		c1, c2 := listChunk(1, 20), listChunk(2, 20)
		l.Offer(c2)
		if l.For(ctx, c1, c1.Entries) == "" {
			t.Fatal("no remote list")
		}
		l.Unread(c1, "unexpected tag -7")
		if arg := l.For(ctx, c2, c2.Entries); arg != "" {
			t.Errorf("after an unread list: For = %q, want stdin", arg)
		}
		if arg := l.For(ctx, c1, c1.Entries); arg != "" {
			t.Errorf("the unread chunk's retry: For = %q, want stdin", arg)
		}
	})

	t.Run("a root chunk and a nil RemoteLists read on stdin", func(t *testing.T) {
		l, _ := newLists(t, 1)
		root := &splitter.Chunk{ID: 9, Root: true, Inputs: [][]byte{[]byte(".")}, Entries: [][]byte{[]byte(".")}}
		if arg := l.For(ctx, root, root.Entries); arg != "" {
			t.Errorf("root: %q", arg)
		}
		var none *RemoteLists
		c := listChunk(1, 3)
		if arg := none.For(ctx, c, c.Entries); arg != "" {
			t.Errorf("nil: %q", arg)
		}
		none.Offer(c)
		none.Done(c)
		if none.Close(ctx) != nil {
			t.Error("nil Close")
		}
	})
}

func TestRemoteListsDoneAndClose(t *testing.T) {
	ctx := context.Background()
	rsync, far := fakeUploads(t)
	l := &RemoteLists{Rsync: rsync, Dest: "h:/srv/x", MinBytes: 1}
	c1, c2 := listChunk(1, 5), listChunk(2, 5)
	l.Offer(c1)
	l.Offer(c2)
	if arg := l.For(ctx, c1, c1.Entries); arg != "--files-from=:/srv/x/.prsync-lists/"+l.RunID()+".1" {
		t.Fatalf("For = %q", arg)
	}
	l.Done(c1)
	top := l.top
	if _, err := os.Stat(filepath.Join(l.staging, l.RunID()+".1")); !os.IsNotExist(err) {
		t.Errorf("a settled chunk's list still staged (%v)", err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(top); !os.IsNotExist(err) {
		t.Errorf("the staging directory is left (%v)", err)
	}
	if r := l.Stats().Removal; r != "end" {
		t.Errorf("Removal %q, want end", r)
	}
	calls, _ := os.ReadFile(filepath.Join(filepath.Dir(far), "calls"))
	last := strings.Split(strings.TrimSpace(string(calls)), "\n")
	want := fmt.Sprintf("-d -v --delete --filter=+ /.prsync-lists/ --filter=+ /.prsync-lists/%s.* --filter=P * -- ", l.RunID())
	if cl := last[len(last)-1]; !strings.HasPrefix(cl, want) || !strings.HasSuffix(cl, "/ h:/srv/x/") {
		t.Errorf("the cleaning session: %q, want %q…/ h:/srv/x/", cl, want)
	}
}

func TestStaleList(t *testing.T) {
	l := &RemoteLists{StaleAge: time.Hour}
	l.mu.Lock()
	l.initLocked()
	l.mu.Unlock()
	defer os.RemoveAll(l.top)
	now := time.Now()
	me := l.runID
	gone := 1 << 22 // above pid_max's default: no such process
	tests := []struct {
		name  string
		mtime time.Time
		stale bool
	}{
		{me + ".3", now, false},                                               // this run's
		{fmt.Sprintf("%s-%d-1.3", l.host, l.pid), now, true},                  // this PID, another start: a run before
		{fmt.Sprintf("%s-%d-1700000000.3", l.host, gone), now, true},          // this host, its prsync gone
		{fmt.Sprintf("%s-%d-1700000000.3", l.host, os.Getppid()), now, false}, // this host, alive
		{"other-host-1-1700000000.12", now.Add(-2 * time.Hour), true},         // another host's, old
		{"other-host-1-1700000000.12", now.Add(-time.Minute), false},          // another host's, new
		{"notes.txt", now.Add(-48 * time.Hour), false},                        // not prsync's
		{"h-x-1.2", now.Add(-48 * time.Hour), false},
	}
	for _, tt := range tests {
		if got := l.stale1(tt.name, tt.mtime, now); got != tt.stale {
			t.Errorf("stale1(%q) = %v, want %v", tt.name, got, tt.stale)
		}
	}
	if h := hostWord("db-01.example.com"); h != "db-01-example-com" {
		t.Errorf("hostWord = %q", h)
	}
	if h := hostWord(strings.Repeat("x", 100)); len(h) != 40 {
		t.Errorf("hostWord of 100 characters: %d", len(h))
	}
}

func TestSweepStaging(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	gone, alive := fmt.Sprintf("%s%d-abc", stagingPrefix, 1<<22), fmt.Sprintf("%s%d-def", stagingPrefix, os.Getppid())
	for _, d := range []string{gone, alive, "prsync-lists-notapid", "other"} {
		if err := os.MkdirAll(filepath.Join(tmp, d, "up"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sweepStaging()
	ents, _ := os.ReadDir(tmp)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if strings.Join(left, " ") != strings.Join([]string{"other", alive, "prsync-lists-notapid"}, " ") {
		t.Errorf("left %q: want all but the dead prsync's %s", left, gone)
	}
}

// TestSessionAdmitted: the lists' removal asks again while the far side refuses it as full
// (a daemon frees the slots of the copy's last sessions a moment after they end), up to 8
// times; a session that fails otherwise is not asked again.
func TestSessionAdmitted(t *testing.T) {
	tests := []struct {
		name    string
		refuse  int    // the sessions refused first
		fail    string // otherwise, the failure of every session
		wantN   int
		wantErr bool
	}{
		{"refused twice", 2, "", 3, false},
		{"refused always", 100, "", 8, true},
		{"read only", 0, "ERROR: module is read only", 1, true},
		{"admitted", 0, "", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			count := filepath.Join(dir, "count")
			script := filepath.Join(dir, "rsync")
			body := fmt.Sprintf(`#!/bin/sh
n=$(cat %[1]q 2>/dev/null || echo 0); n=$((n+1)); echo $n >%[1]q
if [ -n %[3]q ]; then echo %[3]q; exit 1; fi
if [ $n -le %[2]d ]; then echo "@ERROR: max connections (2) reached -- try again later"; exit 5; fi
exit 0
`, count, tt.refuse, tt.fail)
			if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
			l := &RemoteLists{Rsync: script}
			_, err := l.sessionAdmitted(context.Background(), nil)
			b, _ := os.ReadFile(count)
			if n := strings.TrimSpace(string(b)); n != fmt.Sprint(tt.wantN) || (err != nil) != tt.wantErr {
				t.Errorf("%s sessions, error %v; want %d sessions, error %v", n, err, tt.wantN, tt.wantErr)
			}
		})
	}
}

// cleanings counts the sessions that deleted lists on the far side.
func cleanings(far string) int {
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(far), "calls"))
	return strings.Count(string(b), "-d -v --delete")
}

// oneCleaning fails the test unless one session deleted the lists, and the stats say
// removal of when they left ("" for not at all).
func oneCleaning(t *testing.T, l *RemoteLists, far, removal string) {
	t.Helper()
	if n := cleanings(far); n != 1 {
		t.Errorf("%d cleaning sessions, want 1", n)
	}
	if r := l.Stats().Removal; r != removal {
		t.Errorf("Removal %q, want %q", r, removal)
	}
}

// TestRemoteListsClear: Clear, which the pool calls before the root's chunk, deletes the
// lists once: Close after it runs no session of its own and reports Clear's failure; For
// hands no list after it; a Clear cut short by its context is done again by Close.
func TestRemoteListsClear(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*RemoteLists, string) {
		rsync, far := fakeUploads(t)
		l := &RemoteLists{Rsync: rsync, Dest: "h:/srv/x", MinBytes: 1}
		c := listChunk(1, 5)
		l.Offer(c)
		if arg := l.For(ctx, c, c.Entries); arg == "" {
			t.Fatal("no upload")
		}
		l.Done(c)
		return l, far
	}

	t.Run("once", func(t *testing.T) {
		l, far := setup(t)
		if err := l.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		c := listChunk(2, 5)
		l.Offer(c)
		if arg := l.For(ctx, c, c.Entries); arg != "" || uploads(t, far) != 1 {
			t.Errorf("after Clear, For = %q with %d uploads; want stdin, and the one upload before", arg, uploads(t, far))
		}
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
		oneCleaning(t, l, far, "before_root")
	})

	t.Run("its failure is Close's", func(t *testing.T) {
		l, far := setup(t)
		os.WriteFile(filepath.Join(filepath.Dir(far), "fail"), []byte("rsync: [generator] delete_file: rmdir(.prsync-lists) failed: Permission denied (13)\n"), 0o644)
		if err := l.Clear(ctx); err == nil {
			t.Fatal("Clear: no error from a failed session")
		}
		if err := l.Close(ctx); err == nil || !strings.Contains(err.Error(), "Permission denied") {
			t.Errorf("Close = %v, want Clear's failure", err)
		}
		oneCleaning(t, l, far, "") // Close does not ask again; nothing was removed
	})

	t.Run("cut short", func(t *testing.T) {
		l, far := setup(t)
		cut, cancel := context.WithCancel(ctx)
		cancel()
		l.Clear(cut)
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(l.top); !os.IsNotExist(err) {
			t.Errorf("the staging directory is left (%v)", err)
		}
		calls, _ := os.ReadFile(filepath.Join(filepath.Dir(far), "calls"))
		if last := strings.Split(strings.TrimSpace(string(calls)), "\n"); !strings.HasPrefix(last[len(last)-1], "-d -v --delete") {
			t.Errorf("Close after a cut Clear: last session %q, want the cleaning", last[len(last)-1])
		}
	})
}

// TestRemoteListsBeginClear: the removal beside the copy's last chunks starts only once no
// list may be read on the far side any more: not while a list waits for its chunk's For,
// nor while an rsync handed one has not logged a path (Read); then once, and Clear waits
// for it rather than running its own.
func TestRemoteListsBeginClear(t *testing.T) {
	ctx := context.Background()
	rsync, far := fakeUploads(t)
	l := &RemoteLists{Rsync: rsync, Dest: "h:/srv/x", MinBytes: 1}
	defer l.Close(ctx)
	c1, c2 := listChunk(1, 5), listChunk(2, 5)
	l.Offer(c1)
	l.Offer(c2)
	ended := make(chan struct{}, 2)
	done := func() { ended <- struct{}{} }
	yes := func() bool { return true }
	// a slot taken and given back wakes the pool, which asks again at once: none is taken
	// while the lists may be read
	noSlot := func() bool { t.Error("a slot taken while a list may be read"); return false }
	if l.BeginClear(ctx, noSlot, done) {
		t.Fatal("began before any upload")
	}
	if arg := l.For(ctx, c1, c1.Entries); arg == "" {
		t.Fatal("no upload")
	}
	if l.BeginClear(ctx, noSlot, done) {
		t.Fatal("began while chunk 2's list waits for its For")
	}
	if arg := l.For(ctx, c2, c2.Entries); arg == "" {
		t.Fatal("chunk 2: no remote list")
	}
	l.Read(c1)
	if l.BeginClear(ctx, noSlot, done) {
		t.Fatal("began while chunk 2's rsync may not have read its list")
	}
	l.Read(c2)
	takes := 0
	if l.BeginClear(ctx, func() bool { takes++; return false }, done) || takes != 1 {
		t.Fatalf("began without a slot, or asked for %d", takes)
	}
	if !l.BeginClear(ctx, yes, done) {
		t.Fatal("did not begin once every list was read")
	}
	if l.BeginClear(ctx, noSlot, done) {
		t.Error("began twice")
	}
	if arg := l.For(ctx, c2, c2.Entries); arg != "" {
		t.Errorf("a retry after the removal began got %q, want stdin", arg)
	}
	if err := l.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	default:
		t.Error("Clear returned before the removal under way ended")
	}
	oneCleaning(t, l, far, "early")
}
