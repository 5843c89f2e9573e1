package control

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prsync/prsync/internal/cmdline"
)

// helperEnv makes the test binary run prsync ctl with its arguments, as another user.
const helperEnv = "PRSYNC_CONTROL_TEST_CTL"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// fakeHandler is a run that only keeps its settings.
type fakeHandler struct {
	mu     sync.Mutex
	jobs   int
	bw     string
	paused bool
	calls  []string
}

func newFake() *fakeHandler { return &fakeHandler{jobs: 8, bw: "off"} }

func (f *fakeHandler) record(call string) {
	f.calls = append(f.calls, call)
}

func (f *fakeHandler) Status() (Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("status")
	return Status{Jobs: f.jobs, MaxJobs: 32, Running: 3, Paused: f.paused, BWLimit: f.bw,
		FilesDone: 1200, BytesDone: 3_400_000_000, FilesQueued: 50, RateBps: 96e6, Elapsed: 65}, nil
}

func (f *fakeHandler) SetJobs(n int) (int, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(fmt.Sprintf("jobs %d", n))
	if n > 32 {
		return f.jobs, f.jobs, &Error{Msg: fmt.Sprintf("jobs %d: more than --max-jobs 32", n), Hint: "restart prsync with a bigger --max-jobs"}
	}
	old := f.jobs
	f.jobs = n
	return old, n, nil
}

func (f *fakeHandler) SetBWLimit(spec string) (string, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("bwlimit " + spec)
	if strings.Contains(spec, "bad") {
		return f.bw, f.bw, fmt.Errorf("bad bwlimit %q: want a rate such as 20M, a timetable or off", spec)
	}
	old := f.bw
	f.bw = spec
	return old, spec, nil
}

func (f *fakeHandler) Pause() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("pause")
	f.paused = true
	return nil
}

func (f *fakeHandler) Resume() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("resume")
	f.paused = false
	return nil
}

func (f *fakeHandler) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// shortDir is a private temporary directory with a short path: a socket's path must fit
// in about 100 bytes.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "ctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startServer serves h on a socket in a new directory, with a short timeout.
func startServer(t *testing.T, h Handler) (*Server, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	s, err := listen(filepath.Join(shortDir(t), "4242.sock"), h, cmdline.Warner(log), uint32(os.Getuid()), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, log
}

// roundTrip sends raw bytes on a new connection and returns the reply line.
func roundTrip(t *testing.T, path, raw string) (Reply, string) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read the reply: %v (got %q)", err, line)
	}
	var rep Reply
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		t.Fatalf("reply %q: %v", line, err)
	}
	return rep, line
}

// ctl runs prsync ctl in-process with the socket directory dir.
func ctl(dir string, args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	c := client{stdout: &o, stderr: &e, dir: func() (string, error) { return dir, nil }}
	code = c.main(args)
	return code, o.String(), e.String()
}
