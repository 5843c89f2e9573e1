package control

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCommandsRoundTrip(t *testing.T) {
	timetable := "08:00,20M 19:00,200M 23:00,off"
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    string // a substring of stdout; "" wants it empty
		wantErr    string // a substring of stderr; "" wants it empty
		wantCalls  []string
		wantJobs   int
		wantBW     string
		wantPaused bool
	}{
		{name: "status", args: []string{"status"},
			wantOut:   "prsync 4242: jobs 8 (max 32), running 3, bwlimit off, done 1200 files 3.40 GB, queued 50, 12.00 MB/s, elapsed 1:05\n",
			wantCalls: []string{"status"}, wantJobs: 8, wantBW: "off"},
		{name: "status json", args: []string{"--json", "status"},
			wantOut:   `{"ok":true,"pid":`,
			wantCalls: []string{"status"}, wantJobs: 8, wantBW: "off"},
		{name: "jobs", args: []string{"jobs", "4"},
			wantOut: "jobs: 8 -> 4\n", wantCalls: []string{"jobs 4"}, wantJobs: 4, wantBW: "off"},
		{name: "jobs json", args: []string{"jobs", "4", "--json"},
			wantOut: `"cmd":"jobs","old":8,"new":4}`, wantCalls: []string{"jobs 4"}, wantJobs: 4, wantBW: "off"},
		{name: "jobs over the max", args: []string{"jobs", "100"}, wantCode: 1,
			wantErr:   "prsync: error: jobs 100: more than --max-jobs 32\nprsync: hint: restart prsync with a bigger --max-jobs\n",
			wantCalls: []string{"jobs 100"}, wantJobs: 8, wantBW: "off"},
		{name: "jobs zero", args: []string{"jobs", "0"}, wantCode: 1,
			wantErr: "prsync: error: bad jobs 0", wantJobs: 8, wantBW: "off"},
		{name: "jobs not a number", args: []string{"jobs", "many"}, wantCode: 1,
			wantErr: "prsync: hint: see prsync ctl --help", wantJobs: 8, wantBW: "off"},
		{name: "bwlimit rate", args: []string{"bwlimit", "20M"},
			wantOut: "bwlimit: off -> 20M\n", wantCalls: []string{"bwlimit 20M"}, wantJobs: 8, wantBW: "20M"},
		{name: "bwlimit timetable", args: []string{"bwlimit", timetable},
			wantOut: "bwlimit: off -> " + timetable + "\n", wantCalls: []string{"bwlimit " + timetable}, wantJobs: 8, wantBW: timetable},
		{name: "bwlimit timetable unquoted", args: []string{"bwlimit", "08:00,20M", "19:00,200M", "23:00,off"},
			wantOut: "bwlimit: off -> " + timetable + "\n", wantCalls: []string{"bwlimit " + timetable}, wantJobs: 8, wantBW: timetable},
		{name: "bwlimit refused", args: []string{"bwlimit", "bad"}, wantCode: 1,
			wantErr: `prsync: error: bad bwlimit "bad"`, wantCalls: []string{"bwlimit bad"}, wantJobs: 8, wantBW: "off"},
		{name: "bwlimit refused json", args: []string{"--json", "bwlimit", "bad"}, wantCode: 1,
			wantOut: `{"ok":false,`, wantErr: `prsync: error: bad bwlimit "bad"`, wantCalls: []string{"bwlimit bad"}, wantJobs: 8, wantBW: "off"},
		{name: "bwlimit without a value", args: []string{"bwlimit"}, wantCode: 1,
			wantErr: "prsync: error: expected", wantJobs: 8, wantBW: "off"},
		{name: "pause", args: []string{"pause"},
			wantOut: "paused\n", wantCalls: []string{"pause"}, wantJobs: 8, wantBW: "off", wantPaused: true},
		{name: "resume", args: []string{"resume"},
			wantOut: "resumed\n", wantCalls: []string{"resume"}, wantJobs: 8, wantBW: "off"},
		{name: "no command", args: nil, wantCode: 1,
			wantErr: "prsync: error: expected one of", wantJobs: 8, wantBW: "off"},
		{name: "unknown command", args: []string{"stop"}, wantCode: 1,
			wantErr: "prsync: error: unexpected argument stop", wantJobs: 8, wantBW: "off"},
		{name: "help", args: []string{"--help"},
			wantOut: "Usage: prsync ctl <command>", wantJobs: 8, wantBW: "off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newFake()
			s, _ := startServer(t, h)
			args := append([]string{"--socket", s.Path()}, tt.args...)
			code, stdout, stderr := ctl("/nonexistent", args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			check := func(what, got, want string) {
				if (want == "" && got != "") || !strings.Contains(got, want) {
					t.Errorf("%s %q, want %q", what, got, want)
				}
			}
			check("stdout", strings.ReplaceAll(stdout, fmt.Sprint(os.Getpid()), "4242"), tt.wantOut)
			check("stderr", stderr, tt.wantErr)
			if calls := h.Calls(); !slices.Equal(calls, tt.wantCalls) {
				t.Errorf("handler calls %q, want %q", calls, tt.wantCalls)
			}
			if h.jobs != tt.wantJobs || h.bw != tt.wantBW || h.paused != tt.wantPaused {
				t.Errorf("handler jobs %d bwlimit %q paused %v, want %d %q %v", h.jobs, h.bw, h.paused, tt.wantJobs, tt.wantBW, tt.wantPaused)
			}
		})
	}
}

func TestStatusJSONIsTheReply(t *testing.T) {
	s, _ := startServer(t, newFake())
	code, stdout, _ := ctl("", "--socket", s.Path(), "--json", "status")
	var rep Reply
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 {
		t.Fatalf("exit %d, stdout %q: %v", code, stdout, err)
	}
	if !rep.OK || rep.Cmd != "status" || rep.Status == nil || rep.Status.PID != os.Getpid() || rep.Status.BytesDone != 3_400_000_000 {
		t.Errorf("reply %+v", rep)
	}
}

func TestStatusLine(t *testing.T) {
	tests := []struct {
		st   Status
		want string
	}{
		{Status{PID: 7, Jobs: 4, Running: 4, InputDone: true, Elapsed: 3},
			"prsync 7: jobs 4, running 4, bwlimit off, done 0 files 0 B, 0 B/s, elapsed 0:03"},
		{Status{PID: 7, Jobs: 6, JobsAuto: true, MaxJobs: 32, Running: 6, Suspended: 6, Paused: true,
			BWLimit: "08:00,20M 19:00,200M 23:00,off", BWLimitNow: "20M", FilesDone: 10, BytesDone: 2048,
			FilesQueued: 3, FilesFailed: 1, RateBps: 8000, Elapsed: 3725},
			"prsync 7: paused, jobs 6 auto (max 32), running 6, suspended 6, bwlimit 08:00,20M 19:00,200M 23:00,off (now 20M), done 10 files 2.05 kB, queued 3, failed 1, 1.00 kB/s, elapsed 1:02:05"},
	}
	for _, tt := range tests {
		if got := statusLine(&tt.st); got != tt.want {
			t.Errorf("statusLine:\n got %s\nwant %s", got, tt.want)
		}
	}
}

// serveOnce answers every connection on a new socket with reply, raw.
func serveOnce(t *testing.T, reply string) string {
	t.Helper()
	path := filepath.Join(shortDir(t), "9.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(reply))
			c.Close()
		}
	}()
	return path
}

func TestClientCannotReach(t *testing.T) {
	dir := shortDir(t)
	stale := filepath.Join(dir, "999999999.sock")
	staleSocket(t, stale)
	tests := []struct {
		name    string
		socket  string
		wantErr string
	}{
		{"no socket", filepath.Join(dir, "nothing.sock"), "prsync: error: no prsync socket at "},
		{"a stale socket", stale, "prsync: error: prsync 999999999 is not running: no one answers on "},
		{"no reply", serveOnce(t, ""), "without a reply"},
		{"not json", serveOnce(t, "hello\n"), "prsync: error: bad reply on "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := ctl(dir, "--socket", tt.socket, "status")
			if code != 2 || stdout != "" || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("exit %d, stdout %q, stderr %q: want 2 and %q", code, stdout, stderr, tt.wantErr)
			}
		})
	}
}

// serveAs serves a fake handler at dir/PID.sock.
func serveAs(t *testing.T, dir string, pid int) (*Server, *fakeHandler) {
	t.Helper()
	h := newFake()
	s, err := listen(SocketPath(dir, pid), h, nil, uint32(os.Getuid()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, h
}

func TestDiscovery(t *testing.T) {
	t.Run("no directory", func(t *testing.T) {
		dir := filepath.Join(shortDir(t), "prsync")
		code, _, stderr := ctl(dir, "status")
		want := "prsync: error: no running prsync found in " + dir + "\nprsync: hint: "
		if code != 2 || !strings.HasPrefix(stderr, want) {
			t.Errorf("exit %d, stderr %q: want 2 and %q", code, stderr, want)
		}
	})
	t.Run("none", func(t *testing.T) {
		dir := shortDir(t)
		staleSocket(t, filepath.Join(dir, "999999999.sock")) // its process is gone: removed
		staleSocket(t, filepath.Join(dir, "1.sock"))         // init lives: kept, ignored
		os.WriteFile(filepath.Join(dir, "123.sock"), nil, 0o600)
		code, _, stderr := ctl(dir, "status")
		want := "prsync: error: no running prsync found in " + dir + "\nprsync: hint: "
		if code != 2 || !strings.HasPrefix(stderr, want) {
			t.Errorf("exit %d, stderr %q: want 2 and %q", code, stderr, want)
		}
		if _, err := os.Lstat(filepath.Join(dir, "999999999.sock")); err == nil {
			t.Error("the stale socket of a dead process is still there")
		}
		if _, err := os.Lstat(filepath.Join(dir, "1.sock")); err != nil {
			t.Errorf("the socket of a live process was removed: %v", err)
		}
	})
	t.Run("one", func(t *testing.T) {
		dir := shortDir(t)
		_, h := serveAs(t, dir, 111)
		staleSocket(t, filepath.Join(dir, "999999999.sock"))
		os.Mkdir(filepath.Join(dir, "222.sock"), 0o700) // not a socket
		code, stdout, stderr := ctl(dir, "jobs", "3")
		if code != 0 || stdout != "jobs: 8 -> 3\n" || stderr != "" {
			t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		if h.Calls()[0] != "jobs 3" {
			t.Errorf("calls %q", h.Calls())
		}
	})
	t.Run("two", func(t *testing.T) {
		dir := shortDir(t)
		_, h1 := serveAs(t, dir, 222)
		_, h2 := serveAs(t, dir, 1111)
		code, stdout, stderr := ctl(dir, "pause")
		want := "prsync: error: 2 prsyncs are running, pids 222, 1111\nprsync: hint: pick one with --pid, as in: prsync ctl --pid 222 status\n"
		if code != 1 || stdout != "" || stderr != want {
			t.Errorf("exit %d, stdout %q, stderr %q: want 1 and %q", code, stdout, stderr, want)
		}
		code, stdout, stderr = ctl(dir, "--pid", "1111", "pause")
		if code != 0 || stdout != "paused\n" || stderr != "" {
			t.Errorf("--pid 1111: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		if len(h1.Calls()) != 0 || !slices.Equal(h2.Calls(), []string{"pause"}) {
			t.Errorf("calls %q and %q: want only the second paused", h1.Calls(), h2.Calls())
		}
		code, _, stderr = ctl(dir, "--pid", "333", "pause")
		if want := "prsync: error: no prsync with pid 333 found in " + dir + "\n"; code != 2 || !strings.HasPrefix(stderr, want) {
			t.Errorf("--pid 333: exit %d, stderr %q: want 2 and %q", code, stderr, want)
		}
	})
}

// The real Main, with the socket where DefaultDir puts it.
func TestMainFindsDefaultDir(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", shortDir(t))
	dir, err := DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "prsync"); dir != want {
		t.Fatalf("DefaultDir = %s, want %s", dir, want)
	}
	s, err := Listen(SocketPath(dir, os.Getpid()), newFake(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var o, e strings.Builder
	if code := Main([]string{"bwlimit", "off"}, &o, &e); code != 0 || o.String() != "bwlimit: off -> off\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, o.String(), e.String())
	}
}
