package tests

// README.md's Set-up, Install and Examples sections, run: every command in their code
// blocks has a row in readmeChecks, which says how it is checked. Most run here, with the
// hosts and paths of the examples mapped to ones the test makes (readmePlaces), and DEST is
// walked afterwards; the rest name the check that covers them, and why not here. A command
// the README gains without a row fails the test, and so does a row whose command the README
// no longer has. make readme-check runs it alone.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeSections are the sections whose every command is checked.
var readmeSections = []string{"Set-up", "Install", "Examples"}

// readmeEnv is what the README's commands run in: the repository (Set-up and Install run
// there, as from a clone) and a work directory (the examples' working directory, and the
// root of every path they name).
type readmeEnv struct {
	repo, w string
	bindir  string   // on PATH first: prsync, the race-built one
	env     []string // added for every command
	places  []readmePlace
}

// readmePlace maps a host or path of the README, which does not exist here, to the test's.
type readmePlace struct{ from, to, why string }

// readmeCheck is how one README command is checked: run (by == "") or covered elsewhere.
type readmeCheck struct {
	section string
	cmd     string // as in the README, its trailing comment cut
	by      string // the check that covers it instead, and why it is not run here
	setup   func(t *testing.T, e *readmeEnv)
	code    int // the exit status the command must end with
	check   func(t *testing.T, e *readmeEnv, out string)
}

// readmeChecks has a row for every command of readmeSections, in the README's order.
var readmeChecks = []readmeCheck{
	{section: "Set-up", cmd: "make demo", check: func(t *testing.T, e *readmeEnv, out string) {
		if !strings.Contains(out, "demo: the copy is identical (diff -r)") {
			t.Errorf("make demo did not say the copy is identical:\n%s", out)
		}
	}},
	{section: "Set-up", cmd: "make test",
		by: ".ci/run, which is make test; make test runs this test, so it is not run from inside it"},
	{section: "Install", cmd: "make build", check: func(t *testing.T, e *readmeEnv, out string) {
		readmeVersion(t, filepath.Join(e.repo, "prsync"))
	}},
	{section: "Install", cmd: "go install .", check: func(t *testing.T, e *readmeEnv, out string) {
		readmeVersion(t, filepath.Join(e.w, "gobin", "prsync")) // GOBIN: see readmeRun
	}},
	{section: "Install", cmd: "go build", check: func(t *testing.T, e *readmeEnv, out string) {
		readmeVersion(t, filepath.Join(e.repo, "prsync"))
	}},
	{section: "Install", cmd: "make release",
		by: "scripts/release-test.sh (make test as root, with rpm: CI): it runs make release; goreleaser takes minutes and is installed by it"},
	{section: "Install", cmd: "sudo apt install ./dist/prsync_*_amd64.deb",
		by: "scripts/release-test.sh via scripts/deb-test.sh PACKAGE (as root: CI): apt install of the snapshot's .deb, prsync --version, man prsync, then dpkg --purge"},

	{section: "Examples", cmd: "find /var/lib/cassandra -type f -print0 | prsync -0 -j 8 /mnt/backup/",
		check: func(t *testing.T, e *readmeEnv, out string) {
			// paths land under /mnt/backup/var/lib/cassandra/…
			readmeHolds(t, e.p("var/lib/cassandra"), filepath.Join(e.p("mnt/backup"), e.p("var/lib/cassandra")))
		}},
	{section: "Examples", cmd: "find /var/lib/cassandra -type f -print0 | prsync -0 --root /var/lib/cassandra /mnt/backup/",
		check: func(t *testing.T, e *readmeEnv, out string) {
			// /var/lib/cassandra/data/ks/t/x.db lands in /mnt/backup/data/ks/t/x.db
			readmeHolds(t, e.p("var/lib/cassandra"), e.p("mnt/backup"))
			if _, err := os.Stat(e.p("mnt/backup/data/ks/t/x.db")); err != nil {
				t.Error(err)
			}
		}},
	{section: "Examples", cmd: "cd /data && find . -type f | prsync /mnt/backup/",
		check: func(t *testing.T, e *readmeEnv, out string) { readmeHolds(t, e.p("data"), e.p("mnt/backup")) }},
	{section: "Examples", cmd: "find /data -type f -print0 | prsync -0 -C /data backup1:/srv/backup/data/",
		setup: func(t *testing.T, e *readmeEnv) {
			cfg, _ := startSSHD(t, "") // skips without root or sshd; CI installs it
			b, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			alias := filepath.Join(e.w, "ssh_config")
			if err := os.WriteFile(alias, []byte(strings.Replace(string(b), "Host h0 h1", "Host backup1", 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			e.env = append(e.env, "RSYNC_RSH=ssh -F "+alias)
		},
		check: func(t *testing.T, e *readmeEnv, out string) { sameTree(t, e.p("data"), e.p("srv/backup/data")) }},
	{section: "Examples", cmd: "find /data -type f -print0 | prsync -0 -C /data rsync://backup1/backups/data/",
		check: func(t *testing.T, e *readmeEnv, out string) { sameTree(t, e.p("data"), e.p("daemon/data")) }},
	{section: "Examples", cmd: "find /data -type f -print0 | prsync -0 -C /data /mnt/backup/ -- --bwlimit=50m --hard-links",
		check: func(t *testing.T, e *readmeEnv, out string) {
			readmeHolds(t, e.p("data"), e.p("mnt/backup"))
			a, errA := os.Stat(e.p("mnt/backup/links/a"))
			b, errB := os.Stat(e.p("mnt/backup/links/b"))
			if errA != nil || errB != nil || !os.SameFile(a, b) {
				t.Errorf("--hard-links: links/a and links/b are not one file in DEST (%v, %v)", errA, errB)
			}
		}},
	{section: "Examples", cmd: "find /data -type f -print0 | prsync -0 -C /data --failed failed.list /mnt/backup/ > events.jsonl",
		setup: func(t *testing.T, e *readmeEnv) {
			// a failure: DEST holds a non-empty directory where the source has the file one
			os.Remove(e.p("mnt/backup/one"))
			writeFile(t, e.p("mnt/backup/one/in-the-way"), "x", 0o644)
		},
		code: 23,
		check: func(t *testing.T, e *readmeEnv, out string) {
			// the input's path, as read
			if b, err := os.ReadFile(e.p("failed.list")); err != nil || string(b) != e.p("data/one")+"\x00" {
				t.Errorf("failed.list: %q, %v; want %s\\0", b, err, e.p("data/one"))
			}
			if b, err := os.ReadFile(e.p("events.jsonl")); err != nil || !strings.Contains(string(b), `"type":"summary"`) {
				t.Errorf("events.jsonl has no summary: %v\n%s", err, b)
			}
		}},
	{section: "Examples", cmd: "prsync -0 -C /data /mnt/backup/ < failed.list",
		setup: func(t *testing.T, e *readmeEnv) {
			// fix the cause
			if err := os.RemoveAll(e.p("mnt/backup/one")); err != nil {
				t.Fatal(err)
			}
		},
		check: func(t *testing.T, e *readmeEnv, out string) {
			readmeHolds(t, e.p("data"), e.p("mnt/backup"))
			s := parseEvents(t, []byte(out))
			if len(s) == 0 || s[len(s)-1]["type"] != "summary" || num(s[len(s)-1], "files_transferred") != 1 {
				t.Errorf("the re-run of failed.list did not copy just the one path:\n%s", out)
			}
		}},
	{section: "Examples", cmd: `find /data -type f -print0 | prsync -0 -C /data /mnt/backup/ | jq -c 'select(.type=="summary")'`,
		setup: func(t *testing.T, e *readmeEnv) { needProg(t, "jq", "jq") },
		check: func(t *testing.T, e *readmeEnv, out string) {
			var s map[string]any
			if err := json.Unmarshal([]byte(out), &s); err != nil || s["type"] != "summary" || strings.Count(strings.TrimSpace(out), "\n") != 0 {
				t.Fatalf("jq printed %q (%v), want the summary on one line", out, err)
			}
			if num(s, "files") != int64(len(readmeData)) || num(s, "exit_code") != 0 {
				t.Errorf("summary: %v", s)
			}
		}},
}

// readmeData is the tree at /data (the work directory's data/); one and links/ are for the
// --failed and --hard-links examples.
var readmeData = map[string]string{"one": "one\n", "sub/two": "two\n", "sub/deeper/three": "three\n",
	"with space": "a name with a space\n", "links/a": "linked\n", "links/b": ""}

// p returns the work directory's path for one of the README's paths, without the leading /.
func (e *readmeEnv) p(rel string) string { return filepath.Join(e.w, rel) }

func TestReadme(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeCommands(t, string(readme))
	rows := map[string]*readmeCheck{}
	for i := range readmeChecks {
		rows[readmeChecks[i].section+"\x00"+readmeChecks[i].cmd] = &readmeChecks[i]
	}
	seen := map[string]bool{}
	for _, c := range cmds {
		k := c.section + "\x00" + c.cmd
		if rows[k] == nil {
			t.Errorf("README.md, %s: %q has no row in readmeChecks (tests/readme_test.go): say how it is checked", c.section, c.cmd)
		}
		seen[k] = true
	}
	for k, r := range rows {
		if !seen[k] {
			t.Errorf("readmeChecks has a row for %q in %s, which README.md no longer has", r.cmd, r.section)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	e := &readmeEnv{repo: repo, w: t.TempDir()}
	e.bindir = filepath.Join(e.w, "bin")
	if err := os.Mkdir(e.bindir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin(t), filepath.Join(e.bindir, "prsync")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"data/x.db", "data/ks/t/x.db", "data/ks/t/y.db", "commitlog/c1.log"} {
		writeFile(t, e.p("var/lib/cassandra/"+f), "cassandra "+f+"\n", 0o644)
	}
	for name, data := range readmeData {
		if name != "links/b" {
			writeFile(t, e.p("data/"+name), data, 0o644)
		}
	}
	if err := os.Link(e.p("data/links/a"), e.p("data/links/b")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"mnt/backup", "daemon"} {
		if err := os.MkdirAll(e.p(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, e.p("daemon"))
	// the longest first: rsync://backup1/backups/ before backup1:, which it does not contain
	e.places = []readmePlace{
		{"rsync://backup1/backups/", d.URL(), "an rsync --daemon on 127.0.0.1 started by the test (its module mod is daemon/)"},
		{"backup1:/srv/backup/", "backup1:" + e.p("srv/backup") + "/", "backup1 is an alias of an sshd on 127.0.0.1 started by the test (RSYNC_RSH=ssh -F its config)"},
		{"/var/lib/cassandra", e.p("var/lib/cassandra"), "a small tree made by the test"},
		{"/mnt/backup/", e.p("mnt/backup") + "/", "an empty directory"},
		{"/data", e.p("data"), "a small tree made by the test, with a hard-linked pair"},
	}

	for _, c := range cmds {
		r := rows[c.section+"\x00"+c.cmd]
		t.Run(c.section+": "+c.cmd, func(t *testing.T) {
			if r.by != "" {
				t.Logf("covered by %s", r.by)
				return
			}
			saved := e.env
			defer func() { e.env = saved }()
			if r.setup != nil {
				r.setup(t, e)
			}
			out := readmeRun(t, e, c)
			if r.check != nil {
				r.check(t, e, out)
			}
		})
	}
}

// readmeCommand is one command of the README: its section, and its text with the
// trailing comment cut.
type readmeCommand struct{ section, cmd string }

// readmeCommands returns the commands of readmeSections' code blocks (fenced, or indented
// by four spaces), in order: comment lines and blank lines dropped, a trailing comment cut,
// a line ending in \ joined with the next.
func readmeCommands(t *testing.T, md string) []readmeCommand {
	t.Helper()
	var out []readmeCommand
	section, fenced, cont := "", false, ""
	found := map[string]bool{}
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if !fenced && strings.HasPrefix(l, "## ") {
			section = ""
			for _, s := range readmeSections {
				if strings.TrimPrefix(l, "## ") == s {
					section, found[s] = s, true
				}
			}
			continue
		}
		if section == "" {
			continue
		}
		var code string
		switch {
		case fenced:
			code = l
		case strings.HasPrefix(l, "    "):
			code = l[4:]
		default:
			continue
		}
		code = cont + strings.TrimSpace(shellCutComment(code))
		cont = ""
		if strings.HasSuffix(code, `\`) {
			cont = strings.TrimSuffix(code, `\`)
			continue
		}
		if code != "" {
			out = append(out, readmeCommand{section, code})
		}
	}
	for _, s := range readmeSections {
		if !found[s] {
			t.Errorf("README.md has no section ## %s", s)
		}
	}
	return out
}

// shellCutComment cuts a shell comment off a line: a # that begins a word, outside quotes.
func shellCutComment(l string) string {
	var quote byte
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' {
				i++
			}
		case c == '\\':
			i++
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return l[:i]
		}
	}
	return l
}

// readmeMap puts the test's hosts and paths in place of the README's: each place at the
// start of a word, and, unless it ends in /, followed by /, a space or the end.
func readmeMap(t *testing.T, e *readmeEnv, cmd string) string {
	t.Helper()
	for _, p := range e.places {
		end := `(/|\s|$)`
		if strings.HasSuffix(p.from, "/") {
			end = `()`
		}
		re := regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(p.from) + end)
		cmd = re.ReplaceAllStringFunc(cmd, func(m string) string {
			sub := re.FindStringSubmatch(m)
			return sub[1] + p.to + sub[2]
		})
	}
	// an absolute path the README gains is not run as it is: it would touch this machine
	for _, w := range strings.Fields(cmd) {
		w = strings.TrimLeft(w, `<>'"`)
		if strings.HasPrefix(w, "/") && !strings.HasPrefix(w, e.w+"/") && w != e.w {
			t.Fatalf("%q names %s, which readmePlaces does not map to the test's own", cmd, w)
		}
	}
	return cmd
}

// readmeRun runs one command with bash (pipefail, so that find failing fails it too), the
// examples in the work directory with the README's places mapped and the race-built prsync
// first on PATH, Set-up and Install in the repository; go install's GOBIN is the work
// directory's gobin/, not the user's. It returns stdout and checks the exit status.
func readmeRun(t *testing.T, e *readmeEnv, c readmeCommand) string {
	t.Helper()
	r := readmeRowOf(c)
	cmd, dir := c.cmd, e.repo
	env := cleanEnv(append([]string{"GOBIN=" + filepath.Join(e.w, "gobin"), "TMPDIR=" + t.TempDir()}, e.env...)...)
	if c.section == "Examples" {
		cmd, dir = readmeMap(t, e, c.cmd), e.w
		for i, kv := range env {
			if p, ok := strings.CutPrefix(kv, "PATH="); ok {
				env[i] = "PATH=" + e.bindir + ":" + p
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // make demo builds prsync: minutes on a busy machine
	defer cancel()
	x := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", cmd)
	x.Dir, x.Env = dir, env
	x.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	x.Cancel = func() error { return syscall.Kill(-x.Process.Pid, syscall.SIGKILL) } // its own group only
	var stderr lockedBuf
	x.Stderr = &stderr
	start := time.Now()
	out, err := x.Output()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%s: %v", cmd, err)
		}
		code = ee.ExitCode()
	}
	t.Logf("ran %s (%.1f s, exit %d)", cmd, time.Since(start).Seconds(), code)
	if code != r.code {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", cmd, code, r.code, out, stderr.String())
	}
	return string(out)
}

func readmeRowOf(c readmeCommand) *readmeCheck {
	for i := range readmeChecks {
		if readmeChecks[i].section == c.section && readmeChecks[i].cmd == c.cmd {
			return &readmeChecks[i]
		}
	}
	panic(fmt.Sprintf("no row for %q", c.cmd))
}

// readmeHolds fails the test unless dst holds every file of src as src has it.
func readmeHolds(t *testing.T, src, dst string) {
	t.Helper()
	a, b := snapshot(t, src), snapshot(t, dst)
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s: %q is %q, want %q", dst, k, b[k], v)
		}
	}
}

// readmeVersion runs a built prsync's --version.
func readmeVersion(t *testing.T, p string) {
	t.Helper()
	out, err := exec.Command(p, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "prsync ") || !strings.Contains(string(out), "needs rsync") {
		t.Errorf("%s --version: %v\n%s", p, err, out)
	}
}
