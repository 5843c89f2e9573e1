package rsync

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The files in testdata/listing are the standard output of rsync 3.5.0, recorded as
//
//	printf 'a/f1\0top\0ln -> x\0nl\nname\0 sp\0-dash\0bad\xffutf\0back\\#012slash\0fifo\0gone\0d -> e\0sticky\0' |
//	  LC_ALL=C rsync ARGS --list-only --files-from=- --from0 -- rsync://127.0.0.1:PORT/mod/sub/ /dev/null
//
// against a daemon whose module holds them all but gone ("ln -> x" is a symlink to a/f1,
// "d -> e" and sticky (mode 1777) directories, fifo a FIFO, top dated 1999).
var listingFiles = []struct {
	file string
	args []string
}{
	{"a.out", []string{"-a"}},
	{"av.out", []string{"-av"}},
	{"a-no-h.out", []string{"-a", "--no-h"}},
	{"ah.out", []string{"-ah"}},
	{"aU.out", []string{"-aU"}},
	{"a8.out", []string{"-a8"}},
	{"a-stats.out", []string{"-a", "--stats"}},
	{"a-progress2.out", []string{"-a", "--info=progress2"}},
}

// listed are the names every recording shows (with a/, the implied directory of a/f1).
var listed = []string{"a/f1", "a", "top", "ln -> x", "nl\nname", " sp", "-dash", "bad\xffutf", `back\#012slash`, "fifo", "d -> e", "sticky"}

func TestListingRecorded(t *testing.T) {
	for _, f := range listingFiles {
		t.Run(f.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "listing", f.file))
			if err != nil {
				t.Fatal(err)
			}
			l := NewListing(ListTimeColumns(f.args))
			entries := 0
			for line := range bytes.SplitSeq(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
				if l.Line(line) {
					entries++
				}
			}
			if entries != len(listed) {
				t.Errorf("%d entries, want %d", entries, len(listed))
			}
			for _, n := range listed {
				if !l.Has(n) {
					t.Errorf("%q not listed", n)
				}
			}
			// ("ln" is listed too: see TestListingSymlinkArrows)
			for _, n := range []string{"gone", "x", "a/f1 ", "nl", "sp", "d", "e", ""} {
				if l.Has(n) {
					t.Errorf("%q listed", n)
				}
			}
		})
	}
}

func TestParseListLine(t *testing.T) {
	for _, c := range []struct {
		line     string
		timeCols int
		typ      byte
		name     string // "" for no entry
	}{
		{"-rw-r--r--              0 2026/12/02 08:54:33  sp", 0, '-', " sp"},
		{"-rw-r--r--              0 2026/12/02 08:54:33 -dash", 0, '-', "-dash"},
		{`-rw-r--r--              0 2026/12/02 08:54:33 nl\#012name`, 0, '-', "nl\nname"},
		{`-rw-r--r--              0 2026/12/02 08:54:33 bad\#377utf`, 0, '-', "bad\xffutf"},
		{"-rw-r--r--              0 2026/12/02 08:54:33 bad\xffutf", 0, '-', "bad\xffutf"},
		{`-rw-r--r--              0 2026/12/02 08:54:33 back\#134#012slash`, 0, '-', `back\#012slash`},
		{"lrwxrwxrwx              4 2026/12/02 08:54:33 ln -> x -> a/f1", 0, 'l', "ln -> x -> a/f1"},
		{"drwxrwxrwt          4,096 2026/12/02 08:59:53 sticky", 0, 'd', "sticky"},
		{"drwxr-xr-x          4.10K 2026/12/02 08:51:19 a", 0, 'd', "a"},
		{"drwxr-xr-x        4096 2026/12/02 08:51:19 a", 0, 'd', "a"},
		{"-rwsr-Sr-T  123,456,789 2026/12/02 08:51:19 big", 0, '-', "big"},
		{"-rw-r--r--              2 1999/01/02 03:04:05 1999/01/02 03:04:05 top", 1, '-', "top"},
		{"drwxr-xr-x          4,096 2026/12/02 08:51:19                     a", 1, 'd', "a"},
		{"-rw-r--r--              0 2026/12/02 08:54:33 2026/12/02 08:54:33  sp", 1, '-', " sp"},
		{"-rw-r--r--              0 (time out of range) x", 0, '-', "x"},
		// a name that looks like a time is a name, when the time columns are known
		{"-rw-r--r--              0 2026/12/02 08:54:33 2026/12/02 08:54:33 x", 0, '-', "2026/12/02 08:54:33 x"},
		// not entries
		{"receiving file list ... done", 0, 0, ""},
		{"sent 113 bytes  received 265 bytes  756.00 bytes/sec", 0, 0, ""},
		{"total size is 9  speedup is 0.02", 0, 0, ""},
		{"Number of files: 12 (reg: 7, dir: 3, link: 1, special: 1)", 0, 0, ""},
		{"\r              0   0%    0.00kB/s    0:00:00 (xfr#0, to-chk=0/12)", 0, 0, ""},
		{"*missing                                      gone", 0, 0, ""},
		{"", 0, 0, ""},
		{"-rw-r--r--", 0, 0, ""},
		{"-rw-r--r--              0 2026/12/02 08:54:33 ", 0, 0, ""},
		{"-rw-r--r--              0 2026/12/02 08:54:33", 0, 0, ""},
		{"-rw-r--r--0 2026/12/02 08:54:33 x", 0, 0, ""},
		{"xrw-r--r--              0 2026/12/02 08:54:33 x", 0, 0, ""},
		{"-rw-r--r--              0 2026-12-02 08:54:33 x", 0, 0, ""},
		{"-rw-r--r--              0 2026/12/02 08:54:33 x", 1, 0, ""}, // a -U listing has the atime
		{">f+++++++++|3|1764665479|a/f1", 0, 0, ""},
	} {
		e, ok := ParseListLine([]byte(c.line), c.timeCols)
		if ok != (c.name != "") || ok && (e.Type != c.typ || string(e.Name) != c.name) {
			t.Errorf("ParseListLine(%q, %d) = %c %q %v, want %c %q", c.line, c.timeCols, e.Type, e.Name, ok, c.typ, c.name)
		}
	}
}

// TestListLineStamp: a --no-h listing gives each file's size and its mtime as %M does;
// a size with separators or a suffix is no size.
func TestListLineStamp(t *testing.T) {
	for _, c := range []struct {
		line  string
		size  int64
		mtime string
	}{
		{"-rw-r--r--    12641280 2026/12/05 10:35:04 big", 12641280, "2026/12/05-10:35:04"},
		{"-rw-r--r--           0 2021/03/04 05:06:07 empty", 0, "2021/03/04-05:06:07"},
		{"-rw-r--r--     12,641,280 2026/12/05 10:35:04 big", -1, "2026/12/05-10:35:04"},
		{"-rw-r--r--          4.10K 2026/12/05 10:35:04 big", -1, "2026/12/05-10:35:04"},
	} {
		e, ok := ParseListLine([]byte(c.line), 0)
		if !ok || e.Size != c.size || e.MTime != c.mtime {
			t.Errorf("ParseListLine(%q) = size %d, mtime %q, %v; want %d, %q", c.line, e.Size, e.MTime, ok, c.size, c.mtime)
		}
	}
	l := NewListing(0)
	for _, line := range []string{"-rw-r--r--           2 2021/03/04 05:06:07 x", "drwxr-xr-x        4096 2026/12/05 10:35:04 d", "-rw-r--r--          2 2021/03/04 05:06:07 d/y"} {
		l.Line([]byte(line))
	}
	if st, ok := l.File("x"); !ok || st != (Stamp{Size: 2, MTime: "2021/03/04-05:06:07"}) {
		t.Errorf("File(x) = %+v, %v", st, ok)
	}
	if _, ok := l.File("d"); ok {
		t.Errorf("a directory has a file's stamp")
	}
}

func TestListTimeColumns(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"--archive"}, 0},
		{[]string{"--archive", "-U"}, 1},
		{[]string{"-aUN"}, 2},
		{[]string{"--atimes", "--crtimes"}, 2},
		{[]string{"--atimes", "--no-atimes"}, 0},
		{[]string{"-eU"}, 0}, // -e's value
		{[]string{"--archive", "--exclude=-U"}, 0},
	} {
		if got := ListTimeColumns(c.args); got != c.want {
			t.Errorf("ListTimeColumns(%q) = %d, want %d", c.args, got, c.want)
		}
	}
}

// TestListingSymlinkArrows: a symlink's line cannot tell an arrow in its name from one
// in its target; the listing shows every name it could be, so that a present path is
// never taken for gone.
func TestListingSymlinkArrows(t *testing.T) {
	l := NewListing(0)
	l.Line([]byte("lrwxrwxrwx              4 2026/12/02 08:54:33 a -> b -> c -> d"))
	for _, n := range []string{"a", "a -> b", "a -> b -> c"} {
		if !l.Has(n) {
			t.Errorf("%q not listed", n)
		}
	}
	if l.Has("a -> b -> c -> d") || l.Has("d") {
		t.Error("the whole line, or the last target, listed as a name")
	}
}

// TestProveGone: each way a listing can prove, or fail to prove, that a path rsync said
// vanished is gone. The stderr lines are rsync 3.5.0's, from a daemon module "mod" whose
// --root is rsync://HOST/mod/sub.
func TestProveGone(t *testing.T) {
	entries := [][]byte{[]byte("here"), []byte("gone"), []byte("a/notdir/x"), []byte("locked"), []byte("silent"), []byte("x/./anchored")}
	const src = "rsync://127.0.0.1:873/mod/sub/"
	listing := func(stdout []string, stderr ...string) (*Listing, *Result) {
		l := NewListing(0)
		for _, s := range stdout {
			l.Line([]byte(s))
		}
		a := NewAttributor(entries, src, "/dev/null", "/dev/null")
		for _, s := range stderr {
			a.Stderr([]byte(s))
		}
		return l, a.Result()
	}
	out := []string{
		"-rw-r--r--              2 2026/12/02 08:51:19 here",
		"-rw-r--r--              2 2026/12/02 08:51:19 anchored",
	}
	errs := []string{
		`rsync: [sender] link_stat "/sub/gone" (in mod) failed: No such file or directory (2)`,
		`rsync: [sender] link_stat "/sub/a/notdir/x" (in mod) failed: Not a directory (20)`,
		`rsync: [sender] link_stat "/sub/locked" (in mod) failed: Permission denied (13)`,
		"rsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1956) [generator=3.5.0]",
	}
	statuses := func(gs []Gone) string {
		var b []byte
		for _, g := range gs {
			switch {
			case g.Gone:
				b = append(b, 'G')
			case g.Advice == FarSideHasIt:
				b = append(b, 'P')
			default:
				b = append(b, 'F')
			}
		}
		return string(b)
	}

	l, r := listing(out, errs...)
	gs := ProveGone(l, r, 23, false, entries, false)
	if got := statuses(gs); got != "PGGFFP" {
		t.Errorf("statuses %s, want PGGFFP: %+v", got, gs)
	}
	if gs[3].Advice != SourceNotReadable || !bytes.Contains([]byte(gs[3].Reason), []byte("Permission denied")) {
		t.Errorf("the unreadable path: %+v", gs[3])
	}
	if !bytes.Contains([]byte(gs[4].Reason), []byte("listing the far side to prove it failed: rsync exit 23")) {
		t.Errorf("the path the listing did not name: %+v", gs[4])
	}

	// --ignore-missing-args leaves a missing entry out without a word: a clean listing
	// proves it gone; one with an error that names no path proves nothing
	l, r = listing(out, errs[0], errs[1], errs[3])
	if got := statuses(ProveGone(l, r, 23, false, entries, true)); got != "PGGGGP" {
		t.Errorf("--ignore-missing-args: %s, want PGGGGP", got)
	}
	l, r = listing(out, errs[0], "rsync: [sender] some error of a kind never seen (5)")
	if got := statuses(ProveGone(l, r, 23, false, entries, true)); got != "PGFFFP" {
		t.Errorf("--ignore-missing-args with an unattributed error: %s, want PGFFFP", got)
	}
	// exit 0 and silent about a path: not proven
	l, r = listing(out)
	if got := statuses(ProveGone(l, r, 0, false, entries, false)); got != "PFFFFP" {
		t.Errorf("exit 0: %s, want PFFFFP", got)
	}
	// the listing could not connect: nothing is proven, the line is the reason
	l, r = listing(nil, "rsync: failed to connect to 127.0.0.1 (127.0.0.1): Connection refused (111)",
		"rsync error: error in socket IO (code 10) at clientserver.c(165) [Receiver=3.5.0]")
	gs = ProveGone(l, r, 10, false, entries, true)
	if got := statuses(gs); got != "FFFFFF" {
		t.Errorf("no session: %s, want FFFFFF", got)
	}
	if !bytes.Contains([]byte(gs[0].Reason), []byte("Connection refused")) {
		t.Errorf("no session: reason %q", gs[0].Reason)
	}
	// interrupted
	l, r = listing(nil)
	if got := statuses(ProveGone(l, r, -1, true, entries, false)); got != "FFFFFF" {
		t.Errorf("interrupted: %s", got)
	}
	if !slices.ContainsFunc(ProveGone(l, r, -1, true, entries, false), func(g Gone) bool { return bytes.Contains([]byte(g.Reason), []byte("interrupted")) }) {
		t.Error("interrupted: no reason says so")
	}
}
