package tests

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeRsync acts as rsync for faults a real one cannot be made to produce on demand.
// PRSYNC_TEST_FAKE_RSYNC holds the behaviour; "--version" always answers like rsync.
// "version:V" answers --version as rsync V and runs the real rsync otherwise.
func fakeRsync() int {
	mode := os.Getenv("PRSYNC_TEST_FAKE_RSYNC")
	ver, isVer := strings.CutPrefix(mode, "version:")
	for _, a := range os.Args[1:] {
		if a == "--version" {
			if !isVer {
				ver = "3.5.0"
			}
			fmt.Printf("rsync  version %s  protocol version 30\n", ver)
			return 0
		}
	}
	if isVer {
		return execRealRsync()
	}
	if dir, ok := strings.CutPrefix(mode, "keep-list:"); ok {
		return keepList(dir)
	}
	if code, ok := strings.CutPrefix(mode, "list-only-fails:"); ok {
		// the real rsync, but a --list-only run (prsync's listing of the far side) fails
		// as when the far side is gone
		if !strings.Contains(strings.Join(os.Args[1:], "\x00")+"\x00", "--list-only\x00") {
			return execRealRsync()
		}
		fmt.Fprintln(os.Stderr, "rsync: failed to connect to 127.0.0.1 (127.0.0.1): Connection refused (111)")
		fmt.Fprintf(os.Stderr, "rsync error: error in socket IO (code %s) at clientserver.c(139) [Receiver=3.5.0]\n", code)
		n, _ := strconv.Atoi(code)
		return n
	}
	// count invocations in a file, so a test can fail the first N and pass the rest
	state := os.Getenv("PRSYNC_TEST_FAKE_STATE")
	n := 0
	if state != "" {
		b, _ := os.ReadFile(state)
		n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		n++
		os.WriteFile(state, []byte(strconv.Itoa(n)), 0o644)
	}
	var code int
	if _, err := fmt.Sscanf(mode, "exit:%d", &code); err == nil {
		fmt.Fprintf(os.Stderr, "rsync: fake failure (code %d)\n", code)
		return code
	}
	if _, err := fmt.Sscanf(mode, "full:%d", &code); err == nil {
		return fakeFull(code)
	}
	if mode == "both-streams" {
		return fakeBothStreams()
	}
	if rest, ok := strings.CutPrefix(mode, "pathless:"); ok {
		return fakePathless(rest)
	}
	var first int
	if _, err := fmt.Sscanf(mode, "fail-first:%d:%d", &first, &code); err == nil {
		if n <= first {
			fmt.Fprintf(os.Stderr, "rsync: fake failure %d (code %d)\n", n, code)
			return code
		}
		return execRealRsync()
	}
	if _, err := fmt.Sscanf(mode, "mkdir-race:%d", &first); err == nil {
		// the first N lose a race to create DEST's directory to another rsync, as two
		// sessions of one copy into a new directory of a daemon's module (--mkpath) do
		if n <= first {
			fmt.Fprintln(os.Stderr, `rsync: [Receiver] mkdir "sub" (in mod) failed: File exists (17)`)
			fmt.Fprintln(os.Stderr, "rsync error: error in file IO (code 11) at main.c(793) [Receiver=3.5.0]")
			return 11
		}
		return execRealRsync()
	}
	fmt.Fprintf(os.Stderr, "fake rsync: unknown mode %q\n", mode)
	return 2
}

// fakeFull is the mode "full:CODE": the destination is full. It fails to write the first
// path of its list with ENOSPC, in rsync's words, and exits CODE: 11 as rsync does, or 19
// when rsync's other process reports first, on the SIGUSR1 its partner sent it.
func fakeFull(code int) int {
	list, _ := io.ReadAll(os.Stdin)
	first, _, _ := bytes.Cut(list, []byte{0})
	dest := strings.TrimSuffix(os.Args[len(os.Args)-1], "/")
	fmt.Fprintf(os.Stderr, "rsync: [receiver] write failed on \"%s/%s\": No space left on device (28)\n", dest, first)
	if code == 19 {
		fmt.Fprintln(os.Stderr, "rsync error: received SIGUSR1 (code 19) at main.c(1592) [generator=3.5.0]")
	} else {
		fmt.Fprintf(os.Stderr, "rsync error: error in file IO (code %d) at receiver.c(381) [receiver=3.5.0]\n", code)
	}
	return code
}

// fakeBothStreams names every path of its list on both streams at once, from two
// goroutines: an out-format line on stdout (as a push sender logs a file) and a receiver's
// mkstemp failure on stderr, then exits 23, as rsync does when no file landed.
func fakeBothStreams() int {
	list, _ := io.ReadAll(os.Stdin)
	dest := strings.TrimSuffix(os.Args[len(os.Args)-1], "/")
	var names []string
	for _, e := range bytes.Split(list, []byte{0}) {
		if len(e) > 0 {
			names = append(names, string(e))
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for _, n := range names {
			fmt.Fprintf(os.Stdout, ">f+++++++++|1|43|%s\n", n)
		}
	}()
	go func() {
		defer wg.Done()
		for _, n := range names {
			dir, base := filepath.Split(n)
			fmt.Fprintf(os.Stderr, "rsync: [receiver] mkstemp \"%s/%s.%s.AbCdEf\" failed: Operation not permitted (1)\n", dest, dir, base)
		}
	}()
	wg.Wait()
	fmt.Fprintln(os.Stderr, "rsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1394) [sender=3.5.0]")
	return 23
}

// fakePathless is the mode "pathless:CODE:P1|P2…": while one of the paths P is in its
// --files-from list (NUL-separated, on stdin), it fails at once with a line that names no
// path and exits CODE, as rsync does on a failure no message ties to a file (a sender
// that died, program diagnostics); otherwise it runs the real rsync over the same list.
// Run as the far side (--server, the pipe transport's), it is the real rsync.
// PRSYNC_TEST_FAKE_LOG, when set, gets one line per run: "fail" or "rsync", and the
// number of paths.
func fakePathless(arg string) int {
	if slices.Contains(os.Args[1:], "--server") {
		return execRealRsync() // the far side of a pipe transport: the list is the client's
	}
	c, paths, _ := strings.Cut(arg, ":")
	code, err := strconv.Atoi(c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake rsync: bad mode pathless:%s\n", arg)
		return 2
	}
	list, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	bad := strings.Split(paths, "|")
	n, fail := 0, false
	for _, e := range bytes.Split(list, []byte{0}) {
		if len(e) > 0 {
			n++
			fail = fail || slices.Contains(bad, string(e))
		}
	}
	if log := os.Getenv("PRSYNC_TEST_FAKE_LOG"); log != "" {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%s %d\n", map[bool]string{true: "fail", false: "rsync"}[fail], n)
			f.Close()
		}
	}
	if fail {
		// the sender's fstat of an open file failing: rsync exits at once (sender.c)
		fmt.Fprintln(os.Stderr, "rsync: [sender] fstat failed: Input/output error (5)")
		fmt.Fprintf(os.Stderr, "rsync error: error in file IO (code %d) at sender.c(733) [sender=3.5.0]\n", code)
		return code
	}
	// the list goes back on stdin: an unlinked file, so any size fits and nothing is left
	f, err := os.CreateTemp("", "fake-rsync-list-")
	if err == nil {
		os.Remove(f.Name())
	}
	return execRealRsyncOn(f, err, list, 2)
}

// execRealRsyncOn writes list to f, a new file (unless err, from making it, says there is
// none), and runs the real rsync with f as its stdin; when it cannot, it returns code.
func execRealRsyncOn(f *os.File, err error, list []byte, code int) int {
	if err == nil {
		_, err = f.Write(list)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err == nil {
		err = unix.Dup2(int(f.Fd()), 0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return code
	}
	return execRealRsync()
}

// keepList keeps the list an rsync reads on stdin (--files-from=-) in a file of dir, then
// runs the real rsync on it: what prsync hands each rsync, with a real one reading it.
func keepList(dir string) int {
	if !slices.Contains(os.Args[1:], "--files-from=-") {
		return execRealRsync()
	}
	list, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 127
	}
	f, err := os.CreateTemp(dir, "list-*")
	return execRealRsyncOn(f, err, list, 127)
}

// execRealRsync replaces the fake with the real rsync, same arguments and stdin.
func execRealRsync() int {
	p, err := exec.LookPath("rsync")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 127
	}
	err = syscall.Exec(p, append([]string{"rsync"}, os.Args[1:]...), os.Environ())
	fmt.Fprintln(os.Stderr, err)
	return 127
}

// fakeRsyncPath returns a path to this test binary usable as --rsync, with the mode in env.
func fakeRsyncPath(t testing.TB) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}
