package rsync

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestAnchor(t *testing.T) {
	many := func(dir string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s/f%d", dir, i))
		}
		return out
	}
	tests := []struct {
		name    string
		entries []string
		want    []string // the list, or nil for the entries unchanged
		dirs    []string
	}{
		{"top-level names have no anchor", []string{"a", "b", "c"}, nil, nil},
		{"a lone path in its directory has none", []string{"d/a", "e/b", "f/c"}, nil, nil},
		{"a run of two", []string{"d/a", "d/b", "x"}, []string{"d", "d/a", "d/b", "x", "d"}, []string{"d"}},
		{"runs of two directories, and the first met last at the end", []string{"d/a", "d/b", "e/f/a", "e/f/b", "e/g"},
			[]string{"d", "d/a", "d/b", "e/f", "e/f/a", "e/f/b", "e/g", "e/f", "d"}, []string{"d", "e/f"}},
		{"a directory met twice is anchored twice, and at the end once", []string{"d/a", "d/b", "e/c", "d/e", "d/f"},
			[]string{"d", "d/a", "d/b", "e/c", "d", "d/e", "d/f", "d"}, []string{"d", "d"}},
		{"the part after /./ is what lands", []string{"src/./d/a", "src/./d/b"},
			[]string{"src/./d", "src/./d/a", "src/./d/b", "src/./d"}, []string{"src/./d"}},
		{"no anchor at the top of a /./ root", []string{"src/./a", "src/./b"}, nil, nil},
		{"no anchor that is not a clean name", []string{"d//a", "d//b", "./e/a", "./e/b", "../f/a", "../f/b"}, nil, nil},
		{"a directory among the paths is a path, and a parent", []string{"d", "d/a", "d/b"},
			[]string{"d", "d", "d/a", "d/b", "d"}, []string{"d"}},
		{"a large directory anchored again every AnchorEvery paths after it", slices.Concat(many("a", AnchorEvery), many("b", AnchorEvery), []string{"c/x", "d/y", "d/z"}),
			slices.Concat([]string{"a"}, many("a", AnchorEvery), []string{"b", "a"}, many("b", AnchorEvery), []string{"a", "b", "c/x", "d", "d/y", "d/z", "d", "b", "a"}),
			[]string{"a", "b", "d"}},
		{"a small directory is not", slices.Concat(many("a", AnchorEvery-1), many("b", AnchorEvery+1)),
			slices.Concat([]string{"a"}, many("a", AnchorEvery-1), []string{"b"}, many("b", AnchorEvery)[:AnchorEvery], []string{"b"}, many("b", AnchorEvery+1)[AnchorEvery:], []string{"b", "a"}),
			[]string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list, dirs := Anchor(toEntries(tt.entries))
			want := tt.want
			if want == nil {
				want = tt.entries
			}
			if got := fromEntries(list); !slices.Equal(got, want) {
				t.Errorf("list = %q, want %q", got, want)
			}
			if got := fromEntries(dirs); !slices.Equal(got, tt.dirs) {
				t.Errorf("dirs = %q, want %q", got, tt.dirs)
			}
		})
	}
	t.Run("every AnchorEvery paths of a run", func(t *testing.T) {
		entries := many("t/k", 2*AnchorEvery+1)
		list, _ := Anchor(toEntries(entries))
		got := fromEntries(list)
		var at []int
		for i, e := range got {
			if e == "t/k" {
				at = append(at, i)
			}
		}
		// before each AnchorEvery paths, and at the end
		if want := []int{0, AnchorEvery + 1, 2*AnchorEvery + 2, 2*AnchorEvery + 4}; !slices.Equal(at, want) {
			t.Errorf("anchors at %v, want %v", at, want)
		}
		var paths []string
		for _, e := range got {
			if e != "t/k" {
				paths = append(paths, e)
			}
		}
		if !slices.Equal(paths, entries) {
			t.Error("the paths are not all there, in their order")
		}
	})
}

// TestAnchorWalk models the pulling client's check (see Anchor): the sender's name at
// position p of the list comes back when the client has forwarded the list up to p+lag,
// and the client walks back from there to the nearest entry whose rule matches the name:
// the name itself or its directory. The walk stays within twice AnchorEvery paths and one
// re-listing whatever the lag, while the lag ends in one of the AnchorRecent directories
// after the name's; without the re-listed anchors it grew with the lag (bench H87).
func TestAnchorWalk(t *testing.T) {
	var entries []string
	for i, n := range []int{520, 750, 1440, 600, 900, 160, 3, 2, 1000, 700} { // scenario 10's directories, and two small ones
		for k := range n {
			entries = append(entries, fmt.Sprintf("ks/t%02d/f%04d", i, k))
		}
	}
	list, _ := Anchor(toEntries(entries))
	got := fromEntries(list)
	pos := make(map[string]int, len(entries))
	for i, e := range got {
		if _, ok := pos[e]; !ok && strings.Count(e, "/") == 2 {
			pos[e] = i
		}
	}
	limit := 2*AnchorEvery + AnchorRecent
	for _, lag := range []int{0, AnchorEvery, 500, 2000} {
		longest := 0
		for _, e := range entries {
			p := pos[e]
			if strings.HasPrefix(e, "ks/t06/") || strings.HasPrefix(e, "ks/t07/") {
				continue // runs shorter than AnchorEvery are never anchored again
			}
			h := min(p+lag, len(got)-1)
			dir := e[:strings.LastIndexByte(e, '/')]
			q := h
			for q >= 0 && got[q] != e && got[q] != dir {
				q--
			}
			longest = max(longest, h-q)
		}
		if longest > limit {
			t.Errorf("lag %d: a name walked %d entries back, more than %d", lag, longest, limit)
		}
	}
	if extra, most := len(got)-len(entries), len(entries)/AnchorEvery*(1+AnchorRecent)+2*10; extra > most {
		t.Errorf("%d anchors for %d paths, more than %d", extra, len(entries), most)
	}
	var paths []string
	for _, e := range got {
		if strings.Count(e, "/") == 2 {
			paths = append(paths, e)
		}
	}
	if !slices.Equal(paths, entries) {
		t.Error("the paths are not all there, in their order")
	}
}

func toEntries(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func fromEntries(bs [][]byte) []string {
	var out []string
	for _, b := range bs {
		out = append(out, string(b))
	}
	return out
}

func TestAnchorsApply(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--archive", "-H", "-v"}, true},
		{[]string{"-a"}, true}, // -a does not recurse with --files-from
		{[]string{"-r"}, false},
		{[]string{"-avr"}, false},
		{[]string{"--recursive"}, false},
		{[]string{"--no-recursive"}, true},
		{[]string{"--no-dirs"}, false},
		{[]string{"--no-d"}, false},
		{[]string{"--old-dirs"}, false},
		{[]string{"--old-d"}, false},
		{[]string{"--no-implied-dirs"}, false},
		{[]string{"--trust-sender"}, false},
		{[]string{"--exclude", "-r"}, true}, // -r is the pattern
		{[]string{"-e", "ssh -r"}, true},    // and here ssh's option
		{[]string{"-essh -r"}, true},
		{[]string{"-T", "/tmp/r"}, true},
		{[]string{"--", "-r"}, true},
	}
	for _, tt := range tests {
		if got := AnchorsApply(tt.args); got != tt.want {
			t.Errorf("AnchorsApply(%q) = %v, want %v", strings.Join(tt.args, " "), got, tt.want)
		}
	}
}

// A message of the sender's that names an anchor is about the chunk's paths below it; one
// of the receiver's about the same directory is not (it is the implied directory's, which
// rsync makes whether or not the list names it).
func TestAttributorAnchors(t *testing.T) {
	entries := toEntries([]string{"gone/sub/a", "gone/sub/b", "kept/c", "kept/d"})
	list, dirs := Anchor(entries)
	if !slices.Contains(fromEntries(dirs), "gone/sub") || !slices.Contains(fromEntries(list), "gone/sub") {
		t.Fatalf("list = %q, dirs %q", fromEntries(list), fromEntries(dirs))
	}
	lines := []struct {
		line  string
		paths []int // the paths it is about
	}{
		{`rsync: [sender] link_stat "gone/sub" (in m) failed: No such file or directory (2)`, []int{0, 1}},
		{`rsync: [generator] failed to set times on "kept": Operation not permitted (1)`, nil},
	}
	for _, tt := range lines {
		for _, anchored := range []bool{false, true} {
			a := NewAttributor(entries, "rsync://127.0.0.1/m/", "/dst/", "/dst")
			if anchored {
				a.Anchors(dirs)
			}
			a.Stderr([]byte(tt.line))
			r := a.Result()
			var about []int
			for i, ps := range r.Paths {
				if ps.Kind != KindOther {
					about = append(about, i)
				}
			}
			want := tt.paths
			if !anchored {
				want = nil
			}
			if !slices.Equal(about, want) || (len(want) == 0) != (len(r.Unattributed) == 1) {
				t.Errorf("anchored %v, %q: about paths %v, unattributed %q; want %v", anchored, tt.line, about, r.Unattributed, want)
			}
		}
	}
}
