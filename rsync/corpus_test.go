package rsync

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/prsync/prsync/rsync/internal/corpus"
)

var update = flag.Bool("update", false, "rewrite testdata/corpus.golden")

// exceptions are the recorded paths where rsync exits 0 although DEST does not hold them
// as the source has them: prsync cannot see it without checking every path of every
// clean run, and says so in the README.
var exceptions = map[string]string{
	"clean-daemon/sub/lnk":    "a daemon with use chroot = no munges symlinks (munge symlinks = yes)",
	"comment-entries/#c1":     "rsync drops entries that start with #; prsync writes them as ./#c1",
	"comment-entries/;c2":     "rsync drops entries that start with ;; prsync writes them as ./;c2",
	"file-for-dir/d":          "the directory entry lands; its former file is replaced, and the truth compares the type only after",
	"file-for-dir-pull/d":     "as file-for-dir",
	"file-for-dir-daemon/d":   "as file-for-dir",
	"dir-for-file-empty/f1":   "rsync replaced an empty directory: the truth checks content",
	"dir-for-file-empty-pull": "",
}

// TestCorpus runs the language over every recorded run of the real rsync (rsync/testdata/
// corpus, written by PRSYNC_RECORD=1 go test ./rsync/internal/corpus) with the truth of
// what landed as the confirmation, and checks the rule: a path comes out transferred or
// up to date only if it landed, and one that did not land is failed, vanished or (for the
// run's own reasons) never proven. The outcome and reason of every path are pinned in
// testdata/corpus.golden (go test ./rsync -run Corpus -update after a deliberate change).
func TestCorpus(t *testing.T) {
	cases := recorded(t)
	if len(cases) < 100 {
		t.Fatalf("%d recorded cases; the corpus has over a hundred", len(cases))
	}
	vars := map[string]string{"TMP": "/t", "SRC": "/t/src", "DST": "/t/dst", "MOD": "/t/mod",
		"URL": "rsync://127.0.0.1:873/m/", "HELPER": "/t/helper", "PORT": "873"}
	var golden bytes.Buffer
	for _, c := range cases {
		c = c.Expand(vars)
		src, dest := endpoints(t, c)
		local := ""
		if _, remote := endpointPath(dest); !remote {
			local = strings.TrimSuffix(dest, "/")
		}
		entries := make([][]byte, len(c.List))
		for i, e := range c.List {
			entries[i] = []byte(e)
		}
		a := NewAttributor(entries, src, dest, local)
		for _, l := range c.StdoutLines() {
			a.Stdout([]byte(l))
		}
		for _, l := range c.StderrLines() {
			a.Stderr([]byte(l))
		}
		r := a.Result()
		s := Settle(r, c.Exit, false, false)
		vs := make([]Verdict, len(s.Unproven))
		for k, i := range s.Unproven {
			tr, _ := c.TruthOf(c.List[i])
			vs[k] = Verdict{Landed: tr.State == corpus.Landed, Reason: "not in DEST"}
		}
		out, unexplained := s.Fold(vs)
		class := Classify(c.Exit, false, r)
		fmt.Fprintf(&golden, "%s (%s, exit %d, %s)\n", c.Name, c.Form, c.Exit, class)
		for i, o := range out {
			tr, ok := c.TruthOf(c.List[i])
			if !ok {
				t.Fatalf("%s: no truth for %q", c.Name, c.List[i])
			}
			key := c.Name + "/" + c.List[i]
			provenOK := o.Status == Transferred || o.Status == UpToDate
			switch {
			case provenOK && tr.State != corpus.Landed:
				if _, ok := exceptions[key]; !ok {
					t.Errorf("%s: %q is %s, but DEST has it %s; stdout %q, stderr %q", c.Name, c.List[i], o.Status, tr.State, c.Stdout, c.Stderr)
				}
			case !provenOK && tr.State == corpus.Landed && o.Reason == "":
				t.Errorf("%s: %q landed, yet %s with no reason", c.Name, c.List[i], o.Status)
			case o.Status == Failed && !strings.Contains(o.Reason, "rsync") && !strings.Contains(o.Reason, "\"") &&
				!strings.Contains(o.Reason, ":"):
				t.Errorf("%s: %q failed with a vague reason %q", c.Name, c.List[i], o.Reason)
			}
			fmt.Fprintf(&golden, "\t%q\t%s\t%s\t%s\n", c.List[i], tr.State, o.Status, o.Reason)
		}
		if unexplained != "" {
			fmt.Fprintf(&golden, "\tunexplained: %s\n", unexplained)
		}
		if h := Hint(c.Exit, r, dest); c.Exit != 0 && h != "" {
			fmt.Fprintf(&golden, "\thint: %s\n", h)
		}
	}
	const path = "testdata/corpus.golden"
	if *update {
		if err := os.WriteFile(path, golden.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(golden.Bytes(), want) {
		t.Errorf("outcomes differ from %s (go test ./rsync -run Corpus -update after a deliberate change):\n%s", path, diffLines(string(want), golden.String()))
	}
}

// recorded returns the recorded runs of the real rsync (testdata/corpus).
func recorded(t *testing.T) []corpus.Case {
	t.Helper()
	cases, err := corpus.Load("testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

// endpoints returns the source and destination arguments of a recorded run.
func endpoints(t *testing.T, c corpus.Case) (src, dest string) {
	t.Helper()
	for i, a := range c.Args {
		if a == "--" && i+2 < len(c.Args) {
			return c.Args[i+1], c.Args[i+2]
		}
	}
	t.Fatalf("%s: no SRC DEST after -- in %q", c.Name, c.Args)
	return "", ""
}

// diffLines shows the lines of b not in a and of a not in b, briefly.
func diffLines(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !mb[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ma[l] {
			out = append(out, "+ "+l)
		}
	}
	if len(out) > 40 {
		out = append(out[:40], "…")
	}
	return strings.Join(out, "\n")
}
