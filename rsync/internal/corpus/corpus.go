// Package corpus loads the recorded runs of the real rsync (3.5.0) under fault
// conditions that live in rsync/testdata/corpus/*.txtar. Each file is one Case:
// the exact arguments and chunk list rsync was given, what it printed on stdout
// and stderr, its exit code, and the truth afterwards (for every list entry,
// whether it really landed in DEST).
//
// The files are written by TestRecordCorpus (PRSYNC_RECORD=1) and are test data
// for a pure parser that attributes rsync's output lines to the paths of a chunk.
//
// File format (txtar). The comment section holds "key: value" lines:
//
//	name: immutable-dir
//	what: local DEST directory sub/ is immutable (chattr +i)
//	form: push
//	exit: 23
//	user: nobody       (optional: rsync ran as uid/gid 65534 through setpriv)
//	env: K=V           (optional, repeatable: extra environment)
//	note: ...          (optional, repeatable)
//	leftover: "sub/.rsync-partial/f1"  (optional, repeatable: see Case.Leftovers)
//	noeol: stdout      (optional, repeatable: that section had no final newline)
//
// Sections: args (one argument per line, after the program name), list (the
// --files-from entries, each strconv.Quote'd), stdout, stderr, truth (one line per
// list entry: quoted entry TAB landed|missing|differs TAB src|nosrc), and for
// daemon cases rsyncd.conf and daemon.log (the daemon's log with the time stamp
// and PID prefix removed). Temporary paths are written as the placeholders
// $TMP, $SRC, $DST, $MOD, $HELPER and $URL; Expand substitutes them. Random parts
// of rsync's temp names (".f1.CZaxGm") are kept as rsync printed them.
//
// Every case ran /usr/bin/rsync 3.5.0 (Debian 3.5.0+ds1-0+deb12u1) as root (or as
// nobody where the case says so), with LC_ALL=C and no controlling terminal
// (setsid), the list NUL-terminated on stdin, and prsync's fixed arguments:
//
//	--archive [options] --files-from=- --from0 --out-format=%i|%l|%b|%n -- SRC DEST
//
// docs/rsync-messages.md explains the messages.
package corpus

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/txtar"
)

// Forms of a run.
const (
	Push       = "push"        // local copy: rsync SRC/ DEST/; the client is the sender
	Pull       = "pull"        // local copy through -e HELPER localhost:SRC/ DEST/; the client is the receiver
	DaemonPush = "daemon-push" // rsync SRC/ rsync://127.0.0.1:PORT/m/
	DaemonPull = "daemon-pull" // rsync rsync://127.0.0.1:PORT/m/ DEST/
)

// Forms lists the valid forms.
var Forms = []string{Push, Pull, DaemonPush, DaemonPull}

// State is what DEST holds for one entry after the run.
type State string

// States of an entry.
const (
	Landed  State = "landed"  // present with the source's type (and size, mtime, content, or link target)
	Missing State = "missing" // absent
	Differs State = "differs" // present but not equal to the source
)

// Truth is the real outcome for one list entry.
type Truth struct {
	Entry     string
	State     State
	SrcExists bool // the source still existed after the run
}

// Section names.
const (
	SecArgs      = "args"
	SecList      = "list"
	SecStdout    = "stdout"
	SecStderr    = "stderr"
	SecTruth     = "truth"
	SecConfig    = "rsyncd.conf"
	SecDaemonLog = "daemon.log"
)

// Case is one recorded rsync run.
type Case struct {
	File  string // base name of the file it was loaded from (empty if parsed from bytes)
	Name  string
	What  string
	Form  string
	Exit  int
	User  string   // "" (root) or "nobody"
	Env   []string // extra environment, K=V
	Notes []string
	// Leftovers are the paths (relative to DEST or the module dir) that DEST held
	// after the run and that are neither a list entry nor a parent of one: temp
	// files, partial dirs, and what the scenario planted there.
	Leftovers []string
	// Meta holds any other comment keys.
	Meta map[string]string

	Args   []string
	List   []string
	Stdout string
	Stderr string
	Truth  []Truth

	Config    string // rsyncd.conf (daemon forms)
	DaemonLog string // the daemon's log, prefixes stripped (daemon forms)
}

// Daemon reports whether the case ran against an rsync daemon.
func (c Case) Daemon() bool { return c.Form == DaemonPush || c.Form == DaemonPull }

// TruthOf returns the truth line for entry.
func (c Case) TruthOf(entry string) (Truth, bool) {
	for _, t := range c.Truth {
		if t.Entry == entry {
			return t, true
		}
	}
	return Truth{}, false
}

// StdoutLines splits stdout into lines without their "\n".
func (c Case) StdoutLines() []string { return lines(c.Stdout) }

// StderrLines splits stderr into lines without their "\n".
func (c Case) StderrLines() []string { return lines(c.Stderr) }

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// Load parses every *.txtar file in dir, sorted by file name.
func Load(dir string) ([]Case, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var cases []Case
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		c, err := Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		c.File = filepath.Base(n)
		cases = append(cases, c)
	}
	return cases, nil
}

// Parse parses one case file and checks that it is well-formed.
func Parse(data []byte) (Case, error) {
	ar := txtar.Parse(data)
	c := Case{Meta: map[string]string{}}
	noeol := map[string]bool{}
	haveExit := false
	for i, ln := range strings.Split(string(ar.Comment), "\n") {
		if strings.TrimSpace(ln) == "" {
			continue
		}
		k, v, ok := strings.Cut(ln, ":")
		if !ok {
			return c, fmt.Errorf("comment line %d: no key: %q", i+1, ln)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "name":
			c.Name = v
		case "what":
			c.What = v
		case "form":
			c.Form = v
		case "exit":
			n, err := strconv.Atoi(v)
			if err != nil {
				return c, fmt.Errorf("exit: %w", err)
			}
			c.Exit, haveExit = n, true
		case "user":
			c.User = v
		case "env":
			c.Env = append(c.Env, v)
		case "note":
			c.Notes = append(c.Notes, v)
		case "noeol":
			noeol[v] = true
		case "leftover":
			l, err := strconv.Unquote(v)
			if err != nil {
				return c, fmt.Errorf("leftover %s: %w", v, err)
			}
			c.Leftovers = append(c.Leftovers, l)
		default:
			if _, dup := c.Meta[k]; dup {
				return c, fmt.Errorf("duplicate key %q", k)
			}
			c.Meta[k] = v
		}
	}
	if c.Name == "" {
		return c, fmt.Errorf("no name")
	}
	if !haveExit {
		return c, fmt.Errorf("%s: no exit", c.Name)
	}
	if !validForm(c.Form) {
		return c, fmt.Errorf("%s: bad form %q", c.Name, c.Form)
	}
	secs := map[string]string{}
	for _, f := range ar.Files {
		if _, dup := secs[f.Name]; dup {
			return c, fmt.Errorf("%s: duplicate section %q", c.Name, f.Name)
		}
		d := string(f.Data)
		if noeol[f.Name] {
			if !strings.HasSuffix(d, "\n") {
				return c, fmt.Errorf("%s: noeol %s but no newline to remove", c.Name, f.Name)
			}
			d = strings.TrimSuffix(d, "\n")
		}
		secs[f.Name] = d
	}
	for _, s := range []string{SecArgs, SecList, SecStdout, SecStderr, SecTruth} {
		if _, ok := secs[s]; !ok {
			return c, fmt.Errorf("%s: no %s section", c.Name, s)
		}
	}
	for name := range secs {
		switch name {
		case SecArgs, SecList, SecStdout, SecStderr, SecTruth, SecConfig, SecDaemonLog:
		default:
			return c, fmt.Errorf("%s: unknown section %q", c.Name, name)
		}
	}
	c.Args = lines(secs[SecArgs])
	if len(c.Args) == 0 {
		return c, fmt.Errorf("%s: empty args", c.Name)
	}
	for i, ln := range lines(secs[SecList]) {
		e, err := strconv.Unquote(ln)
		if err != nil {
			return c, fmt.Errorf("%s: list line %d: %w", c.Name, i+1, err)
		}
		c.List = append(c.List, e)
	}
	c.Stdout, c.Stderr = secs[SecStdout], secs[SecStderr]
	c.Config, c.DaemonLog = secs[SecConfig], secs[SecDaemonLog]
	for i, ln := range lines(secs[SecTruth]) {
		f := strings.Split(ln, "\t")
		if len(f) != 3 {
			return c, fmt.Errorf("%s: truth line %d: want 3 tab-separated fields: %q", c.Name, i+1, ln)
		}
		e, err := strconv.Unquote(f[0])
		if err != nil {
			return c, fmt.Errorf("%s: truth line %d: %w", c.Name, i+1, err)
		}
		t := Truth{Entry: e, State: State(f[1])}
		switch t.State {
		case Landed, Missing, Differs:
		default:
			return c, fmt.Errorf("%s: truth line %d: bad state %q", c.Name, i+1, f[1])
		}
		switch f[2] {
		case "src":
			t.SrcExists = true
		case "nosrc":
		default:
			return c, fmt.Errorf("%s: truth line %d: bad source state %q", c.Name, i+1, f[2])
		}
		c.Truth = append(c.Truth, t)
	}
	if len(c.Truth) != len(c.List) {
		return c, fmt.Errorf("%s: %d list entries but %d truth lines", c.Name, len(c.List), len(c.Truth))
	}
	for i := range c.List {
		if c.Truth[i].Entry != c.List[i] {
			return c, fmt.Errorf("%s: truth line %d is for %q, list entry is %q", c.Name, i+1, c.Truth[i].Entry, c.List[i])
		}
	}
	return c, nil
}

func validForm(f string) bool {
	for _, v := range Forms {
		if f == v {
			return true
		}
	}
	return false
}

// Marshal writes the case in the file format Parse reads.
func (c Case) Marshal() ([]byte, error) {
	var cm bytes.Buffer
	kv := func(k, v string) {
		if strings.ContainsAny(v, "\n") {
			v = strings.ReplaceAll(v, "\n", " ")
		}
		fmt.Fprintf(&cm, "%s: %s\n", k, v)
	}
	kv("name", c.Name)
	kv("what", c.What)
	kv("form", c.Form)
	kv("exit", strconv.Itoa(c.Exit))
	if c.User != "" {
		kv("user", c.User)
	}
	for _, e := range c.Env {
		kv("env", e)
	}
	for _, n := range c.Notes {
		kv("note", n)
	}
	for _, l := range c.Leftovers {
		kv("leftover", strconv.Quote(l))
	}
	keys := make([]string, 0, len(c.Meta))
	for k := range c.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kv(k, c.Meta[k])
	}
	var list, truth strings.Builder
	for _, e := range c.List {
		list.WriteString(strconv.Quote(e) + "\n")
	}
	for _, t := range c.Truth {
		src := "nosrc"
		if t.SrcExists {
			src = "src"
		}
		fmt.Fprintf(&truth, "%s\t%s\t%s\n", strconv.Quote(t.Entry), t.State, src)
	}
	secs := []struct{ name, data string }{
		{SecArgs, strings.Join(c.Args, "\n")},
		{SecList, list.String()},
		{SecStdout, c.Stdout},
		{SecStderr, c.Stderr},
		{SecTruth, truth.String()},
	}
	if c.Daemon() || c.Config != "" {
		secs = append(secs, struct{ name, data string }{SecConfig, c.Config})
	}
	if c.Daemon() || c.DaemonLog != "" {
		secs = append(secs, struct{ name, data string }{SecDaemonLog, c.DaemonLog})
	}
	ar := &txtar.Archive{}
	var noeol []string
	for _, s := range secs {
		for _, a := range c.Args {
			if strings.Contains(a, "\n") {
				return nil, fmt.Errorf("%s: argument with a newline: %q", c.Name, a)
			}
		}
		if isMarker(s.data) {
			return nil, fmt.Errorf("%s: section %s has a line that looks like a txtar marker", c.Name, s.name)
		}
		d := s.data
		if d != "" && !strings.HasSuffix(d, "\n") {
			if s.name != SecArgs {
				noeol = append(noeol, s.name)
			}
			d += "\n"
		}
		ar.Files = append(ar.Files, txtar.File{Name: s.name, Data: []byte(d)})
	}
	for _, n := range noeol {
		kv("noeol", n)
	}
	ar.Comment = cm.Bytes()
	return txtar.Format(ar), nil
}

var markerRE = regexp.MustCompile(`(?m)^-- .* --$`)

func isMarker(s string) bool { return markerRE.MatchString(s) }

var placeholderRE = regexp.MustCompile(`\$[A-Z]+`)

// Expand returns a copy of c with the placeholders ($SRC, $DST, $MOD, $TMP, $HELPER,
// $URL, ...) in Args, Stdout, Stderr, Config and DaemonLog replaced by vars[NAME].
// A placeholder is a '$' followed by the longest run of upper-case letters;
// those without a value in vars are left as they are.
func (c Case) Expand(vars map[string]string) Case {
	ex := func(s string) string {
		return placeholderRE.ReplaceAllStringFunc(s, func(m string) string {
			if v, ok := vars[m[1:]]; ok {
				return v
			}
			return m
		})
	}
	out := c
	out.Args = make([]string, len(c.Args))
	for i, a := range c.Args {
		out.Args[i] = ex(a)
	}
	out.Stdout, out.Stderr = ex(c.Stdout), ex(c.Stderr)
	out.Config, out.DaemonLog = ex(c.Config), ex(c.DaemonLog)
	return out
}

// Collapse is the inverse of Expand for recording: every occurrence of a value of
// vars in s is replaced by "$"+its name, the longest values first (so a module
// path inside the temporary directory becomes $MOD, not $TMP/mod). Empty values
// are ignored.
func Collapse(s string, vars map[string]string) string {
	type kv struct{ k, v string }
	var pairs []kv
	for k, v := range vars {
		if v != "" {
			pairs = append(pairs, kv{k, v})
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if len(pairs[i].v) != len(pairs[j].v) {
			return len(pairs[i].v) > len(pairs[j].v)
		}
		return pairs[i].k < pairs[j].k
	})
	// Replace in one pass over s so a replacement is never matched again.
	var b strings.Builder
	for i := 0; i < len(s); {
		matched := false
		for _, p := range pairs {
			if strings.HasPrefix(s[i:], p.v) {
				b.WriteString("$" + p.k)
				i += len(p.v)
				matched = true
				break
			}
		}
		if !matched {
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}
