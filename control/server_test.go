package control

import (
	"bufio"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBadRequests(t *testing.T) {
	h := newFake()
	s, _ := startServer(t, h)
	tests := []struct {
		name, raw, wantErr string
	}{
		{"unknown command", `{"cmd":"frobnicate"}` + "\n", `unknown command "frobnicate"`},
		{"no cmd", `{"arg":"4"}` + "\n", "request has no cmd"},
		{"null", "null\n", "request has no cmd"},
		{"not json", "jobs 4\n", "bad request"},
		{"arg not a string", `{"cmd":"jobs","arg":4}` + "\n", "bad request"},
		{"jobs not a number", `{"cmd":"jobs","arg":"many"}` + "\n", `bad jobs "many"`},
		{"jobs zero", `{"cmd":"jobs","arg":"0"}` + "\n", `bad jobs "0"`},
		{"jobs negative", `{"cmd":"jobs","arg":"-3"}` + "\n", `bad jobs "-3"`},
		{"jobs empty", `{"cmd":"jobs"}` + "\n", `bad jobs ""`},
		{"jobs over the handler's max", `{"cmd":"jobs","arg":"100"}` + "\n", "more than --max-jobs 32"},
		{"bwlimit empty", `{"cmd":"bwlimit","arg":"  "}` + "\n", "bwlimit needs a rate"},
		{"bwlimit refused by the handler", `{"cmd":"bwlimit","arg":"bad"}` + "\n", `bad bwlimit "bad"`},
		{"status with an argument", `{"cmd":"status","arg":"x"}` + "\n", "status takes no argument"},
		{"pause with an argument", `{"cmd":"pause","arg":"x"}` + "\n", "pause takes no argument"},
		{"oversized line", `{"cmd":"status","arg":"` + strings.Repeat("x", 2*MaxRequest) + `"}` + "\n", "request longer than 4096 bytes"},
		{"oversized, no newline", strings.Repeat("x", MaxRequest+1), "request longer than 4096 bytes"},
		{"no newline within the deadline", `{"cmd":"status"}`, "no request line within 300ms"},
		{"partial line within the deadline", `{"cmd":`, "no request line within 300ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, line := roundTrip(t, s.Path(), tt.raw)
			if rep.OK || !strings.Contains(rep.Error, tt.wantErr) {
				t.Errorf("reply %s: want an error with %q", line, tt.wantErr)
			}
			if rep.PID != os.Getpid() {
				t.Errorf("reply %s: want pid %d", line, os.Getpid())
			}
		})
	}
	// the server is still there and nothing changed
	rep, line := roundTrip(t, s.Path(), `{"cmd":"status"}`+"\n")
	if !rep.OK || rep.Status == nil || rep.Status.Jobs != 8 || rep.Status.BWLimit != "off" {
		t.Errorf("status after the bad requests: %s", line)
	}
}

func TestHintsAreSent(t *testing.T) {
	s, _ := startServer(t, newFake())
	rep, line := roundTrip(t, s.Path(), `{"cmd":"jobs","arg":"100"}`+"\n")
	if rep.Hint != "restart prsync with a bigger --max-jobs" || rep.Cmd != "jobs" {
		t.Errorf("reply %s: want the handler's hint", line)
	}
}

func TestRequestsEndedByEOF(t *testing.T) {
	s, _ := startServer(t, newFake())
	c, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(`{"cmd":"status"}`))
	c.(*net.UnixConn).CloseWrite()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, `{"ok":true`) {
		t.Errorf("reply %q, %v: want ok", line, err)
	}
}

// A client that sends nothing holds neither the server nor other clients.
func TestStalledClientDoesNotBlock(t *testing.T) {
	s, _ := startServer(t, newFake())
	var stalled []net.Conn
	for range maxConns + 4 {
		c, err := net.Dial("unix", s.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		stalled = append(stalled, c)
	}
	t0 := time.Now()
	rep, line := roundTrip(t, s.Path(), `{"cmd":"status"}`+"\n")
	if !rep.OK {
		t.Errorf("status beside stalled clients: %s", line)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("status took %v beside stalled clients", d)
	}
	// each stalled client is answered and dropped at the deadline
	for _, c := range stalled {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.Contains(line, "no request line within") {
			t.Errorf("stalled client got %q, %v", line, err)
		}
	}
}

// A connection closed with no request is a probe: no reply, no log.
func TestProbeIsQuiet(t *testing.T) {
	s, log := startServer(t, newFake())
	for range 3 {
		c, err := net.Dial("unix", s.Path())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if rep, line := roundTrip(t, s.Path(), `{"cmd":"status"}`+"\n"); !rep.OK {
		t.Errorf("status after probes: %s", line)
	}
	if log.String() != "" {
		t.Errorf("probes logged %q", log.String())
	}
}

func TestConcurrentRequests(t *testing.T) {
	h := newFake()
	s, _ := startServer(t, h)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			req := `{"cmd":"status"}`
			if i%2 == 1 {
				req = `{"cmd":"jobs","arg":"4"}`
			}
			if rep, line := roundTrip(t, s.Path(), req+"\n"); !rep.OK {
				t.Errorf("%s: %s", req, line)
			}
		})
	}
	wg.Wait()
	if len(h.Calls()) != 20 {
		t.Errorf("handler calls %v: want 20", h.Calls())
	}
}

func TestListenMode(t *testing.T) {
	s, _ := startServer(t, newFake())
	fi, err := os.Lstat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v: want a socket with mode 0600", fi.Mode())
	}
}

// staleSocket leaves a socket file at path that no one listens on.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := net.Dial("unix", path); err == nil {
		t.Fatal("the stale socket answers")
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "1.sock")
	staleSocket(t, path)
	s, err := Listen(path, newFake(), nil)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer s.Close()
	if rep, line := roundTrip(t, path, `{"cmd":"status"}`+"\n"); !rep.OK {
		t.Errorf("status: %s", line)
	}
}

func TestListenRefuses(t *testing.T) {
	dir := shortDir(t)
	live := filepath.Join(dir, "live.sock")
	ls, err := Listen(live, newFake(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	stale := filepath.Join(dir, "stale.sock")
	staleSocket(t, stale)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("keep me"), 0o600)

	tests := []struct {
		name    string
		setup   func(path string)
		wantErr string
	}{
		{"a live socket", func(path string) { os.Link(live, path) }, "another process is listening"},
		{"a symlink to a stale socket", func(path string) { os.Symlink(stale, path) }, "is a symlink"},
		{"a symlink to a file", func(path string) { os.Symlink(file, path) }, "is a symlink"},
		{"a dangling symlink", func(path string) { os.Symlink(filepath.Join(dir, "nowhere"), path) }, "is a symlink"},
		{"a regular file", func(path string) { os.WriteFile(path, nil, 0o600) }, "is not a socket"},
		{"a directory", func(path string) { os.Mkdir(path, 0o700) }, "is not a socket"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, string(rune('a'+i))+".sock")
			tt.setup(path)
			before, _ := os.Lstat(path)
			s, err := Listen(path, newFake(), nil)
			if err == nil {
				s.Close()
				t.Fatal("Listen succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q: want %q", err, tt.wantErr)
			}
			if after, err := os.Lstat(path); err != nil || !os.SameFile(before, after) {
				t.Errorf("Listen changed %s: %v", path, err)
			}
		})
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Errorf("the symlink's target changed: %q", b)
	}
	if rep, line := roundTrip(t, live, `{"cmd":"status"}`+"\n"); !rep.OK {
		t.Errorf("the live server after: %s", line)
	}
}

func TestCloseRemovesSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "1.sock")
	s, err := Listen(path, newFake(), nil) // the real 5 s timeout
	if err != nil {
		t.Fatal(err)
	}
	idle, err := net.Dial("unix", path) // a client that sends nothing
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	time.Sleep(50 * time.Millisecond) // let the server accept it
	t0 := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("Close took %v with an idle client", d)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket is still there: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := net.Dial("unix", path); err == nil {
		t.Error("dial after Close succeeded")
	}
}

// Close removes only its own socket: not one that replaced it.
func TestCloseKeepsAnotherSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "1.sock")
	s, err := Listen(path, newFake(), nil)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	staleSocket(t, path)
	s.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("Close removed a socket not its own: %v", err)
	}
}

func TestAllowed(t *testing.T) {
	tests := []struct {
		peer, own uint32
		want      bool
	}{
		{1000, 1000, true},
		{0, 1000, true},
		{0, 0, true},
		{1001, 1000, false},
		{65534, 0, false},
		{65534, 1000, false},
	}
	for _, tt := range tests {
		if got := allowed(tt.peer, tt.own); got != tt.want {
			t.Errorf("allowed(%d, %d) = %v, want %v", tt.peer, tt.own, got, tt.want)
		}
	}
}

func TestPeerCred(t *testing.T) {
	s, _ := startServer(t, newFake())
	c, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// our own end: the peer of the client is the server, this process
	uid, pid, err := peerCred(c.(*net.UnixConn))
	if err != nil {
		t.Skipf("no peer credentials here: %v", err)
	}
	if int(uid) != os.Getuid() || pid != os.Getpid() {
		t.Errorf("peerCred = uid %d pid %d, want uid %d pid %d", uid, pid, os.Getuid(), os.Getpid())
	}
}
