package doctor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/throttle"
)

func TestWriteText(t *testing.T) {
	r := &Report{}
	r.Add(ok("a", "fine"), warn("b", "do this", "odd\nthing"), fail("c", "", "broken"))
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "ok       a: fine\nwarning  b: odd thing; fix: do this\nerror    c: broken\n"
	if b.String() != want {
		t.Errorf("WriteText:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		OK       bool
		Errors   int
		Warnings int
		Checks   []map[string]string
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.OK || got.Errors != 1 || got.Warnings != 1 || len(got.Checks) != 3 || got.Checks[1]["status"] != "warning" || got.Checks[1]["fix"] != "do this" {
		t.Errorf("WriteJSON = %s", b.String())
	}
	if strings.Count(b.String(), "\n") != 1 {
		t.Errorf("WriteJSON wrote more than one line: %q", b.String())
	}
}

func TestLocalRsync(t *testing.T) {
	tests := []struct {
		name   string
		out    string
		err    error
		args   []string
		remote bool
		want   Status
		has    string
	}{
		{"gnu 3.5.0", "rsync  version 3.5.0  protocol version 32\n", nil, []string{"--archive"}, false, OK, "GNU rsync 3.5.0"},
		{"3.4.3 with --delete-missing-args", "rsync  version 3.4.3  protocol version 32\n", nil, []string{"--archive", "--delete-missing-args"}, false, Error, "issues/910"},
		{"3.4.3 without", "rsync  version 3.4.3  protocol version 32\n", nil, []string{"--archive"}, false, Warning, "do not use"},
		{"3.4.0 with -H", "rsync  version 3.4.0  protocol version 32\n", nil, []string{"--archive", "-H"}, false, Error, "issues/702"},
		{"openrsync", "openrsync: protocol version 29\nrsync version 2.6.9 compatible\n", nil, []string{"--archive"}, false, Error, "brew install rsync"},
		{"too old", "rsync  version 3.0.9  protocol version 30\n", nil, nil, false, Warning, "older than 3.1.0, which prsync is built for"},
		{"no mkpath", "rsync  version 3.1.3  protocol version 31\n", nil, nil, true, Warning, "--mkpath"},
		{"mkpath local", "rsync  version 3.1.3  protocol version 31\n", nil, nil, false, OK, ""},
		{"not rsync", "hello\n", nil, nil, false, Error, "does not look like rsync"},
		{"cannot run", "", errors.New("exec: permission denied"), nil, false, Error, "cannot run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := LocalRsync("/usr/bin/rsync", []byte(tt.out), tt.err, tt.args, tt.remote)
			if c.Status != tt.want || !strings.Contains(c.Message+c.Fix, tt.has) || c.Name != NameLocalRsync {
				t.Errorf("LocalRsync = %+v; want %v with %q", c, tt.want, tt.has)
			}
			if c.Status != OK && c.Fix == "" {
				t.Errorf("%v without a fix: %+v", c.Status, c)
			}
		})
	}
}

func TestRemoteDaemon(t *testing.T) {
	tests := []struct {
		proto int
		err   error
		args  []string
		want  Status
	}{
		{32, nil, []string{"--archive"}, OK},
		{32, nil, []string{"--archive", "--delete-missing-args"}, Warning},
		{31, nil, []string{"--archive", "--delete-missing-args"}, OK},
		{30, nil, nil, Error},
		{0, errors.New("connection refused"), nil, Error},
	}
	for _, tt := range tests {
		if c := RemoteDaemon("h:873", tt.proto, tt.err, tt.args); c.Status != tt.want {
			t.Errorf("RemoteDaemon(%d, %v, %q) = %+v, want %v", tt.proto, tt.err, tt.args, c, tt.want)
		}
	}
}

func TestConnections(t *testing.T) {
	tests := []struct {
		name string
		jobs int
		p    ConnProbe
		want Status
		has  string
	}{
		{"all in", 4, ConnProbe{Tried: 4, Admitted: 4}, OK, "all 4"},
		{"capped", 32, ConnProbe{Tried: 16, Admitted: 16}, OK, "at most 16"},
		{"limit", 8, ConnProbe{Tried: 8, Admitted: 2, Refused: 6, Limit: 2}, Warning, "use -j 2"},
		{"module", 8, ConnProbe{Tried: 8, Other: "@ERROR: Unknown module 'x'"}, Error, "Unknown module"},
		{"down", 8, ConnProbe{Tried: 8, Err: errors.New("refused")}, Error, "could not open"},
		{"some failed", 8, ConnProbe{Tried: 8, Admitted: 3, Err: errors.New("reset")}, Warning, "3 of 8"},
		{"login", 8, ConnProbe{Tried: 8, Other: "@ERROR: auth failed on module mod"}, Error, "RSYNC_PASSWORD, or --password-file"},
		// every slot held: -j 1 would not help
		{"none free", 2, ConnProbe{Tried: 2, Refused: 2, Limit: 2}, Warning, "run doctor again when the module's other clients are done"},
		// a run of the user's own may hold them
		{"own run", 2, ConnProbe{Tried: 2, Refused: 2, Limit: 2, Runs: []int{4242}}, Warning, "if prsync 4242 copies to or from this module (prsync ctl --pid 4242 status), the slots are its own"},
		{"own run, some free", 8, ConnProbe{Tried: 8, Admitted: 2, Refused: 6, Limit: 4, Runs: []int{4242, 4343}}, Warning, "prsync 4242, 4343 of yours is running now"},
	}
	for _, tt := range tests {
		c := Connections("h:873", "mod", tt.jobs, tt.p)
		if c.Status != tt.want || !strings.Contains(c.Message+"; fix: "+c.Fix, tt.has) {
			t.Errorf("%s: Connections = %+v; want %v with %q", tt.name, c, tt.want, tt.has)
		}
		if tt.p.Admitted == 0 && strings.Contains(c.Fix, "-j") {
			t.Errorf("%s: with no slot free, the fix names -j: %q", tt.name, c.Fix)
		}
	}
	if c := SSHConnections("h", 16); c.Status != Warning {
		t.Errorf("SSHConnections(16) = %+v, want a warning", c)
	}
	if c := SSHConnections("h", 8); c.Status != OK {
		t.Errorf("SSHConnections(8) = %+v, want ok", c)
	}
}

// a tree with a hard-link pair, a sparse file, a plain file and a missing path
func TestReadSource(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("plain", strings.Repeat("x", 1000))
	write("a", "linked")
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("truncate", "-s", "8M", filepath.Join(dir, "holes")).Run(); err != nil {
		t.Fatal(err)
	}
	list := "plain\na\nb\nholes\n\nmissing\n"
	f := ReadSource(strings.NewReader(list), SourceConfig{Sep: '\n', Base: dir})
	if f.Records != 5 || f.Empty != 1 || f.Sampled != 4 || f.Missing.Count != 1 || f.HardLinks.Count != 2 || f.Sparse.Count != 1 {
		t.Fatalf("ReadSource = %+v", f)
	}
	if want := int64(1000 + 6 + 6 + 8<<20); f.Bytes != want || !f.SizeKnown || f.Estimated {
		t.Errorf("Bytes = %d (known %v, estimated %v), want %d", f.Bytes, f.SizeKnown, f.Estimated, want)
	}
	checks := Source(f, rsync.Preserved{})
	status := map[string]Status{}
	for _, c := range checks {
		status[c.Name] = c.Status
	}
	if status[NameSource] != Warning || status[NameHardLinks] != Warning || status[NameSparse] != Warning || status[NameACLs] != OK {
		t.Errorf("Source without -H -S: %+v", checks)
	}
	for _, c := range Source(f, rsync.Preserves([]string{"-HS"})) {
		if c.Name != NameSource && c.Status != OK {
			t.Errorf("Source with -HS: %+v", c)
		}
	}

	// --sizes: sizes from the list, the sample still lstat'ed; bad records counted
	sized := "10\tplain\n20\ta\nnosize\n"
	f = ReadSource(strings.NewReader(sized), SourceConfig{Sep: '\n', Sizes: true, Base: dir})
	if f.Records != 2 || f.Bad != 1 || f.Bytes != 30 || f.Sampled != 2 {
		t.Errorf("ReadSource --sizes = %+v", f)
	}
	// a sample of 1, and sizes scaled up from the first 2
	f = ReadSource(strings.NewReader("plain\nplain\nplain\nplain\x00"), SourceConfig{Sep: '\n', Base: dir, Sample: 1, SizeSample: 2})
	if f.Sampled != 1 || f.SizedPaths != 2 || !f.Estimated || f.Bytes != 4000 {
		t.Errorf("ReadSource sampled = %+v", f)
	}
	// a remote source: counted only
	f = ReadSource(strings.NewReader("a\x00b\x00"), SourceConfig{Sep: 0, Remote: true})
	if f.Records != 2 || f.Sampled != 0 || f.SizeKnown {
		t.Errorf("ReadSource remote = %+v", f)
	}
}

// xattrs and ACLs, where the file system takes them
func TestReadSourceXattrs(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lsetxattr(p, "user.doctor", []byte("1"), 0); err != nil {
		t.Skipf("no user xattrs on %s: %v", dir, err)
	}
	q := filepath.Join(dir, "g")
	if err := os.WriteFile(q, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	acl := true
	if out, err := exec.Command("setfacl", "-m", "u:12345:r", q).CombinedOutput(); err != nil {
		t.Logf("no ACL (%v: %s): checking xattrs only", err, out)
		acl = false
	}
	f := ReadSource(strings.NewReader("f\ng\n"), SourceConfig{Sep: '\n', Base: dir})
	if f.Xattrs.Count != 1 || f.Xattrs.Example != p {
		t.Errorf("xattrs = %+v", f.Xattrs)
	}
	if acl && (f.ACLs.Count != 1 || f.ACLs.Example != q) {
		t.Errorf("ACLs = %+v", f.ACLs)
	}
	for _, c := range Source(f, rsync.Preserved{}) {
		if c.Name == NameXattrs && c.Status != Warning || acl && c.Name == NameACLs && c.Status != Warning {
			t.Errorf("without -A -X: %+v", c)
		}
	}
}

func TestDest(t *testing.T) {
	src := SourceFacts{Records: 10, Bytes: 1 << 20, SizeKnown: true}
	facts := DestFacts{Path: "d", Exists: true, Existing: "d", FreeBytes: 100 << 20, FreeInodes: 1000, Inodes: 5000}
	tests := []struct {
		name string
		edit func(*DestFacts, *SourceFacts)
		want map[string]Status
	}{
		{"room", func(*DestFacts, *SourceFacts) {}, map[string]Status{NameDestWritable: OK, NameDestSpace: OK, NameDestInodes: OK}},
		{"full", func(d *DestFacts, _ *SourceFacts) { d.FreeBytes = 1000 }, map[string]Status{NameDestSpace: Error}},
		{"nearly full", func(d *DestFacts, _ *SourceFacts) { d.FreeBytes = 1100 << 10 }, map[string]Status{NameDestSpace: Warning}},
		{"inodes", func(d *DestFacts, _ *SourceFacts) { d.FreeInodes = 5 }, map[string]Status{NameDestInodes: Error}},
		{"no inode count", func(d *DestFacts, _ *SourceFacts) { d.FreeInodes, d.Inodes = 0, 0 }, map[string]Status{NameDestInodes: OK}},
		{"size unknown", func(d *DestFacts, s *SourceFacts) { d.FreeBytes, s.SizeKnown = 1, false }, map[string]Status{NameDestSpace: OK}},
		{"read only", func(d *DestFacts, _ *SourceFacts) { d.Writable = unix.EROFS }, map[string]Status{NameDestWritable: Error}},
		{"a file", func(d *DestFacts, _ *SourceFacts) { d.NotDir = true }, map[string]Status{NameDestWritable: Error}},
		{"statfs", func(d *DestFacts, _ *SourceFacts) { d.Statfs = unix.EIO }, map[string]Status{NameDestSpace: Warning}},
	}
	for _, tt := range tests {
		d, s := facts, src
		tt.edit(&d, &s)
		got := map[string]Status{}
		for _, c := range Dest(d, s) {
			got[c.Name] = c.Status
		}
		for name, want := range tt.want {
			if got[name] != want {
				t.Errorf("%s: %s = %v, want %v", tt.name, name, got[name], want)
			}
		}
	}
}

func TestLookDest(t *testing.T) {
	dir := t.TempDir()
	f := LookDest(filepath.Join(dir, "a", "b"))
	if f.Exists || f.Existing != dir || f.Writable != nil || f.Statfs != nil || f.FreeBytes == 0 {
		t.Errorf("LookDest(missing) = %+v", f)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LookDest created %s/a", dir)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if f := LookDest(filepath.Join(file, "sub")); !f.NotDir || f.Existing != file {
		t.Errorf("LookDest(below a file) = %+v", f)
	}
	if f := LookDest(dir); !f.Exists || f.NotDir || f.Existing != dir {
		t.Errorf("LookDest(dir) = %+v", f)
	}
}

func TestThrottle(t *testing.T) {
	noPSI := errors.New("/proc/pressure/io is missing")
	tests := []struct {
		name string
		f    ThrottleFacts
		want map[string]Status
	}{
		{"quota", ThrottleFacts{Info: throttle.CgroupInfo{Version: 2, Path: "/x", CPUs: 1.5, LimitDir: "/sys/fs/cgroup/x", Usage: "cpu.stat"}, Policy: throttle.Policy{Suspend: 80}},
			map[string]Status{NameCgroup: OK, NamePSI: OK}},
		{"pressure without PSI", ThrottleFacts{Policy: throttle.Policy{MaxIOPressure: 20}, IOPressureErr: noPSI, CPUPressureErr: noPSI},
			map[string]Status{NamePSI: Warning}},
		{"pressure with PSI", ThrottleFacts{Policy: throttle.Policy{MaxIOPressure: 20}}, map[string]Status{NamePSI: OK}},
		{"cgroup unreadable", ThrottleFacts{Err: errors.New("read /proc/self/cgroup: malformed")}, map[string]Status{NameCgroup: Warning}},
		{"off", ThrottleFacts{Off: true, Policy: throttle.Policy{MaxIOPressure: 20}, IOPressureErr: noPSI}, map[string]Status{NameCgroup: OK, NamePSI: OK}},
	}
	for _, tt := range tests {
		got := map[string]Status{}
		for _, c := range Throttle(tt.f) {
			got[c.Name] = max(got[c.Name], c.Status)
		}
		for name, want := range tt.want {
			if got[name] != want {
				t.Errorf("%s: %s = %v, want %v (%+v)", tt.name, name, got[name], want, Throttle(tt.f))
			}
		}
	}
}

func TestControl(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "prsync")
	tests := []struct {
		name   string
		lookup func() (string, error)
		off    bool
		want   Status
	}{
		{"there", func() (string, error) { return dir, nil }, false, OK},
		{"to be made", func() (string, error) { return missing, &fs.PathError{Op: "lstat", Path: missing, Err: fs.ErrNotExist} }, false, OK},
		{"parent not writable", func() (string, error) {
			return "/nonexistent-doctor/prsync-x", &fs.PathError{Op: "lstat", Path: "/nonexistent-doctor/prsync-x", Err: fs.ErrNotExist}
		}, false, Warning},
		{"not private", func() (string, error) { return dir, errors.New("control directory has mode 0777") }, false, Warning},
		{"off", nil, true, OK},
	}
	for _, tt := range tests {
		c := Control(LookControl(tt.off, tt.lookup))
		if c.Status != tt.want {
			t.Errorf("%s: Control = %+v, want %v", tt.name, c, tt.want)
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("LookControl created the directory")
	}
}

// fakeDaemon answers like an rsync daemon whose module "mod" admits limit connections at
// once; it counts the connections that are still open.
func fakeDaemon(t *testing.T, limit int) (addr string, open func() int) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	slots := make(chan struct{}, limit)
	live := make(chan int, 1)
	live <- 0
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				n := <-live
				live <- n + 1
				defer func() { n := <-live; live <- n - 1 }()
				fmt.Fprintf(c, "@RSYNCD: 32.0 sha512 md5\n")
				r := bufio.NewReader(c)
				r.ReadString('\n') // its version
				mod, _ := r.ReadString('\n')
				if strings.TrimSpace(mod) != "mod" {
					fmt.Fprintf(c, "@ERROR: Unknown module '%s'\n", strings.TrimSpace(mod))
					return
				}
				select {
				case slots <- struct{}{}:
					defer func() { <-slots }()
					fmt.Fprintf(c, "welcome\n@RSYNCD: OK\n")
					r.ReadString('\n') // until the client closes
				default:
					fmt.Fprintf(c, "@ERROR: max connections (%d) reached -- try again later\n", limit)
				}
			}()
		}
	}()
	return l.Addr().String(), func() int { n := <-live; live <- n; return n }
}

// realDaemon starts an rsync daemon on 127.0.0.1 whose module mod (dir, writable) admits
// limit sessions at once, and returns its address and its log file. The test stops it
// by its process group.
func realDaemon(t *testing.T, limit int) (addr, log string) {
	t.Helper()
	if _, err := exec.LookPath("rsync"); err != nil {
		t.Skip("rsync is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	d := t.TempDir()
	os.Mkdir(filepath.Join(d, "mod"), 0o755)
	log = filepath.Join(d, "log")
	conf := fmt.Sprintf("pid file = %[1]s/pid\nlog file = %[1]s/log\nlock file = %[1]s/lock\nuse chroot = no\n[mod]\npath = %[1]s/mod\nread only = no\nmax connections = %[2]d\n", d, limit)
	if os.Geteuid() == 0 {
		conf += "uid = root\ngid = root\n"
	}
	os.WriteFile(filepath.Join(d, "rsyncd.conf"), []byte(conf), 0o644)
	cmd := exec.Command("rsync", "--daemon", "--no-detach", "--config="+filepath.Join(d, "rsyncd.conf"), "--address=127.0.0.1", fmt.Sprintf("--port=%d", port))
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		cmd.Wait()
	})
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; i < 200; i++ {
		// as Greeting: a hang-up before the greeting is read resets the connection, and
		// the daemon logs a protocol error
		if _, err := Greeting(t.Context(), addr); err == nil {
			return addr, log
		}
		unix.Nanosleep(&unix.Timespec{Nsec: 10e6}, nil)
	}
	t.Fatalf("rsync daemon did not listen on %s", addr)
	return
}

// ProbeConnections counts the module's admitted and refused sessions as the run's rsyncs
// meet them, and ends each admitted session as any rsync does: the daemon's log holds
// normal sessions only, no protocol error (the probe used to hang up mid-handshake, and
// every admitted session logged "connection unexpectedly closed" and "error in rsync
// protocol data stream (code 12)"), and the slots are free once it returns.
func TestProbeConnections(t *testing.T) {
	addr, log := realDaemon(t, 2)
	rsyncPath, _ := exec.LookPath("rsync")
	for _, push := range []bool{true, false} {
		spec := ProbeSpec{Rsync: rsyncPath, Addr: addr, Module: "mod", Push: push, Args: []string{"--archive"}, TmpDir: t.TempDir()}
		p := ProbeConnections(t.Context(), spec, 5)
		if p.Tried != 5 || p.Admitted != 2 || p.Refused != 3 || p.Limit != 2 || p.Err != nil || p.Other != "" {
			t.Errorf("push %v: ProbeConnections = %+v", push, p)
		}
		if c := Connections(addr, "mod", 5, p); c.Status != Warning || !strings.Contains(c.Fix, "use -j 2") {
			t.Errorf("push %v: Connections = %+v", push, c)
		}
		// the slots were given back: all of 2 are admitted now
		if p := ProbeConnections(t.Context(), spec, 2); p.Admitted != 2 || p.Refused != 0 {
			t.Errorf("push %v: a second probe of 2 = %+v", push, p)
		}
		if ents, _ := os.ReadDir(spec.TmpDir); len(ents) != 0 {
			t.Errorf("push %v: the probe created %v", push, ents)
		}
	}
	spec := ProbeSpec{Rsync: rsyncPath, Addr: addr, Module: "nope", Push: true}
	if p := ProbeConnections(t.Context(), spec, 2); !strings.Contains(p.Other, "Unknown module") {
		t.Errorf("ProbeConnections(unknown module) = %+v", p)
	}
	if p := ProbeConnections(t.Context(), ProbeSpec{Rsync: rsyncPath, Addr: addr, Module: "mod", Push: true}, 100); p.Tried != MaxConnProbes {
		t.Errorf("ProbeConnections(100) tried %d, want %d", p.Tried, MaxConnProbes)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// what a real client's session and a refused one log; nothing else
		_, msg, _ := strings.Cut(l, "] ")
		switch {
		case strings.HasPrefix(msg, "rsyncd version "), strings.HasPrefix(msg, "connect from "),
			strings.HasPrefix(msg, "rsync allowed access on module mod "), strings.HasPrefix(msg, "rsync to mod/ from "),
			strings.HasPrefix(msg, "rsync on mod/ from "), msg == "receiving file list", msg == "building file list",
			strings.HasPrefix(msg, "sent "), msg == "max connections (2) reached",
			strings.HasPrefix(msg, "unknown module 'nope' tried from "):
		default:
			t.Errorf("the daemon logged %q", l)
		}
	}
	if !strings.Contains(string(b), "] sent ") {
		t.Errorf("no session ended normally:\n%s", b)
	}
}

// Greeting reads a daemon's protocol and leaves no connection open.
func TestGreeting(t *testing.T) {
	addr, open := fakeDaemon(t, 2)
	proto, err := Greeting(t.Context(), addr)
	if proto != 32 || err != nil {
		t.Errorf("Greeting = %d, %v", proto, err)
	}
	for i := 0; i < 100 && open() > 0; i++ {
		unix.Nanosleep(&unix.Timespec{Nsec: 10e6}, nil)
	}
	if n := open(); n != 0 {
		t.Errorf("%d connections left open", n)
	}
}
