package tests

// --verify names the culprit of a difference: the source, rewritten after rsync copied it,
// or DEST, changed under the source's size and mtime or under its own. Proven by walking
// DEST and the source, locally and into a daemon.

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prsync/prsync/rsync"
)

// TestVerifyCulprit copies ten files with --verify through a wrapper around the real
// rsync that, just before the first checksum pass, changes some of them: in the source,
// f1 is rewritten to the same size an hour later and f2 grows; in DEST, f3 gets a byte
// flipped under the source's size and mtime, and f4 other content of its size with a new
// mtime. Each must fail with its own culprit, the run's hint must be that culprit's, DEST
// must hold what was copied, and a re-run of the --failed list makes DEST the source's.
func TestVerifyCulprit(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	cases := []struct {
		name    string
		changes []string // of the wrapper's changes, those to make
		reasons map[string]string
		hint    rsync.Advice
	}{
		{"source rewritten", []string{"f1", "f2"}, map[string]string{
			"d1/f1": "verify: source changed since it was copied (_fc.t......): copied at size 1000, mtime ",
			"d0/f2": "verify: source changed since it was copied (_fcst......): copied at size 1000, mtime ",
		}, rsync.SourceChanged},
		{"DEST corrupted under the same size and mtime", []string{"f3"}, map[string]string{
			"d1/f3": "verify: content differs (_fc........)",
		}, rsync.ContentDiffers},
		{"DEST rewritten", []string{"f4"}, map[string]string{
			"d0/f4": "verify: content differs, DEST changed since it was copied (_fc.t......)",
		}, rsync.DestChanged},
	}
	for _, target := range []string{"local", "daemon"} {
		for _, tc := range cases {
			t.Run(target+"/"+tc.name, func(t *testing.T) {
				t.Parallel() // each case its own trees, wrapper and daemon
				verifyCulprit(t, target, tc.changes, tc.reasons, tc.hint)
			})
		}
	}
}

func verifyCulprit(t *testing.T, target string, changes []string, reasons map[string]string, hint rsync.Advice) {
	w := newWork(t)
	if err := os.Mkdir(w.Dst, 0o755); err != nil {
		t.Fatal(err)
	}
	var names []string
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := 0; i < 10; i++ {
		n := fmt.Sprintf("d%d/f%d", i%2, i)
		p := filepath.Join(w.Src, n)
		writeFile(t, p, strings.Repeat(fmt.Sprint(i), 1000), 0o644)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	change := map[string]string{
		"f1": fmt.Sprintf("printf %%01000d 0 >%[1]s/d1/f1 && touch -d @%[2]d %[1]s/d1/f1", w.Src, old.Add(time.Hour).Unix()),
		"f2": fmt.Sprintf("printf more >>%s/d0/f2", w.Src),
		"f3": fmt.Sprintf("printf Z | dd of=%[2]s/d1/f3 bs=1 seek=10 conv=notrunc 2>/dev/null && touch -r %[1]s/d1/f3 %[2]s/d1/f3", w.Src, w.Dst),
		"f4": fmt.Sprintf("printf %%01000d 4 >%s/d0/f4", w.Dst),
	}
	var do []string
	for _, c := range changes {
		do = append(do, "\t\t"+change[c])
	}
	wrapper := filepath.Join(w.Dir, "rsync")
	script := fmt.Sprintf("#!/bin/sh\nfor a; do\n\tif [ \"$a\" = --checksum ] && mkdir %s/changed 2>/dev/null; then\n%s\n\tfi\ndone\nexec rsync \"$@\"\n",
		w.Dir, strings.Join(do, "\n"))
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dest, arrow := w.Dst, ">"
	if target == "daemon" {
		dest, arrow = startDaemon(t, w.Dst).URL(), "<" // the sender logs it
	}
	// one chunk: the wrapper changes the files at the first checksum pass, which must come
	// after every path was copied
	r := runPrsync(t, "", nul(names...), "-0", "--root", w.Src, "--rsync", wrapper, "--verify", "--failed", w.Failed, "--chunk-files", "100", dest)
	r.Exit(t, 23)
	if _, err := os.Stat(filepath.Join(w.Dir, "changed")); err != nil {
		t.Fatal("the wrapper never saw the checksum pass: the test proves nothing")
	}
	s := r.Identity(t, 10)
	if n := int64(len(reasons)); num(s, "files_failed") != n || num(s, "files_verify_failed") != n || num(s, "files_verified") != 10-n {
		t.Errorf("summary: failed %v, verify_failed %v, verified %v", s["files_failed"], s["files_verify_failed"], s["files_verified"])
	}
	got := map[string]string{}
	for _, e := range r.OfType("path_failed") {
		got[e["path"].(string)] = e["reason"].(string)
	}
	for p, reason := range reasons {
		if reason = strings.Replace(reason, "_", arrow, 1); !strings.HasPrefix(got[p], reason) {
			t.Errorf("%s failed for %q, want %q…", p, got[p], reason)
		}
	}
	if len(got) != len(reasons) {
		t.Errorf("path_failed for %v, want %v", got, reasons)
	}
	if !strings.Contains(r.Stderr, "prsync: hint: "+hint.String()+"\n") {
		t.Errorf("no hint %q:\n%s", hint, r.Stderr)
	}
	if hint != rsync.ContentDiffers && strings.Contains(r.Stderr, rsync.ContentDiffers.String()) {
		t.Errorf("the hint of DEST changed under the source's size and mtime, which is false here:\n%s", r.Stderr)
	}
	// the walk: DEST holds what was copied where the source changed; the source holds
	// what it had where DEST changed; everything else is as written
	for i, n := range names {
		d, _ := os.ReadFile(filepath.Join(w.Dst, n))
		s, _ := os.ReadFile(filepath.Join(w.Src, n))
		first := strings.Repeat(fmt.Sprint(i), 1000)
		_, bad := reasons[n]
		switch {
		case bad && (n == "d1/f1" || n == "d0/f2"):
			if string(d) != first || string(s) == first {
				t.Errorf("%s: DEST %.20q…, source %.20q…: want DEST as copied, the source changed", n, d, s)
			}
		case bad:
			if string(s) != first || string(d) == first {
				t.Errorf("%s: DEST %.20q…, source %.20q…: want the source as it was, DEST changed", n, d, s)
			}
		case string(d) != first || string(s) != first:
			t.Errorf("%s: DEST %.20q…, source %.20q…", n, d, s)
		}
	}
	r.FailedAre(t, slices.Collect(maps.Keys(reasons))...)
	// the --failed list, copied again with --checksum (f3's quick check passes), makes
	// DEST the source's
	r = runPrsync(t, "", nul(r.Failed(t)...), "-0", "--root", w.Src, "--verify", dest, "--", "--checksum")
	r.Exit(t, 0)
	r.Counts(t, map[string]int64{"files_transferred": int64(len(reasons))})
	sameTree(t, w.Src, w.Dst)
}
