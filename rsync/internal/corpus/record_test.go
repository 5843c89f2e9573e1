//go:build unix

package corpus

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// corpusDir is where the recorded cases live, relative to this package.
var corpusDir = filepath.Join("..", "..", "testdata", "corpus")

// outFormat is prsync's --out-format.
const outFormat = "%i|%l|%b|%n"

// TestLoadCorpus loads the committed corpus and checks that every case is well-formed.
func TestLoadCorpus(t *testing.T) {
	cases, err := Load(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("no cases in %s", corpusDir)
	}
	seen := map[string]bool{}
	forms := map[string]int{}
	codes := map[int]int{}
	tmpRE := regexp.MustCompile(`/tmp/prsync-corpus-|rsync://127\.0\.0\.1:\d`)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if want := c.Name + ".txtar"; c.File != want {
				t.Errorf("file %s holds case %q", c.File, c.Name)
			}
			if seen[c.Name] {
				t.Errorf("duplicate case name %q", c.Name)
			}
			seen[c.Name] = true
			forms[c.Form]++
			codes[c.Exit]++
			if c.What == "" {
				t.Error("no what")
			}
			if c.Exit < 0 || c.Exit > 255 {
				t.Errorf("exit %d", c.Exit)
			}
			if c.User != "" && c.User != "nobody" {
				t.Errorf("user %q", c.User)
			}
			if c.Daemon() && c.Config == "" {
				t.Error("daemon case without rsyncd.conf")
			}
			// The fixed part of prsync's command line, then "--", SRC, DEST.
			if c.Args[0] != "--archive" {
				t.Errorf("args[0] = %q", c.Args[0])
			}
			n := len(c.Args)
			if n < 7 || c.Args[n-3] != "--" {
				t.Fatalf("args do not end in -- SRC DEST: %q", c.Args)
			}
			for _, want := range []string{"--files-from=-", "--from0", "--out-format=" + outFormat} {
				if !slices.Contains(c.Args[:n-3], want) {
					t.Errorf("args lack %s", want)
				}
			}
			src, dst := c.Args[n-2], c.Args[n-1]
			var wantSrc, wantDst string
			switch c.Form {
			case Push:
				wantSrc, wantDst = "$SRC/", "$DST/"
			case Pull:
				wantSrc, wantDst = "localhost:$SRC/", "$DST/"
				if i := slices.Index(c.Args, "-e"); i < 0 || c.Args[i+1] != "$HELPER" {
					t.Errorf("pull form without -e $HELPER: %q", c.Args)
				}
			case DaemonPush:
				wantSrc, wantDst = "$SRC/", "$URL"
			case DaemonPull:
				wantSrc, wantDst = "$URL", "$DST/"
			}
			if src != wantSrc || dst != wantDst {
				t.Errorf("SRC DEST = %q %q, want %q %q", src, dst, wantSrc, wantDst)
			}
			for _, sec := range []struct{ name, s string }{
				{"args", strings.Join(c.Args, "\n")}, {"stdout", c.Stdout}, {"stderr", c.Stderr},
				{"rsyncd.conf", c.Config}, {"daemon.log", c.DaemonLog},
			} {
				if loc := tmpRE.FindStringIndex(sec.s); loc != nil {
					t.Errorf("%s: temporary path or URL not replaced by a placeholder: %q", sec.name, sec.s[loc[0]:min(len(sec.s), loc[1]+30)])
				}
			}
			if c.Exit != 0 && c.Stderr == "" {
				t.Errorf("exit %d with an empty stderr", c.Exit)
			}
			if c.Exit == 0 {
				for _, tr := range c.Truth {
					if tr.State != Landed {
						// Real: comment entries, skipped devices, munged daemon symlinks.
						t.Logf("exit 0 but %q %s", tr.Entry, tr.State)
					}
				}
			}
			// Marshal round-trips.
			data, err := os.ReadFile(filepath.Join(corpusDir, c.File))
			if err != nil {
				t.Fatal(err)
			}
			re, err := c.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(re, data) {
				t.Errorf("Marshal does not reproduce the file:\n%s", re)
			}
			ex := c.Expand(map[string]string{"SRC": "/s", "DST": "/d", "URL": "rsync://h/m/", "HELPER": "/h", "TMP": "/t", "MOD": "/m"})
			if strings.Contains(strings.Join(ex.Args, " "), "$SRC") || strings.Contains(ex.Stdout+ex.Stderr, "$DST") {
				t.Error("Expand left placeholders")
			}
		})
	}
	t.Logf("%d cases; forms %v; exit codes %v", len(cases), forms, codes)
}

func TestCollapseExpand(t *testing.T) {
	vars := map[string]string{"TMP": "/tmp/x", "MOD": "/tmp/x/mod", "SRC": "/tmp/x/src", "URL": "rsync://127.0.0.1:999/m/"}
	in := `rsync: mkstemp "/tmp/x/mod/.f.AbCdEf" failed; /tmp/x/src/a and /tmp/x/other, rsync://127.0.0.1:999/m/`
	got := Collapse(in, vars)
	want := `rsync: mkstemp "$MOD/.f.AbCdEf" failed; $SRC/a and $TMP/other, $URL`
	if got != want {
		t.Fatalf("Collapse = %q, want %q", got, want)
	}
	c := Case{Stderr: got, Args: []string{"$SRC/", "$URL", "$NOPE"}}
	e := c.Expand(vars)
	if e.Stderr != in || e.Args[2] != "$NOPE" || e.Args[1] != vars["URL"] {
		t.Fatalf("Expand = %q %q", e.Stderr, e.Args)
	}
}

func TestParseErrors(t *testing.T) {
	good := "name: x\nwhat: w\nform: push\nexit: 0\n-- args --\n--archive\n-- list --\n\"a\"\n-- stdout --\n-- stderr --\n-- truth --\n\"a\"\tlanded\tsrc\n"
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatalf("good case: %v", err)
	}
	for name, bad := range map[string]string{
		"no exit":      strings.Replace(good, "exit: 0\n", "", 1),
		"bad exit":     strings.Replace(good, "exit: 0", "exit: x", 1),
		"bad form":     strings.Replace(good, "form: push", "form: sideways", 1),
		"no truth":     strings.Replace(good, "\"a\"\tlanded\tsrc\n", "", 1),
		"wrong entry":  strings.Replace(good, "\"a\"\tlanded", "\"b\"\tlanded", 1),
		"bad state":    strings.Replace(good, "landed", "arrived", 1),
		"bad src":      strings.Replace(good, "\tsrc\n", "\tmaybe\n", 1),
		"unquoted":     strings.Replace(good, "-- list --\n\"a\"", "-- list --\na", 1),
		"no stderr":    strings.Replace(good, "-- stderr --\n", "", 1),
		"odd section":  good + "-- extra --\n",
		"comment form": strings.Replace(good, "what: w", "what w", 1),
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// ---------------------------------------------------------------------------
// The recorder.

const (
	nobodyUID = 65534
	nobodyGID = 65534
	// baseTime is about the mtime of the source files (2021-03-04 05:06:07 UTC, see mtimeOf).
	baseTime = 1614834367
	// oldTime is the mtime of the stale DEST files the scenarios plant.
	oldTime = 1500000000
)

// spec is one source (or DEST) tree entry.
type spec struct {
	path   string
	kind   byte // 'f' file, 'd' dir, 'l' symlink, 'h' hard link to target, 'p' fifo, 'c' char device
	size   int
	mode   os.FileMode
	target string
	mtime  int64 // 0: baseTime + index
	data   []byte
}

func f(p string, size int) spec { return spec{path: p, kind: 'f', size: size, mode: 0o644} }
func fmode(p string, size int, m os.FileMode) spec {
	return spec{path: p, kind: 'f', size: size, mode: m}
}
func dir(p string) spec              { return spec{path: p, kind: 'd', mode: 0o755} }
func symlink(p, target string) spec  { return spec{path: p, kind: 'l', target: target} }
func hardlink(p, target string) spec { return spec{path: p, kind: 'h', target: target} }
func fifo(p string) spec             { return spec{path: p, kind: 'p', mode: 0o644} }

// old is a stale DEST version of p: different size and contents, old mtime.
func old(p string, size int) spec {
	return spec{path: p, kind: 'f', size: size, mode: 0o644, mtime: oldTime, data: []byte(strings.Repeat("stale "+p+"\n", size/(len(p)+7)+1))[:size]}
}

// content is the deterministic content of a source file.
func content(p string, size int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "%s line %d\n", strconv.Quote(p), i)
	}
	return b.Bytes()[:size]
}

// build creates specs under root; the files get fixed mtimes.
func build(root string, specs []spec) error {
	for _, s := range specs {
		p := filepath.Join(root, s.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mt := s.mtime
		if mt == 0 {
			mt = mtimeOf(s.path)
		}
		switch s.kind {
		case 'f':
			data := s.data
			if data == nil {
				data = content(s.path, s.size)
			}
			if err := os.WriteFile(p, data, s.mode); err != nil {
				return err
			}
			if err := os.Chmod(p, s.mode); err != nil {
				return err
			}
		case 'd':
			if err := os.MkdirAll(p, s.mode); err != nil {
				return err
			}
			if err := os.Chmod(p, s.mode); err != nil {
				return err
			}
		case 'l':
			if err := os.Symlink(s.target, p); err != nil {
				return err
			}
		case 'h':
			if err := os.Link(filepath.Join(root, s.target), p); err != nil {
				return err
			}
			continue
		case 'p':
			if err := syscall.Mkfifo(p, uint32(s.mode)); err != nil {
				return err
			}
		case 'c':
			if err := syscall.Mknod(p, syscall.S_IFCHR|0o644, int((1<<8)|3)); err != nil {
				return err
			}
		}
		if err := lutimes(p, mt); err != nil {
			return err
		}
	}
	// Directories get fixed mtimes too, after their contents.
	var dirs []string
	_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() && p != root {
			dirs = append(dirs, p)
		}
		return nil
	})
	for _, d := range dirs {
		if err := lutimes(d, baseTime-3600); err != nil {
			return err
		}
	}
	return nil
}

func lutimes(p string, sec int64) error {
	ts := []syscall.Timeval{{Sec: sec}, {Sec: sec}}
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return lutimesNoFollow(p, sec)
	}
	return syscall.Utimes(p, ts)
}

// mtimeOf is the mtime of a source file: fixed, and the same for the same path in
// any tree, so that a planted DEST copy is up to date.
func mtimeOf(p string) int64 {
	h := sha256.Sum256([]byte(p))
	return baseTime + (int64(h[0])<<8 | int64(h[1]))
}

// lutimesNoFollow sets a symlink's own mtime with touch -h (syscall has no lutimes).
func lutimesNoFollow(p string, sec int64) error {
	out, err := osexec.Command("touch", "-h", "-d", "@"+strconv.FormatInt(sec, 10), p).CombinedOutput()
	if err != nil {
		return fmt.Errorf("touch -h %s: %v: %s", p, err, out)
	}
	return nil
}

// scenario is one fault condition, recorded in one or more forms.
type scenario struct {
	name  string
	what  string
	forms []string
	names map[string]string // case name per form, overriding the default suffixes
	notes []string

	src       []spec   // the source tree
	dst       []spec   // planted in DEST (or the module dir) before the run
	list      []string // the chunk's entries
	opts      []string // rsync options before prsync's fixed ones
	user      string   // "nobody": run the client through setpriv as 65534:65534
	env       []string // extra environment
	dstNobody bool     // chown DEST to nobody (DEST writable by nobody)

	module []string              // extra lines for the [m] module
	url    func(port int) string // the daemon URL, if not rsync://127.0.0.1:PORT/m/
	secret string                // secrets file contents
	hold   bool                  // hold one daemon connection open during the run

	// setup runs after the trees are built and before the daemon starts.
	setup func(r *run) error
	// during runs concurrently with rsync and must return within a few seconds.
	during func(r *run)
	// skip returns a reason to skip on this machine.
	skip func() string
}

// run is one case being recorded.
type run struct {
	t    *testing.T
	sc   *scenario
	form string
	name string

	T, SRC, DST, MOD, HELPER, URL string
	srcDir, dstDir                string // where the source tree is and where it should land
	daemonDir                     string
	port                          int

	mu       sync.Mutex
	mounts   []string
	conns    []net.Conn
	daemon   *osexec.Cmd
	daemonWG sync.WaitGroup
	extraVar map[string]string
	notes    []string
}

func (r *run) vars() map[string]string {
	v := map[string]string{"TMP": r.T, "SRC": r.SRC, "DST": r.DST, "MOD": r.MOD, "HELPER": r.HELPER, "URL": r.URL}
	for k, x := range r.extraVar {
		v[k] = x
	}
	return v
}

func (r *run) mount(target string, args ...string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	cmd := append([]string{}, args...)
	cmd = append(cmd, target)
	if out, err := osexec.Command("mount", cmd...).CombinedOutput(); err != nil {
		return fmt.Errorf("mount %v: %v: %s", cmd, err, out)
	}
	r.mu.Lock()
	r.mounts = append(r.mounts, target)
	r.mu.Unlock()
	return nil
}

func chattr(flag string, paths ...string) error {
	out, err := osexec.Command("chattr", append([]string{flag}, paths...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chattr %s %v: %v: %s", flag, paths, err, out)
	}
	return nil
}

func chownR(root string, uid, gid int) error {
	return filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// cleanup restores the machine: connections, daemon, mounts, immutable flags, files.
func (r *run) cleanup() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
	r.stopDaemon()
	for i := len(r.mounts) - 1; i >= 0; i-- {
		m := r.mounts[i]
		if out, err := osexec.Command("umount", m).CombinedOutput(); err != nil {
			r.t.Logf("umount %s: %v: %s; trying lazy", m, err, out)
			if out, err := osexec.Command("umount", "-l", m).CombinedOutput(); err != nil {
				r.t.Errorf("umount -l %s: %v: %s", m, err, out)
			}
		}
	}
	r.mounts = nil
	// chattr -R -i every file and directory (not symlinks: chattr cannot, and would follow).
	var paths []string
	_ = filepath.Walk(r.T, func(p string, fi os.FileInfo, err error) error {
		if err == nil && (fi.Mode().IsRegular() || fi.IsDir()) {
			paths = append(paths, p)
		}
		return nil
	})
	for len(paths) > 0 {
		n := min(len(paths), 200)
		_ = osexec.Command("chattr", append([]string{"-i", "-a"}, paths[:n]...)...).Run()
		paths = paths[n:]
	}
	if err := os.RemoveAll(r.T); err != nil {
		r.t.Errorf("remove %s: %v", r.T, err)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (r *run) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pid file = %s/rsyncd.pid\n", r.daemonDir)
	fmt.Fprintf(&b, "lock file = %s/rsyncd.lock\n", r.daemonDir)
	fmt.Fprintf(&b, "log file = %s/rsyncd.log\n", r.daemonDir)
	b.WriteString("use chroot = no\nreverse lookup = no\n\n[m]\n")
	fmt.Fprintf(&b, "\tpath = %s\n", r.MOD)
	// Defaults for every case, unless the scenario sets them: a root daemon would
	// otherwise run the module as nobody.
	for _, d := range []string{"read only = no", "uid = root", "gid = root"} {
		key, _, _ := strings.Cut(d, " = ")
		if !slices.ContainsFunc(r.sc.module, func(l string) bool { return strings.HasPrefix(l, key+" = ") }) {
			b.WriteString("\t" + d + "\n")
		}
	}
	for _, l := range r.sc.module {
		b.WriteString("\t" + strings.ReplaceAll(l, "$TMP", r.T) + "\n")
	}
	return b.String()
}

// startDaemon starts rsync --daemon on a free port in its own process group.
func (r *run) startDaemon() error {
	if err := os.MkdirAll(r.daemonDir, 0o755); err != nil {
		return err
	}
	if r.sc.secret != "" {
		if err := os.WriteFile(filepath.Join(r.daemonDir, "secrets"), []byte(r.sc.secret), 0o600); err != nil {
			return err
		}
	}
	conf := filepath.Join(r.daemonDir, "rsyncd.conf")
	if err := os.WriteFile(conf, []byte(r.config()), 0o644); err != nil {
		return err
	}
	for try := 0; try < 5; try++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		cmd := osexec.Command("rsync", "--daemon", "--no-detach", "--config="+conf, "--address=127.0.0.1", "--port="+strconv.Itoa(port))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			return err
		}
		exited := make(chan struct{})
		r.daemonWG.Add(1)
		go func() { defer r.daemonWG.Done(); _ = cmd.Wait(); close(exited) }()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				r.daemonWG.Wait()
				r.t.Logf("daemon on port %d exited: %s", port, out.String())
				goto retry
			default:
			}
			// Ready when it logs that it listens (a probe connection would show in the log).
			if data, _ := os.ReadFile(filepath.Join(r.daemonDir, "rsyncd.log")); bytes.Contains(data, []byte("listening on port "+strconv.Itoa(port)+"\n")) {
				r.mu.Lock()
				r.daemon, r.port = cmd, port
				r.mu.Unlock()
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		r.daemonWG.Wait()
		return fmt.Errorf("daemon did not listen on %d: %s", port, out.String())
	retry:
	}
	return errors.New("could not start the daemon")
}

// stopDaemon stops the daemon's process group (the caller holds r.mu).
func (r *run) stopDaemon() {
	if r.daemon == nil {
		return
	}
	pgid := r.daemon.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { r.daemonWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
	// Children of the daemon (one per connection) are in its group; make sure they are gone.
	for i := 0; i < 50 && syscall.Kill(-pgid, 0) == nil; i++ {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		time.Sleep(20 * time.Millisecond)
	}
	r.daemon = nil
}

// holdConnection opens a daemon connection to module m and leaves it waiting for
// its arguments, so that it counts against "max connections".
func (r *run) holdConnection() error {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(r.port), 5*time.Second)
	if err != nil {
		return err
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	greet, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(greet, "@RSYNCD: ") {
		c.Close()
		return fmt.Errorf("greeting %q: %v", greet, err)
	}
	fmt.Fprintf(c, "@RSYNCD: 32.0 sha512 sha256 sha1 md5 md4\nm\n")
	for {
		ln, err := br.ReadString('\n')
		if err != nil {
			c.Close()
			return fmt.Errorf("holding connection: %v", err)
		}
		if strings.HasPrefix(ln, "@RSYNCD: OK") {
			break
		}
		if strings.HasPrefix(ln, "@ERROR") {
			c.Close()
			return fmt.Errorf("holding connection: %s", ln)
		}
	}
	_ = c.SetDeadline(time.Time{})
	r.mu.Lock()
	r.conns = append(r.conns, c)
	r.mu.Unlock()
	return nil
}

// entryState is what one path is.
type entryState struct {
	exists bool
	mode   os.FileMode // type bits
	size   int64
	mtime  int64
	sum    [32]byte
	target string
}

func stateOf(p string) entryState {
	fi, err := os.Lstat(p)
	if err != nil {
		return entryState{}
	}
	s := entryState{exists: true, mode: fi.Mode().Type()}
	switch {
	case fi.Mode().IsRegular():
		s.size, s.mtime = fi.Size(), fi.ModTime().Unix()
		if data, err := os.ReadFile(p); err == nil {
			s.sum = sha256.Sum256(data)
		}
	case fi.Mode()&os.ModeSymlink != 0:
		s.target, _ = os.Readlink(p)
	}
	return s
}

func compare(src, dst entryState) State {
	if !dst.exists {
		return Missing
	}
	if !src.exists || src.mode != dst.mode {
		return Differs
	}
	if src.mode.IsRegular() && (src.size != dst.size || src.mtime != dst.mtime || src.sum != dst.sum) {
		return Differs
	}
	if src.mode&os.ModeSymlink != 0 && src.target != dst.target {
		return Differs
	}
	return Landed
}

var suffixes = map[string]string{Push: "", Pull: "-pull", DaemonPush: "-daemon", DaemonPull: "-daemon-pull"}

func caseName(sc *scenario, form string) string {
	if n, ok := sc.names[form]; ok {
		return n
	}
	local := slices.Contains(sc.forms, Push) || slices.Contains(sc.forms, Pull)
	if !local {
		if len(sc.forms) == 1 {
			return sc.name
		}
		return sc.name + map[string]string{DaemonPush: "", DaemonPull: "-pull"}[form]
	}
	return sc.name + suffixes[form]
}

var logPrefixRE = regexp.MustCompile(`(?m)^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[\d+\] `)
var portRE = regexp.MustCompile(`port \d+`)

// record runs one scenario in one form and returns the case.
func record(t *testing.T, sc *scenario, form string) Case {
	T, err := os.MkdirTemp("", "prsync-corpus-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(T, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &run{t: t, sc: sc, form: form, name: caseName(sc, form), T: T,
		SRC: filepath.Join(T, "src"), DST: filepath.Join(T, "dst"), MOD: filepath.Join(T, "mod"),
		HELPER: filepath.Join(T, "helper"), daemonDir: filepath.Join(T, "daemon")}
	t.Cleanup(r.cleanup)
	if err := os.WriteFile(r.HELPER, []byte("#!/bin/sh\nshift\nexec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	daemon := form == DaemonPush || form == DaemonPull
	switch form {
	case Push, Pull:
		r.srcDir, r.dstDir = r.SRC, r.DST
	case DaemonPush:
		r.srcDir, r.dstDir = r.SRC, r.MOD
	case DaemonPull:
		r.srcDir, r.dstDir = r.MOD, r.DST
	}
	if err := build(r.srcDir, sc.src); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(r.dstDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := build(r.dstDir, sc.dst); err != nil {
		t.Fatal(err)
	}
	if sc.dstNobody {
		if err := chownR(r.dstDir, nobodyUID, nobodyGID); err != nil {
			t.Fatal(err)
		}
	}
	if sc.setup != nil {
		if err := sc.setup(r); err != nil {
			t.Fatalf("setup: %v", err)
		}
	}
	if daemon {
		if err := r.startDaemon(); err != nil {
			t.Fatal(err)
		}
		r.URL = fmt.Sprintf("rsync://127.0.0.1:%d/m/", r.port)
		if sc.url != nil {
			r.URL = sc.url(r.port)
		}
		if sc.hold {
			if err := r.holdConnection(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Snapshot the sources.
	before := map[string]entryState{}
	for _, e := range sc.list {
		before[e] = stateOf(filepath.Join(r.srcDir, e))
	}

	args := []string{"--archive"}
	if form == Pull {
		args = append(args, "-e", r.HELPER)
	}
	args = append(args, sc.opts...)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "$TMP", r.T)
	}
	args = append(args, "--files-from=-", "--from0", "--out-format="+outFormat, "--")
	switch form {
	case Push:
		args = append(args, r.SRC+"/", r.DST+"/")
	case Pull:
		args = append(args, "localhost:"+r.SRC+"/", r.DST+"/")
	case DaemonPush:
		args = append(args, r.SRC+"/", r.URL)
	case DaemonPull:
		args = append(args, r.URL, r.DST+"/")
	}
	prog, progArgs := "rsync", args
	if sc.user == "nobody" {
		prog = "setpriv"
		progArgs = append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "rsync"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := osexec.CommandContext(ctx, prog, progArgs...)
	// Setsid: no controlling terminal, so a password prompt cannot block or stop rsync.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Env = append(cleanEnv(), sc.env...)
	var stdin bytes.Buffer
	for _, e := range sc.list {
		stdin.WriteString(e)
		stdin.WriteByte(0)
	}
	cmd.Stdin = &stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	if sc.during != nil {
		wg.Add(1)
		go func() { defer wg.Done(); sc.during(r) }()
	}
	err = cmd.Wait()
	wg.Wait()
	code := 0
	if err != nil {
		var ee *osexec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() < 0 {
			t.Fatalf("rsync: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
		}
		code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		t.Fatalf("rsync timed out")
	}
	// Make sure nothing of this rsync is left (its group is its PID).
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)

	var dlog string
	if daemon {
		dlog = r.daemonLog()
	}

	vars := r.vars()
	c := Case{
		Name: r.name, What: sc.what, Form: form, Exit: code, User: sc.user, Env: sc.env,
		Notes: append(append([]string{}, sc.notes...), r.notes...),
		Meta:  map[string]string{},
		List:  sc.list,
	}
	for _, a := range args {
		c.Args = append(c.Args, Collapse(a, vars))
	}
	c.Stdout = Collapse(stdout.String(), vars)
	c.Stderr = Collapse(stderr.String(), vars)
	if daemon {
		c.Config = Collapse(r.config(), vars)
		c.DaemonLog = portRE.ReplaceAllString(Collapse(dlog, vars), "port $$PORT")
	}
	for _, e := range sc.list {
		c.Truth = append(c.Truth, Truth{
			Entry:     e,
			State:     compare(before[e], stateOf(filepath.Join(r.dstDir, e))),
			SrcExists: stateOf(filepath.Join(r.srcDir, e)).exists,
		})
	}
	c.Leftovers = leftovers(r.dstDir, sc.list)
	return c
}

// leftovers walks dst and returns the paths that are neither a list entry nor a
// parent directory of one.
func leftovers(dst string, list []string) []string {
	want := map[string]bool{}
	for _, e := range list {
		for p := filepath.Clean(e); p != "." && p != "/"; p = filepath.Dir(p) {
			want[p] = true
		}
	}
	var out []string
	_ = filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dst {
			return nil
		}
		rel, _ := filepath.Rel(dst, p)
		if !want[rel] {
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// daemonLog waits until the daemon's log stops growing and returns it without the
// time stamp and PID prefixes.
func (r *run) daemonLog() string {
	p := filepath.Join(r.daemonDir, "rsyncd.log")
	var last []byte
	for i := 0; i < 40; i++ {
		time.Sleep(50 * time.Millisecond)
		data, _ := os.ReadFile(p)
		if i > 4 && bytes.Equal(data, last) {
			break
		}
		last = data
	}
	return logPrefixRE.ReplaceAllString(string(last), "")
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "RSYNC_") || strings.HasPrefix(k, "LC_") || k == "LANG" || k == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// waitFor polls until cond holds or the timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// hasTemp reports whether dir holds a temp file .NAME.XXXXXX of name.
func hasTemp(dir, name string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "."+name+".") {
			return true
		}
	}
	return false
}

func TestRecordCorpus(t *testing.T) {
	if os.Getenv("PRSYNC_RECORD") != "1" {
		t.Skip("set PRSYNC_RECORD=1 to record the corpus with the real rsync")
	}
	if os.Geteuid() != 0 {
		t.Skip("recording needs root (chattr, mount, setpriv)")
	}
	out, err := osexec.Command("rsync", "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("version 3.5.0 ")) {
		t.Fatalf("want rsync 3.5.0, have %s", bytes.SplitN(out, []byte("\n"), 2)[0])
	}
	if err := os.MkdirAll(corpusDir, 0o755); err != nil {
		t.Fatal(err)
	}
	only := os.Getenv("PRSYNC_RECORD_ONLY") // a regexp of case names, for re-recording a few
	var onlyRE *regexp.Regexp
	if only != "" {
		onlyRE = regexp.MustCompile(only)
	}
	written := map[string]bool{}
	var mu sync.Mutex
	total, ran := 0, 0
	for i := range scenarios {
		sc := &scenarios[i]
		for _, form := range sc.forms {
			name := caseName(sc, form)
			if onlyRE != nil && !onlyRE.MatchString(name) {
				continue
			}
			total++
			t.Run(name, func(t *testing.T) {
				mu.Lock()
				ran++
				mu.Unlock()
				if sc.skip != nil {
					if why := sc.skip(); why != "" {
						t.Skip(why)
					}
				}
				c := record(t, sc, form)
				data, err := c.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := Parse(data); err != nil {
					t.Fatalf("recorded case does not parse: %v\n%s", err, data)
				}
				if err := os.WriteFile(filepath.Join(corpusDir, name+".txtar"), data, 0o644); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				written[name+".txtar"] = true
				mu.Unlock()
				var states []string
				for _, tr := range c.Truth {
					states = append(states, fmt.Sprintf("%q=%s", tr.Entry, tr.State))
				}
				t.Logf("exit %d; %s\nstdout:\n%sstderr:\n%s", c.Exit, strings.Join(states, " "), c.Stdout, c.Stderr)
			})
		}
	}
	// Remove stale cases, but only after a full run.
	if onlyRE == nil && ran == total && !t.Failed() {
		old, _ := filepath.Glob(filepath.Join(corpusDir, "*.txtar"))
		for _, p := range old {
			if !written[filepath.Base(p)] {
				t.Logf("removing stale %s", p)
				os.Remove(p)
			}
		}
	}
	checkLeftovers(t)
}

// checkLeftovers fails if a mount or temp dir of the recorder survived.
func checkLeftovers(t *testing.T) {
	mounts, _ := os.ReadFile("/proc/mounts")
	for _, ln := range strings.Split(string(mounts), "\n") {
		if strings.Contains(ln, "prsync-corpus-") {
			t.Errorf("mount left behind: %s", ln)
		}
	}
	left, _ := filepath.Glob(filepath.Join(os.TempDir(), "prsync-corpus-*"))
	for _, p := range left {
		t.Errorf("temp dir left behind: %s", p)
	}
}

// ---------------------------------------------------------------------------
// The scenarios.

var (
	local  = []string{Push, Pull}
	all3   = []string{Push, Pull, DaemonPush}
	all4   = []string{Push, Pull, DaemonPush, DaemonPull}
	dpush  = []string{DaemonPush}
	dboth  = []string{DaemonPush, DaemonPull}
	basic  = []spec{f("a.txt", 1500), f("sub/f1", 2100), f("sub/f2", 3200)}
	basicL = []string{"a.txt", "sub/f1", "sub/f2"}
)

func immutable(paths ...string) func(r *run) error {
	return func(r *run) error {
		var ps []string
		for _, p := range paths {
			ps = append(ps, filepath.Join(r.dstDir, p))
		}
		return chattr("+i", ps...)
	}
}

// oddNames are names that rsync escapes, or that a parser may trip on.
var oddNames = []string{"new\nline", "-dash", "with space", `back\slash`, "bad\xffutf8", `\#012literal`, "cr\r", "#hash", ";semi", "tab\tname", `quote"name`, "uni-\u00e9"}

func oddTree(dirs ...string) ([]spec, []string) {
	var s []spec
	var l []string
	for _, d := range dirs {
		for i, n := range oddNames {
			p := d + "/" + n
			s = append(s, f(p, 1000+i*37))
			l = append(l, p)
		}
	}
	return s, l
}

func vanish(name string) func(r *run) {
	return func(r *run) {
		if !waitFor(15*time.Second, func() bool { return hasTemp(r.dstDir, "big.bin") }) {
			r.notes = append(r.notes, "recorder: the temp file of big.bin never appeared; removed zsmall anyway")
		}
		_ = os.Remove(filepath.Join(r.srcDir, name))
	}
}

func needRamfs() string {
	if _, err := os.Stat("/proc/filesystems"); err != nil {
		return "no /proc/filesystems"
	}
	data, _ := os.ReadFile("/proc/filesystems")
	if !bytes.Contains(data, []byte("ramfs")) {
		return "no ramfs on this kernel"
	}
	return ""
}

// setACL gives p a POSIX access ACL with a named user entry (user:nobody:r--),
// written directly as the system.posix_acl_access xattr.
func setACL(p string) error {
	le := func(b *bytes.Buffer, tag, perm uint16, id uint32) {
		b.Write([]byte{byte(tag), byte(tag >> 8), byte(perm), byte(perm >> 8), byte(id), byte(id >> 8), byte(id >> 16), byte(id >> 24)})
	}
	var b bytes.Buffer
	b.Write([]byte{2, 0, 0, 0})
	le(&b, 0x01, 6, 0xffffffff) // USER_OBJ rw-
	le(&b, 0x02, 4, nobodyUID)  // USER nobody r--
	le(&b, 0x04, 4, 0xffffffff) // GROUP_OBJ r--
	le(&b, 0x10, 4, 0xffffffff) // MASK r--
	le(&b, 0x20, 4, 0xffffffff) // OTHER r--
	return setxattr(p, "system.posix_acl_access", b.Bytes())
}

func setxattr(p, name string, val []byte) error {
	return syscall.Setxattr(p, name, val, 0)
}

var scenarios = []scenario{
	// 20. Controls.
	{
		name: "clean", forms: all4,
		what:  "control: a clean run, some files new, some already up to date in DEST (same size and mtime)",
		src:   []spec{f("a.txt", 1500), f("b.txt", 2600), f("sub/f1", 2100), f("sub/f2", 3200), symlink("sub/lnk", "f1")},
		dst:   []spec{f("a.txt", 1500), f("sub/f1", 2100)},
		list:  []string{"a.txt", "b.txt", "sub/f1", "sub/f2", "sub/lnk"},
		notes: []string{"a daemon with use chroot = no munges symlinks by default: in daemon-push sub/lnk lands as a link to /rsyncd-munged/f1 (truth differs, exit 0)"},
	},

	// 1. Immutable DEST directory.
	{
		name: "immutable-dir", forms: all4,
		what: "DEST directory sub/ is immutable (chattr +i); sub/f2 is already up to date in it",
		src:  basic, list: basicL,
		dst:   []spec{dir("sub"), f("sub/f2", 3200)},
		setup: immutable("sub"),
	},
	{
		name: "immutable-dir-mixed", forms: all3,
		what:  "DEST directory sub/ is immutable; the source has a file, a symlink, a fifo and a subdirectory with a file in it",
		src:   []spec{f("a.txt", 1500), f("sub/f1", 2100), symlink("sub/lnk", "f1"), fifo("sub/fifo"), f("sub/deep/f3", 1200), f("z.txt", 900)},
		list:  []string{"a.txt", "sub/f1", "sub/lnk", "sub/fifo", "sub/deep/f3", "z.txt"},
		dst:   []spec{dir("sub")},
		setup: immutable("sub"),
	},
	// 2. Immutable existing file.
	{
		name: "immutable-file", forms: all3,
		what: "an existing, outdated DEST file sub/f1 is immutable, so the rename over it fails",
		src:  basic, list: basicL,
		dst:   []spec{old("sub/f1", 700)},
		setup: immutable("sub/f1"),
	},
	// 19. Attributes only.
	{
		name: "attrs-immutable", forms: all3,
		what: "DEST sub/f1 has the right contents and mtime but mode 0600 and owner nobody, and is immutable: only the attribute changes fail",
		src:  basic, list: basicL,
		dst: []spec{fmode("sub/f1", 2100, 0o600)},
		setup: func(r *run) error {
			p := filepath.Join(r.dstDir, "sub/f1")
			if err := os.Lchown(p, nobodyUID, nobodyGID); err != nil {
				return err
			}
			return chattr("+i", p)
		},
		notes: []string{"truth compares type, size, mtime and contents, not mode or owner: sub/f1 is landed although its attributes are wrong"},
	},
	// 3. Module its uid cannot write.
	{
		name: "daemon-uid-nobody", forms: dpush,
		what:   "daemon module with uid = nobody, gid = nogroup; the module dir and its existing subdir sub/ are root-owned 0755",
		src:    []spec{f("a.txt", 1500), f("sub/f1", 2100), f("new/f3", 1300)},
		list:   []string{"a.txt", "sub/f1", "new/f3"},
		dst:    []spec{dir("sub")},
		module: []string{"uid = nobody", "gid = nogroup"},
	},
	// 4. Read-only module.
	{
		name: "daemon-read-only", forms: dpush,
		what: "push to a daemon module with read only = yes",
		src:  basic, list: basicL,
		module: []string{"read only = yes"},
	},
	{
		name: "daemon-write-only", forms: []string{DaemonPull},
		what: "pull from a daemon module with write only = yes",
		src:  basic, list: basicL,
		module: []string{"write only = yes"},
	},
	// 5. Daemon-side exclude.
	{
		name: "daemon-exclude", forms: dboth,
		what:   "daemon module with exclude = *.secret; the list names x.secret and sub/y.secret",
		src:    []spec{f("a.txt", 1500), f("x.secret", 1100), f("sub/f1", 2100), f("sub/y.secret", 1200)},
		list:   []string{"a.txt", "x.secret", "sub/f1", "sub/y.secret"},
		module: []string{"exclude = *.secret"},
	},
	{
		name: "daemon-exclude-dir", forms: dboth,
		what: "daemon module with exclude = sub/; the list names files inside sub/",
		src:  basic, list: basicL,
		module: []string{"exclude = sub/"},
	},
	// 6. Refused options.
	{
		name: "daemon-refuse-compress", forms: dpush,
		what: "daemon module with refuse options = compress, client runs with -z",
		src:  basic, list: basicL, opts: []string{"-z"},
		module: []string{"refuse options = compress"},
	},
	{
		name: "daemon-refuse-delete", forms: dpush,
		what: "daemon module with refuse options = delete, client runs with --delete",
		src:  basic, list: basicL, opts: []string{"--delete"},
		module: []string{"refuse options = delete"},
	},
	// 7. Max connections.
	{
		name: "daemon-max-connections", forms: dboth,
		what: "daemon module with max connections = 1 while another connection to it is held open",
		src:  basic, list: basicL,
		module: []string{"max connections = 1"}, hold: true,
		notes: []string{"recorder: the other connection is a raw TCP client that selected module m and waits, which holds the slot"},
	},
	// 8. Unknown module, auth.
	{
		name: "daemon-unknown-module", forms: dpush,
		what: "push to a module the daemon does not have",
		src:  basic, list: basicL,
		url: func(port int) string { return fmt.Sprintf("rsync://127.0.0.1:%d/nomod/", port) },
	},
	{
		name: "daemon-auth-no-password", forms: dpush,
		what: "module with auth users = u and a secrets file; client gives user u but no password (no terminal: getpass reads the list from stdin)",
		src:  basic, list: basicL,
		module: []string{"auth users = u", "secrets file = $TMP/daemon/secrets"}, secret: "u:sekrit\n",
		url: func(port int) string { return fmt.Sprintf("rsync://u@127.0.0.1:%d/m/", port) },
	},
	{
		name: "daemon-auth-wrong-password", forms: dpush,
		what: "module with auth users = u; client gives user u and a wrong RSYNC_PASSWORD",
		src:  basic, list: basicL, env: []string{"RSYNC_PASSWORD=wrong"},
		module: []string{"auth users = u", "secrets file = $TMP/daemon/secrets"}, secret: "u:sekrit\n",
		url: func(port int) string { return fmt.Sprintf("rsync://u@127.0.0.1:%d/m/", port) },
	},
	{
		name: "daemon-auth-ok", forms: dpush,
		what: "control: module with auth users = u; client gives the right RSYNC_PASSWORD",
		src:  basic, list: basicL, env: []string{"RSYNC_PASSWORD=sekrit"},
		module: []string{"auth users = u", "secrets file = $TMP/daemon/secrets"}, secret: "u:sekrit\n",
		url: func(port int) string { return fmt.Sprintf("rsync://u@127.0.0.1:%d/m/", port) },
	},
	{
		name: "daemon-hosts-deny", forms: dpush,
		what: "module with hosts allow = 10.255.255.1, so 127.0.0.1 is refused",
		src:  basic, list: basicL,
		module: []string{"hosts allow = 10.255.255.1"},
	},
	{
		name: "daemon-pre-xfer-fail", forms: dpush,
		what: "module with pre-xfer exec = /bin/false",
		src:  basic, list: basicL,
		module: []string{"pre-xfer exec = /bin/false"},
	},
	{
		name: "daemon-path-missing", forms: dpush,
		what: "the module's path does not exist",
		src:  basic, list: basicL,
		setup: func(r *run) error { return os.RemoveAll(r.MOD) },
	},
	// 9. Type conflicts.
	{
		name: "dir-for-file", forms: all3,
		what: "DEST has a non-empty directory f1 where the source has a regular file",
		src:  []spec{f("a.txt", 1500), f("f1", 2100), f("z.txt", 900)},
		list: []string{"a.txt", "f1", "z.txt"},
		dst:  []spec{f("f1/inner", 300)},
	},
	{
		name: "dir-for-file-empty", forms: local,
		what: "DEST has an empty directory f1 where the source has a regular file (rsync replaces it)",
		src:  []spec{f("a.txt", 1500), f("f1", 2100)},
		list: []string{"a.txt", "f1"},
		dst:  []spec{dir("f1")},
	},
	{
		name: "file-for-dir", forms: all3,
		what: "DEST has a regular file d where the source has a directory d/ with files; the list names d and d/x",
		src:  []spec{f("a.txt", 1500), f("d/x", 2100), f("d/y", 1700)},
		list: []string{"a.txt", "d", "d/x"},
		dst:  []spec{old("d", 400)},
	},
	{
		name: "file-for-dir-immutable", forms: local,
		what:  "DEST has an immutable regular file d where the source has a directory d/; the list names d/x only (an implied dir)",
		src:   []spec{f("a.txt", 1500), f("d/x", 2100)},
		list:  []string{"a.txt", "d/x"},
		dst:   []spec{old("d", 400)},
		setup: immutable("d"),
	},
	// 10. Unreadable source.
	{
		name: "unreadable-src", forms: all3,
		what: "rsync runs as nobody; the source file locked is root's, mode 0600; DEST is writable by nobody",
		src:  []spec{f("a.txt", 1500), fmode("locked", 1800, 0o600), f("sub/f1", 2100)},
		list: []string{"a.txt", "locked", "sub/f1"},
		user: "nobody", dstNobody: true,
	},
	{
		name: "daemon-unreadable-src", forms: []string{DaemonPull},
		what:   "pull from a module with uid = nobody; the module's file locked is root's, mode 0600",
		src:    []spec{f("a.txt", 1500), fmode("locked", 1800, 0o600), f("sub/f1", 2100)},
		list:   []string{"a.txt", "locked", "sub/f1"},
		module: []string{"uid = nobody", "gid = nogroup"},
	},
	{
		name: "unreadable-src-dir", forms: all3,
		what: "rsync runs as nobody; the listed priv/f is inside a root directory of mode 0700",
		src:  []spec{f("a.txt", 1500), f("priv/f", 1800), f("sub/f1", 2100)},
		list: []string{"a.txt", "priv/f", "sub/f1"},
		user: "nobody", dstNobody: true,
		setup: func(r *run) error { return os.Chmod(filepath.Join(r.srcDir, "priv"), 0o700) },
	},
	// 11. Missing and vanished sources.
	{
		name: "missing-src", forms: all4,
		what: "two listed source paths do not exist at the start (one in a missing directory)",
		src:  []spec{f("a.txt", 1500), f("sub/f1", 2100)},
		list: []string{"a.txt", "notthere", "nodir/f9", "sub/f1"},
	},
	{
		name: "vanished", forms: all4,
		what: "zsmall is deleted while rsync (--bwlimit=200) is still sending big.bin, after the file list was built",
		src:  []spec{f("a.txt", 1500), f("big.bin", 400000), f("zsmall", 1200)},
		list: []string{"a.txt", "big.bin", "zsmall"},
		opts: []string{"--bwlimit=200"}, during: vanish("zsmall"),
	},
	{
		name: "missing-and-vanished", forms: local,
		what: "notthere is missing at the start and zsmall is deleted during the copy (--bwlimit=200)",
		src:  []spec{f("a.txt", 1500), f("big.bin", 400000), f("zsmall", 1200)},
		list: []string{"a.txt", "big.bin", "notthere", "zsmall"},
		opts: []string{"--bwlimit=200"}, during: vanish("zsmall"),
	},
	{
		name: "copy-links-dangling", forms: all3,
		what: "-L (--copy-links); the source symlink sub/dangling points nowhere",
		src:  []spec{f("a.txt", 1500), symlink("sub/dangling", "nowhere"), f("sub/f1", 2100)},
		list: []string{"a.txt", "sub/dangling", "sub/f1"},
		opts: []string{"-L"},
	},
	// 12. Disk full.
	{
		name: "disk-full", forms: all4,
		what: "DEST is a 64 KiB tmpfs; big.bin (300 KB) does not fit; a.txt before it and z.txt after it do",
		src:  []spec{f("a.txt", 2000), f("big.bin", 300000), f("z.txt", 2000)},
		list: []string{"a.txt", "big.bin", "z.txt"},
		setup: func(r *run) error {
			return r.mount(r.dstDir, "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs")
		},
	},
	// 13. DEST not writable.
	{
		name: "dest-unwritable", forms: local,
		what: "rsync runs as nobody into a root-owned 0755 DEST that has a root-owned 0755 subdir old/",
		src:  []spec{f("a.txt", 1500), f("sub/f1", 2100), f("old/f2", 1700)},
		list: []string{"a.txt", "sub/f1", "old/f2"},
		dst:  []spec{dir("old")},
		user: "nobody",
	},
	// 14. Untrusted symlinks.
	{
		name: "untrusted-symlink-src", forms: local,
		what: "the source path component sub is a symlink owned by nobody (to a root directory)",
		src:  basic, list: basicL,
		setup: func(r *run) error {
			real := filepath.Join(r.T, "srcreal")
			if err := os.Rename(filepath.Join(r.srcDir, "sub"), real); err != nil {
				return err
			}
			l := filepath.Join(r.srcDir, "sub")
			if err := os.Symlink("../srcreal", l); err != nil {
				return err
			}
			return os.Lchown(l, nobodyUID, nobodyGID)
		},
	},
	{
		name: "untrusted-symlink-dest", forms: local,
		what: "DEST is reached through $TMP/lnk, a symlink owned by nobody to a root directory ($DST is $TMP/lnk/dst)",
		src:  basic, list: basicL,
		setup: func(r *run) error {
			real := filepath.Join(r.T, "real")
			if err := os.MkdirAll(real, 0o755); err != nil {
				return err
			}
			if err := os.Rename(r.DST, filepath.Join(real, "dst")); err != nil {
				return err
			}
			l := filepath.Join(r.T, "lnk")
			if err := os.Symlink("real", l); err != nil {
				return err
			}
			if err := os.Lchown(l, nobodyUID, nobodyGID); err != nil {
				return err
			}
			r.DST = filepath.Join(l, "dst")
			r.dstDir = r.DST
			return nil
		},
	},
	{
		name: "untrusted-symlink-dest-subdir", forms: local,
		what: "DEST sub is a symlink owned by nobody to a root directory, where the source has a directory sub/",
		src:  basic, list: basicL,
		setup: untrustedDestSub,
	},
	{
		name: "untrusted-symlink-dest-subdir-K", forms: local,
		what: "as untrusted-symlink-dest-subdir, with --keep-dirlinks (-K)",
		src:  basic, list: basicL, opts: []string{"--keep-dirlinks"},
		setup: untrustedDestSub,
	},
	// 15. Odd names.
	func() scenario {
		s, l := oddTree("ok", "imm")
		return scenario{
			name: "odd-names", forms: all3,
			what: "names with a newline, CR, tab, a leading -, #, ;, a space, a backslash, a literal \\#012, a quote, UTF-8 and invalid UTF-8 (0xff): the copies in ok/ land, those in the immutable DEST dir imm/ fail",
			src:  s, list: l,
			dst:   []spec{dir("imm")},
			setup: immutable("imm"),
		}
	}(),
	{
		name: "comment-entries", forms: local,
		what: "list entries that start with # or ; are comments to rsync and are dropped silently; ./#c3 is copied",
		src:  []spec{f("#c1", 1100), f(";c2", 1200), f("#c3", 1300), f("a.txt", 1500)},
		list: []string{"#c1", ";c2", "./#c3", "a.txt"},
	},
	// 16. Read-only filesystem.
	{
		name: "readonly-fs", forms: all4,
		what: "DEST is a tmpfs remounted read-only; it already has the directory sub/ and an outdated sub/f1",
		src:  basic, list: []string{"a.txt", "sub/f1", "sub/f2", "new/f3"},
		setup: func(r *run) error {
			if err := r.mount(r.dstDir, "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs"); err != nil {
				return err
			}
			if err := build(r.dstDir, []spec{old("sub/f1", 500)}); err != nil {
				return err
			}
			if err := build(r.srcDir, []spec{f("new/f3", 1300)}); err != nil {
				return err
			}
			out, err := osexec.Command("mount", "-o", "remount,ro", r.dstDir).CombinedOutput()
			if err != nil {
				return fmt.Errorf("remount ro: %v: %s", err, out)
			}
			return nil
		},
	},
	// 17. Temp, partial and delay dirs.
	{
		name: "temp-dir-immutable", forms: local,
		what: "--temp-dir=$TMP/tmpd, an immutable directory; sub/f1 and other/f1 have the same base name",
		src:  append(slices.Clone(basic), f("other/f1", 1900)), list: append(slices.Clone(basicL), "other/f1"),
		opts: []string{"--temp-dir=$TMP/tmpd"},
		setup: func(r *run) error {
			p := filepath.Join(r.T, "tmpd")
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
			return chattr("+i", p)
		},
	},
	{
		name: "temp-dir-missing", forms: local,
		what: "--temp-dir=$TMP/nope, which does not exist",
		src:  basic, list: basicL, opts: []string{"--temp-dir=$TMP/nope"},
	},
	{
		name: "partial-dir-immutable", forms: local,
		what: "--partial-dir=.rsync-partial; DEST sub/.rsync-partial/ is immutable and holds a partial sub/f1",
		src:  basic, list: basicL, opts: []string{"--partial-dir=.rsync-partial"},
		setup: func(r *run) error {
			p := filepath.Join(r.dstDir, "sub", ".rsync-partial")
			if err := build(r.dstDir, []spec{{path: "sub/.rsync-partial/f1", kind: 'f', mode: 0o600, data: content("sub/f1", 2100)[:1000], mtime: oldTime}}); err != nil {
				return err
			}
			return chattr("+i", p)
		},
	},
	{
		name: "delay-updates-immutable", forms: all3,
		what: "--delay-updates into the immutable DEST directory sub/",
		src:  basic, list: basicL, opts: []string{"--delay-updates"},
		dst:   []spec{dir("sub")},
		setup: immutable("sub"),
	},
	// 18. Hard links.
	{
		name: "hardlink-link-fails", forms: all3,
		what:  "-H; a/h1 and b/h2 are one inode; DEST a/ is immutable: rsync transfers b/h2 (the group's leader) and then fails to link a/h1 to it",
		src:   []spec{f("a/h1", 2100), hardlink("b/h2", "a/h1"), f("c.txt", 1500)},
		list:  []string{"a/h1", "b/h2", "c.txt"},
		opts:  []string{"-H"},
		dst:   []spec{dir("a")},
		setup: immutable("a"),
	},
	{
		name: "hardlink-leader-fails", forms: all3,
		what:  "-H; a/h1 and b/h2 are one inode; DEST b/ is immutable: the transfer of the leader b/h2 fails, and a/h1 is then skipped without a message",
		src:   []spec{f("a/h1", 2100), hardlink("b/h2", "a/h1"), f("c.txt", 1500)},
		list:  []string{"a/h1", "b/h2", "c.txt"},
		opts:  []string{"-H"},
		dst:   []spec{dir("b")},
		setup: immutable("b"),
	},
	// 19. Other receiver-side failures.
	{
		name: "xattrs-unsupported", forms: local,
		what: "-X; the source files have a user.foo xattr; DEST is a ramfs, which has no xattrs",
		src:  basic, list: basicL, opts: []string{"-X"},
		skip: needRamfs,
		setup: func(r *run) error {
			for _, p := range []string{"a.txt", "sub/f1"} {
				if err := setxattr(filepath.Join(r.srcDir, p), "user.foo", []byte("bar")); err != nil {
					return err
				}
			}
			return r.mount(r.dstDir, "-t", "ramfs", "-o", "mode=0755", "ramfs")
		},
	},
	{
		name: "acls-unsupported", forms: local,
		what: "-A; the source file sub/f1 has an ACL with a named user; DEST is a ramfs, which has no ACLs",
		src:  basic, list: basicL, opts: []string{"-A"},
		skip: needRamfs,
		setup: func(r *run) error {
			if err := setACL(filepath.Join(r.srcDir, "sub/f1")); err != nil {
				return fmt.Errorf("set ACL: %w", err)
			}
			return r.mount(r.dstDir, "-t", "ramfs", "-o", "mode=0755", "ramfs")
		},
	},
	{
		name: "backup-dir-immutable", forms: local,
		what: "--backup --backup-dir=$TMP/bak, an immutable directory; DEST has outdated a.txt and sub/f1",
		src:  basic, list: basicL, opts: []string{"--backup", "--backup-dir=$TMP/bak"},
		dst: []spec{old("a.txt", 600), old("sub/f1", 700)},
		setup: func(r *run) error {
			p := filepath.Join(r.T, "bak")
			if err := os.MkdirAll(filepath.Join(p, "sub"), 0o755); err != nil {
				return err
			}
			return chattr("+i", p, filepath.Join(p, "sub"))
		},
	},
	{
		name: "backup-name-too-long", forms: local,
		what: "--backup --suffix=.backup-too-long; DEST has an outdated file with a 240-byte name, whose backup name is longer than 255",
		src:  []spec{f("a.txt", 1500), f(strings.Repeat("n", 240), 2100)},
		list: []string{"a.txt", strings.Repeat("n", 240)},
		opts: []string{"--backup", "--suffix=.backup-too-long"},
		dst:  []spec{old("a.txt", 600), old(strings.Repeat("n", 240), 700)},
	},
	{
		name: "remove-source-immutable", forms: local,
		what: "--remove-source-files; the source directory sub/ is immutable, so its files cannot be removed",
		src:  basic, list: basicL, opts: []string{"--remove-source-files"},
		setup: func(r *run) error { return chattr("+i", filepath.Join(r.srcDir, "sub")) },
	},
	{
		name: "dest-parent-missing", forms: local,
		what: "DEST $TMP/nodst/x/y: its parent directories do not exist",
		src:  basic, list: basicL,
		setup: func(r *run) error {
			if err := os.RemoveAll(r.DST); err != nil {
				return err
			}
			r.DST = filepath.Join(r.T, "nodst", "x", "y")
			r.dstDir = r.DST
			return nil
		},
	},
	{
		name: "dest-is-file", forms: local,
		what: "DEST is a regular file",
		src:  basic, list: basicL,
		setup: func(r *run) error {
			if err := os.RemoveAll(r.DST); err != nil {
				return err
			}
			return os.WriteFile(r.DST, []byte("not a dir\n"), 0o644)
		},
	},
	{
		name: "src-dir-missing", forms: local,
		what: "SRC does not exist",
		src:  basic, list: basicL,
		setup: func(r *run) error { return os.RemoveAll(r.SRC) },
	},
	{
		name: "device-as-nobody", forms: local,
		what: "rsync runs as nobody; the source has a character device (1,3) and a fifo; DEST is writable by nobody",
		src:  []spec{f("a.txt", 1500), {path: "null", kind: 'c'}, fifo("fifo")},
		list: []string{"a.txt", "null", "fifo"},
		user: "nobody", dstNobody: true,
	},
	{
		name: "mkdir-immutable-parent", forms: all3,
		what:  "DEST directory sub/ is immutable and the list names files two levels below it (sub/deep/er/f3)",
		src:   []spec{f("a.txt", 1500), f("sub/deep/er/f3", 1300), f("sub/deep/f4", 1400)},
		list:  []string{"a.txt", "sub/deep/er/f3", "sub/deep/f4"},
		dst:   []spec{dir("sub")},
		setup: immutable("sub"),
	},
}

func untrustedDestSub(r *run) error {
	real := filepath.Join(r.T, "realsub")
	if err := os.MkdirAll(real, 0o755); err != nil {
		return err
	}
	l := filepath.Join(r.dstDir, "sub")
	if err := os.Symlink(real, l); err != nil {
		return err
	}
	return os.Lchown(l, nobodyUID, nobodyGID)
}
