package tests

import (
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Run is one finished prsync run: its exit code, output and events, and the arguments it
// was started with (Failed reads the --failed list they name).
type Run struct {
	Code   int
	Stdout string
	Stderr string
	Events []map[string]any
	Args   []string // prsync's
	Dir    string   // its working directory ("" for the test's)
}

// Summary returns the summary event; the test fails if it is missing or not last.
func (r *Run) Summary(t testing.TB) map[string]any {
	t.Helper()
	if len(r.Events) == 0 {
		t.Fatalf("no events; stderr:\n%s", r.Stderr)
	}
	last := r.Events[len(r.Events)-1]
	if last["type"] != "summary" {
		t.Fatalf("last event is %v, want summary", last["type"])
	}
	return last
}

// Start returns the start event, the first.
func (r *Run) Start(t testing.TB) map[string]any {
	t.Helper()
	if len(r.Events) == 0 || r.Events[0]["type"] != "start" {
		t.Fatalf("the first event is no start event; stderr:\n%s", r.Stderr)
	}
	return r.Events[0]
}

// OfType returns the events of one type.
func (r *Run) OfType(typ string) []map[string]any {
	var out []map[string]any
	for _, e := range r.Events {
		if e["type"] == typ {
			out = append(out, e)
		}
	}
	return out
}

// Exit stops the test unless the run exited with code, and checks that the summary is
// last and says the same code; it returns the summary.
func (r *Run) Exit(t testing.TB, code int) map[string]any {
	t.Helper()
	if r.Code != code {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", r.Code, code, r.Stderr)
	}
	s := r.Summary(t)
	if got := num(s, "exit_code"); got != int64(r.Code) {
		t.Errorf("summary exit_code %d, process exit code %d", got, r.Code)
	}
	return s
}

// Identity checks the accounting identity of the summary, and that the run read files
// paths (any number when files < 0); it returns the summary.
func (r *Run) Identity(t testing.TB, files int) map[string]any {
	t.Helper()
	s := r.Summary(t)
	identity(t, s, int64(files))
	return s
}

// identity asserts the accounting identity of a summary, and that files == want (if want >= 0).
func identity(t testing.TB, s map[string]any, want int64) {
	t.Helper()
	sum := num(s, "files_transferred") + num(s, "files_up_to_date") + num(s, "files_vanished") +
		num(s, "files_failed") + num(s, "files_not_done")
	if sum != num(s, "files") {
		t.Errorf("accounting: transferred+up_to_date+vanished+failed+not_done = %d, files = %d (%v)", sum, num(s, "files"), s)
	}
	if want >= 0 && num(s, "files") != want {
		t.Errorf("summary files = %d, want %d", num(s, "files"), want)
	}
}

// Counts checks fields of the summary.
func (r *Run) Counts(t testing.TB, want map[string]int64) {
	t.Helper()
	counts(t, r.Summary(t), want)
}

// counts checks number fields of an event.
func counts(t testing.TB, e map[string]any, want map[string]int64) {
	t.Helper()
	for k, v := range want {
		if got := num(e, k); got != v {
			t.Errorf("%s %s = %d, want %d (%v)", e["type"], k, got, v, e)
		}
	}
}

// num reads a JSON number field.
func num(m map[string]any, k string) int64 {
	v, _ := m[k].(float64)
	return int64(v)
}

// is returns a predicate for events of type typ whose fields equal kv (k1, v1, k2, v2 …).
func is(typ string, kv ...any) func(map[string]any) bool {
	return func(e map[string]any) bool {
		if e["type"] != typ {
			return false
		}
		for i := 0; i+1 < len(kv); i += 2 {
			want := kv[i+1]
			if n, ok := want.(int); ok {
				want = float64(n)
			}
			if e[kv[i].(string)] != want {
				return false
			}
		}
		return true
	}
}

// at returns the time of event e.
func at(t testing.TB, e map[string]any) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e["time"]))
	if err != nil {
		t.Fatalf("event time: %v", err)
	}
	return v
}

// eventPath returns an event's path as bytes: path_b64 when the name is not UTF-8.
func eventPath(t testing.TB, e map[string]any) string {
	t.Helper()
	if b, ok := e["path_b64"].(string); ok {
		d, err := base64.StdEncoding.DecodeString(b)
		if err != nil {
			t.Fatal(err)
		}
		return string(d)
	}
	p, _ := e["path"].(string)
	return p
}

// Statuses returns the chunk_end statuses in order.
func (r *Run) Statuses() []string {
	var out []string
	for _, e := range r.OfType("chunk_end") {
		out = append(out, fmt.Sprint(e["status"]))
	}
	return out
}

// PathFailed checks that the path_failed events are exactly want (path → status).
func (r *Run) PathFailed(t testing.TB, want map[string]string) {
	t.Helper()
	got := r.failedStatus(t)
	for p, st := range want {
		if got[p] != st {
			t.Errorf("path_failed %q: status %q, want %q", short(p), got[p], st)
		}
	}
	for p, st := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected path_failed %q (%s)", short(p), st)
		}
	}
}

// failedStatus returns the path_failed events' statuses by path; a path twice fails.
func (r *Run) failedStatus(t testing.TB) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, e := range r.OfType("path_failed") {
		p := fmt.Sprint(e["path"])
		if _, dup := got[p]; dup {
			t.Errorf("path_failed twice for %q", short(p))
		}
		got[p] = fmt.Sprint(e["status"])
	}
	return got
}

// ReasonsName checks that every path failed (not vanished, not not done) has a reason
// that says what rsync said or names the path.
func (r *Run) ReasonsName(t testing.TB) {
	t.Helper()
	for _, e := range r.OfType("path_failed") {
		reason, p := fmt.Sprint(e["reason"]), fmt.Sprint(e["path"])
		if e["status"] == "failed" && !strings.Contains(reason, "rsync") && !strings.Contains(reason, p) {
			t.Errorf("path_failed reason %q says neither what rsync said nor which path", reason)
		}
	}
}

// failedArg returns the --failed list the run was given (resolved against its working
// directory), and the input's separator (NUL with -0); "" without one.
func (r *Run) failedArg() (path string, sep byte) {
	sep = '\n'
	for i, a := range r.Args {
		switch {
		case a == "--":
			return path, sep
		case a == "-0" || a == "--null":
			sep = 0
		case a == "--failed" && i+1 < len(r.Args):
			path = r.Args[i+1]
		case strings.HasPrefix(a, "--failed="):
			path = strings.TrimPrefix(a, "--failed=")
		}
	}
	if path != "" && !filepath.IsAbs(path) && r.Dir != "" {
		path = filepath.Join(r.Dir, path)
	}
	return path, sep
}

// Failed returns the entries of the run's --failed list, which separates them as the input
// was (NUL with -0) and ends each with the separator; the test fails without the list.
func (r *Run) Failed(t testing.TB) []string {
	t.Helper()
	path, sep := r.failedArg()
	if path == "" {
		t.Fatalf("the run has no --failed list: %q", r.Args)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("--failed list: %v", err)
	}
	if len(b) == 0 {
		return nil
	}
	if b[len(b)-1] != sep {
		t.Errorf("--failed list does not end with the separator %q: %q", sep, short(string(b)))
	}
	return strings.Split(strings.TrimSuffix(string(b), string(sep)), string(sep))
}

// FailedAre checks that the run's --failed list holds want, each once, in any order.
func (r *Run) FailedAre(t testing.TB, want ...string) {
	t.Helper()
	sameSet(t, "--failed", r.Failed(t), want)
}

// DestHolds walks DEST after a run of rels (the input's paths, relative to the source src;
// dst is where they land): every path not in the --failed list is in dst as the source has
// it (landed), and exit 0 only if all are. With a summary, the accounting identity holds,
// the exit code is the summary's, and paths that were never read (a run cut short) make
// input_complete false; they are in no list, and not walked. It returns the paths of the
// list (with --sizes, the list holds the records as read: their paths).
func (r *Run) DestHolds(t testing.TB, src, dst string, rels []string) map[string]bool {
	t.Helper()
	if len(r.Events) > 0 {
		s := r.Summary(t)
		identity(t, s, -1)
		if int64(r.Code) != num(s, "exit_code") {
			t.Errorf("exit %d, summary exit_code %d", r.Code, num(s, "exit_code"))
		}
		if n := num(s, "files"); int(n) < len(rels) {
			if s["input_complete"] != false {
				t.Errorf("%d of %d paths read, but input_complete is not false", n, len(rels))
			}
			rels = rels[:n]
		}
	}
	failed := map[string]bool{}
	path, sep := r.failedArg()
	if b, err := os.ReadFile(path); path != "" && err == nil {
		for _, p := range strings.Split(string(b), string(sep)) {
			if _, after, ok := strings.Cut(p, "\t"); ok && slices.Contains(r.Args, "--sizes") {
				p = after
			}
			if p != "" {
				failed[p] = true
			}
		}
	}
	all := true
	for _, rel := range rels {
		ok := landed(src, dst, rel)
		all = all && ok
		if !ok && !failed[rel] {
			t.Errorf("%q is neither in --failed nor in DEST as in the source (exit %d)\nstderr:\n%s", rel, r.Code, r.Stderr)
		}
	}
	if r.Code == 0 && !all {
		t.Errorf("exit 0, but DEST does not hold every path")
	}
	return failed
}

// StderrLines returns the stderr lines starting with prefix.
func (r *Run) StderrLines(prefix string) []string {
	var out []string
	for _, l := range strings.Split(r.Stderr, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// OneError checks that stderr holds exactly one "prsync: error:" line, and a hint line
// when hint is set.
func (r *Run) OneError(t testing.TB, hint bool) {
	t.Helper()
	if n := len(r.StderrLines("prsync: error: ")); n != 1 {
		t.Errorf("want one `prsync: error:` line, got %d:\n%s", n, r.Stderr)
	}
	if hint && len(r.StderrLines("prsync: hint: ")) == 0 {
		t.Errorf("no `prsync: hint:` line:\n%s", r.Stderr)
	}
}

// Refused checks a run refused before it started: its exit code, nothing on stdout, one
// error line on stderr that names each of names.
func (r *Run) Refused(t testing.TB, code int, names ...string) {
	t.Helper()
	if r.Code != code {
		t.Errorf("exit %d, want %d; stderr:\n%s", r.Code, code, r.Stderr)
	}
	if r.Stdout != "" {
		t.Errorf("stdout %q", r.Stdout)
	}
	errs := r.StderrLines("prsync: error: ")
	if len(errs) != 1 {
		t.Fatalf("%d error lines, want 1; stderr:\n%s", len(errs), r.Stderr)
	}
	for _, n := range names {
		if !strings.Contains(errs[0], n) {
			t.Errorf("the error does not name %q: %s", n, errs[0])
		}
	}
}

// sameSet checks that got and want hold the same strings, the same number of times.
func sameSet(t testing.TB, what string, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("%s: got %q, want %q", what, shortAll(g), shortAll(w))
	}
}

// short shortens a long string (a 1 MB path) for a message.
func short(s string) string {
	if len(s) > 80 {
		return s[:40] + fmt.Sprintf("…(%d bytes)…", len(s)) + s[len(s)-20:]
	}
	return s
}

func shortAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = short(s)
	}
	return out
}

// truthRun copies rels from src to dest (a local DEST or a daemon URL) with listRun, and
// walks check, where the paths land (the local DEST, or the module's directory), as
// DestHolds does; it returns the run and the paths of its --failed list.
func truthRun(t testing.TB, src, dest, check string, rels []string, args ...string) (*Run, map[string]bool) {
	t.Helper()
	r := listRun(t, src, dest, rels, args...)
	return r, r.DestHolds(t, src, check, rels)
}

// CutShort checks the account of a run stopped before its end (a signal, the time window)
// against DEST, for the input's paths names: the --failed list and the path_failed events
// name the same paths, each not done or failed; every other path is in dst with src's
// bytes, but those never read (in the pipe when the run stopped), which are in neither;
// and no path in dst is a partial copy at its final name. It returns the path_failed
// events by path.
func (r *Run) CutShort(t testing.TB, src, dst string, names []string) map[string]map[string]any {
	t.Helper()
	s := r.Identity(t, -1)
	list := r.Failed(t)
	events := map[string]map[string]any{}
	for _, e := range r.OfType("path_failed") {
		events[fmt.Sprint(e["path"])] = e
	}
	sameSet(t, "--failed vs path_failed", list, slices.Collect(maps.Keys(events)))
	unaccounted := 0
	for _, n := range names {
		switch {
		case slices.Contains(list, n):
			if st := events[n]["status"]; st != "not_done" && st != "failed" {
				t.Errorf("%s: status %q, want not_done or failed", n, st)
			}
		case copied(src, dst, n):
		default:
			unaccounted++
		}
		if _, err := os.Lstat(filepath.Join(dst, n)); err == nil && !copied(src, dst, n) {
			t.Errorf("%s: a partial file at its final name", n)
		}
	}
	if want := len(names) - int(num(s, "files")); unaccounted != want {
		t.Errorf("%d paths neither copied nor in --failed, want %d (never read)", unaccounted, want)
	}
	return events
}
