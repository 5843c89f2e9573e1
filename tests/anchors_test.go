package tests

// A pull's lists carry the chunks' directories among the paths (rsync.Anchor), which keeps
// the pulling rsync's check of the sender's names linear; the copy must be exactly what
// the paths say, and the account the same as without them.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prsync/prsync/rsync"
)

func TestPullAnchors(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	mod := filepath.Join(t.TempDir(), "mod")
	var listed []string
	add := func(rel string, list bool) {
		writeFile(t, filepath.Join(mod, rel), "data of "+rel+"\n", 0o644)
		if list {
			listed = append(listed, rel)
		}
	}
	for i := range 150 { // more than two anchors' worth (AnchorEvery is 64)
		add(fmt.Sprintf("big/f%03d", i), true)
	}
	for i := range 70 { // big is anchored again in big2's run (rsync.AnchorRecent)
		add(fmt.Sprintf("big2/f%03d", i), true)
	}
	for _, n := range []string{"a", "b", "c"} {
		add("odd [x]*?\\ dir/"+n, true) // wildcards in a directory's name: its anchor's rule is a pattern
	}
	for _, rel := range []string{"n1/n2/n3/a", "n1/n2/n3/b", "n1/n2/x", "n1/n2/y", "top", "partial/in1", "partial/in2"} {
		add(rel, true)
	}
	add("partial/out1", false)     // beside listed paths, in an anchored directory: never copied
	add("partial/sub/out2", false) // below one
	add("gone/g1", true)
	add("gone/g2", true)
	if err := os.RemoveAll(filepath.Join(mod, "gone")); err != nil { // listed, and gone before the run
		t.Fatal(err)
	}
	d := startDaemon(t, mod, "read only = yes")
	fake := fakeRsyncPath(t)

	type outcome struct {
		code   int
		failed map[string]string
		files  []string
	}
	var want *outcome
	for _, tc := range []struct {
		name     string
		rsync    []string
		anchored bool
	}{
		{"defaults", nil, true},
		{"-r", []string{"-r"}, false},                         // a listed directory would be copied whole
		{"--trust-sender", []string{"--trust-sender"}, false}, // no check to make cheap
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "dst")
			lists := t.TempDir()
			failedList := filepath.Join(lists, "failed")
			args := append([]string{"-0", "--no-throttle", "--chunk-files", "400", "--failed", failedList, "--rsync", fake, "--root", d.URL(), dst, "--"}, tc.rsync...)
			r := start(t, startOpts{in: nul(listed...), env: []string{"PRSYNC_TEST_FAKE_RSYNC=keep-list:" + lists}}, args...).wait(time.Minute)
			r.DestHolds(t, mod, dst, listed)
			if n := num(r.Summary(t), "chunk_errors"); n != 0 {
				t.Errorf("chunk_errors %d: an anchor's message named no path\n%s", n, r.Stderr)
			}
			got := &outcome{code: r.Code, failed: r.failedStatus(t), files: regularFiles(t, dst)}
			slices.Sort(got.files)
			wantFiles := slices.DeleteFunc(slices.Clone(listed), func(p string) bool { return strings.HasPrefix(p, "gone/") })
			slices.Sort(wantFiles)
			if !slices.Equal(got.files, wantFiles) {
				t.Errorf("DEST holds %q\nwant the listed paths that exist, %q", got.files, wantFiles)
			}
			if len(got.failed) != 2 || got.failed["gone/g1"] == "" || got.failed["gone/g2"] == "" {
				t.Errorf("path_failed %v, want gone/g1 and gone/g2", got.failed)
			}
			if want == nil {
				want = got
			} else if got.code != want.code || fmt.Sprint(got.failed) != fmt.Sprint(want.failed) {
				t.Errorf("exit %d, path_failed %v; with anchors: exit %d, %v", got.code, got.failed, want.code, want.failed)
			}
			anchors := anchorsIn(t, lists, listed)
			if tc.anchored {
				for _, dir := range []string{"big", "big2", "odd [x]*?\\ dir", "n1/n2/n3", "n1/n2", "partial"} {
					if anchors[dir] == 0 {
						t.Errorf("no list anchored %q (anchors: %v)", dir, anchors)
					}
				}
				if anchors["big"] < 5 {
					t.Errorf("%q anchored %d times; want one per 64 of its 150 paths, and again in big2's run", "big", anchors["big"])
				}
			} else if len(anchors) > 0 {
				t.Errorf("lists hold anchors %v", anchors)
			}
		})
	}
}

// TestPullListBound: a pull's chunks from a daemon hold at most rsync.AnchoredListBytes of
// list unless --chunk-files is given, so that the anchors at a list's end are in place
// before the sender's names come back (bench H86); over ssh they are not bounded so.
func TestPullListBound(t *testing.T) {
	t.Parallel()
	needRsync(t)
	mod := filepath.Join(t.TempDir(), "mod")
	var listed []string
	long := strings.Repeat("n", 180)
	for i := range 2400 { // about 470 KB of list: more than AnchoredListBytes
		rel := fmt.Sprintf("d%d/%s%04d", i/800, long, i)
		writeFile(t, filepath.Join(mod, rel), "x", 0o644)
		listed = append(listed, rel)
	}
	d := startDaemon(t, mod, "read only = yes")
	fake := fakeRsyncPath(t)
	for _, tc := range []struct {
		name    string
		ssh     bool
		args    []string
		bounded bool
	}{
		{"chunks cut by count (--chunk-time 0)", false, []string{"--chunk-time", "0"}, true}, // 10,000 paths a chunk but for the bound
		{"--chunk-files given", false, []string{"--chunk-files", "5000"}, false},
		{"over ssh", true, []string{"--chunk-time", "0"}, false}, // each chunk one more ssh session
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "dst")
			lists := t.TempDir()
			root, rsyncArgs := d.URL(), []string(nil)
			if tc.ssh {
				sshConfig, _ := startSSHD(t, "") // skips this case alone where sshd cannot run
				root, rsyncArgs = "h0:"+mod, []string{"--", "-e", "ssh -F " + sshConfig}
			}
			args := append([]string{"-0", "--no-throttle", "--rsync", fake, "--root", root}, tc.args...)
			args = append(append(args, dst), rsyncArgs...)
			r := start(t, startOpts{in: nul(listed...), env: []string{"PRSYNC_TEST_FAKE_RSYNC=keep-list:" + lists}}, args...).wait(2 * time.Minute)
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			r.DestHolds(t, mod, dst, listed)
			files, err := filepath.Glob(filepath.Join(lists, "list-*"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no list kept (%v)", err)
			}
			biggest := 0
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				paths := 0
				for _, e := range bytes.Split(bytes.TrimSuffix(b, []byte{0}), []byte{0}) {
					if slices.Contains(listed, string(e)) {
						paths += len(e) + 1 // the anchors come on top of the bound
					}
				}
				biggest = max(biggest, paths)
			}
			switch {
			case tc.bounded && biggest > rsync.AnchoredListBytes:
				t.Errorf("a list held %d bytes of paths, more than AnchoredListBytes (%d)", biggest, rsync.AnchoredListBytes)
			case !tc.bounded && biggest <= rsync.AnchoredListBytes:
				t.Errorf("the biggest list held %d bytes of paths: here the list's bytes bound nothing", biggest)
			}
		})
	}
}

// anchorsIn counts the entries of the lists kept in dir (PRSYNC_TEST_FAKE_RSYNC=keep-list)
// that are not paths of the input.
func anchorsIn(t testing.TB, dir string, paths []string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "list-*")) // not the --failed list
	if err != nil || len(files) == 0 {
		t.Fatalf("no list kept in %s (%v)", dir, err)
	}
	out := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range bytes.Split(bytes.TrimSuffix(b, []byte{0}), []byte{0}) {
			if !slices.Contains(paths, string(e)) {
				out[string(e)]++
			}
		}
	}
	return out
}
