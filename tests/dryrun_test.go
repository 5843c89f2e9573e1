package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prsync/prsync/rsync"
)

// wantItemize is what rsync -n -i says of a new entry: a regular file or a symlink.
func wantItemize(t testing.TB, src, name string) string {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(src, name))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return "cL+++++++++"
	}
	return ">f+++++++++"
}

// TestDryRunLists: prsync -n names every path rsync would copy, as rsync -n -i does: a
// would_transfer event for each (path, path_b64 for a name that is not UTF-8, rsync's
// itemized change, the file's size, its chunk), and, on a terminal, a line
// ">f+++++++++ NAME" with the name escaped as rsync escapes it. The names are the odd ones:
// a newline, bytes that are not UTF-8, a leading dash, spaces, a literal "\#012". Nothing
// is copied, and a path already in DEST is not named.
func TestDryRunLists(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	makeOddTree(t, w.Src)
	list, names := relList(t, w.Src)
	// one path is in DEST already, as the source has it: up to date, not named
	if out, err := exec.Command("rsync", "-a", "--mkpath", filepath.Join(w.Src, "plain.db"), w.Dst+"/").CombinedOutput(); err != nil {
		t.Fatalf("rsync: %v: %s", err, out)
	}
	fresh := "plain.db"

	t.Run("events", func(t *testing.T) {
		t.Parallel() // two dry runs over the same trees
		r := runPrsync(t, w.Dir, list, "-0", "-n", "-j", "2", "--chunk-files", "5", "--root", w.Src, w.Dst)
		r.Exit(t, 0)
		s := r.Identity(t, len(names))
		got := map[string]map[string]any{}
		for _, e := range r.OfType("would_transfer") {
			p := eventPath(t, e)
			if _, dup := got[p]; dup {
				t.Errorf("%q named twice", p)
			}
			got[p] = e
		}
		if int64(len(got)) != num(s, "files_transferred") {
			t.Errorf("%d would_transfer events, files_transferred %d", len(got), num(s, "files_transferred"))
		}
		for _, n := range names {
			e, ok := got[n]
			switch {
			case n == fresh:
				if ok {
					t.Errorf("%q is up to date in DEST, yet named: %v", n, e)
				}
				continue
			case !ok:
				t.Errorf("%q not named", n)
				continue
			}
			fi, _ := os.Lstat(filepath.Join(w.Src, n))
			wantBytes := int64(0)
			if fi.Mode().IsRegular() {
				wantBytes = fi.Size()
			}
			if e["itemize"] != wantItemize(t, w.Src, n) || num(e, "bytes") != wantBytes || num(e, "chunk") < 1 {
				t.Errorf("%q: %v; want itemize %s, bytes %d and a chunk", n, e, wantItemize(t, w.Src, n), wantBytes)
			}
			if _, b64 := e["path_b64"]; b64 != strings.Contains(n, "\xff") {
				t.Errorf("%q: path_b64 present %v", n, b64)
			}
		}
		if ents, _ := os.ReadDir(w.Dst); len(ents) != 1 {
			t.Errorf("a dry run wrote into DEST: %v", ents)
		}
		if strings.Contains(r.Stderr, "+++++++++") {
			t.Errorf("stderr is not a terminal, yet lists paths:\n%s", r.Stderr)
		}
	})

	t.Run("terminal", func(t *testing.T) {
		t.Parallel()
		lines, r := runOnTerminal(t, w.Dir, list, "-0", "-n", "-j", "2", "--chunk-files", "5", "--root", w.Src, w.Dst)
		r.Exit(t, 0)
		item := regexp.MustCompile(`^([<>ch.][fdLDS][ .+a-z]{9}) (.*)$`)
		got := map[string]string{}
		for _, l := range lines {
			m := item.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			for _, c := range []byte(m[2]) {
				if c < 0x20 || c == 0x7f {
					t.Errorf("a raw control byte on the terminal: %q", l)
				}
			}
			got[string(rsync.Unescape([]byte(m[2])))] = m[1]
		}
		for _, n := range names {
			if n == fresh {
				if _, ok := got[n]; ok {
					t.Errorf("%q is up to date, yet listed", n)
				}
				continue
			}
			if got[n] != wantItemize(t, w.Src, n) {
				t.Errorf("%q: listed as %q, want %q; the terminal:\n%s", n, got[n], wantItemize(t, w.Src, n), strings.Join(lines, "\n"))
			}
		}
		if len(got) != len(names)-1 {
			t.Errorf("%d paths listed, want %d", len(got), len(names)-1)
		}
		// the escapes are rsync's own: a newline as \#012, a byte that is not UTF-8 as \#377
		all := strings.Join(lines, "\n")
		for _, want := range []string{`>f+++++++++ new\#012line`, `>f+++++++++ bad\#377utf8`, `>f+++++++++ -e touch PWNED`,
			`>f+++++++++  lead space`, `>f+++++++++ \#134#012literal`} {
			if !strings.Contains(all, want) {
				t.Errorf("the terminal lacks %q:\n%s", want, all)
			}
		}
		if !strings.Contains(all, "prsync: ") {
			t.Errorf("no summary line on the terminal:\n%s", all)
		}
		if got := len(r.OfType("would_transfer")); got != len(names)-1 {
			t.Errorf("%d would_transfer events with a terminal, want %d", got, len(names)-1)
		}
	})
}

// runOnTerminal runs prsync with stderr on a pseudo-terminal and stdout in a pipe, and
// returns the terminal's lines (without the progress line's redraws) and the run.
func runOnTerminal(t *testing.T, dir string, stdin []byte, args ...string) ([]string, *Run) {
	t.Helper()
	r := start(t, startOpts{dir: dir, in: stdin, tty: true}, args...).wait(5 * time.Minute)
	var lines []string
	for _, l := range strings.Split(r.Stderr, "\n") {
		l = strings.TrimSuffix(l, "\r")
		if i := strings.LastIndex(l, "\r\x1b[K"); i >= 0 {
			l = l[i+len("\r\x1b[K"):] // what the line holds once the progress line is cleared
		}
		lines = append(lines, l)
	}
	return lines, r
}
