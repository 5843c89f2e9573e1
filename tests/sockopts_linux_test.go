package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDaemonNoDelay checks that the rsyncs prsync starts against a real daemon (a push and a
// pull) have TCP_NODELAY on their socket, read from the running rsync's own socket
// (pidfd_getfd), and that options of the user's own after -- replace it: then the socket is
// as rsync leaves it, without. The copy is slowed (--bwlimit after --) so that the rsync
// lives while the test looks, however loaded the machine.
func TestDaemonNoDelay(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	if _, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		t.Skipf("no pidfd here: %v", err)
	}
	w := newWork(t)
	served := filepath.Join(w.Dir, "served")
	writeFile(t, filepath.Join(w.Src, "slow"), strings.Repeat("x", 128<<10), 0o644)
	writeFile(t, filepath.Join(served, "slow"), strings.Repeat("y", 128<<10), 0o644)
	d := startDaemon(t, served)

	tests := []struct {
		name   string
		args   []string
		extra  []string // after -- besides --bwlimit
		want   bool
		option bool // the start event's rsync_args hold NoDelay
	}{
		{"push", []string{"--root", w.Src, d.URL() + "push/"}, nil, true, true},
		{"pull", []string{"--root", d.URL(), filepath.Join(w.Dir, "pulled")}, nil, true, true},
		{"push, the user's sockopts", []string{"--root", w.Src, d.URL() + "own/"}, []string{"--sockopts=SO_KEEPALIVE"}, false, false},
		{"local", []string{"--root", w.Src, filepath.Join(w.Dir, "local")}, nil, false, false},
	}
	t.Run("copies", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel() // each its own DEST
				noDelay(t, w.Dir, tt.args, tt.extra, tt.want, tt.option, tt.name == "local")
			})
		}
	})
	for _, dir := range []string{filepath.Join(served, "push"), filepath.Join(w.Dir, "pulled"), filepath.Join(served, "own"), filepath.Join(w.Dir, "local")} {
		if fi, err := os.Stat(filepath.Join(dir, "slow")); err != nil || fi.Size() != 128<<10 {
			t.Errorf("%s/slow: %v", dir, err)
		}
	}
}

// noDelay runs prsync, in dir, with args and after -- the extra options and --bwlimit=64,
// over the file slow: its start event's rsync_args hold --sockopts=TCP_NODELAY as option
// says, and the socket of its rsync (not for a local copy) has TCP_NODELAY as want says.
func noDelay(t *testing.T, dir string, args, extra []string, want, option, local bool) {
	t.Helper()
	all := append(append(append([]string{"--no-throttle"}, args...), "--", "--bwlimit=64"), extra...)
	p := start(t, startOpts{dir: dir, in: lines("slow")}, all...)
	st := p.mustWaitFor("start", 30*time.Second, is("start"))
	if got := strings.Contains(fmt.Sprint(st["rsync_args"]), "--sockopts=TCP_NODELAY"); got != option {
		t.Errorf("rsync_args %v: holds --sockopts=TCP_NODELAY: %v, want %v", st["rsync_args"], got, option)
	}
	cs := p.mustWaitFor("chunk_start", 30*time.Second, is("chunk_start"))
	pid := int(num(cs, "pid"))
	if !local {
		nodelay, err := tcpNoDelay(pid)
		for end := time.Now().Add(10 * time.Second); errors.Is(err, errNoTCP) && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond) // not connected yet
			nodelay, err = tcpNoDelay(pid)
		}
		if err != nil {
			t.Fatalf("rsync %d: %v", pid, err)
		}
		if nodelay != want {
			t.Errorf("rsync %d: TCP_NODELAY %v, want %v", pid, nodelay, want)
		}
	}
	r := p.wait(60 * time.Second)
	r.Exit(t, 0)
	r.Counts(t, map[string]int64{"files_transferred": 1})
}

// tcpNoDelay returns TCP_NODELAY of the one TCP socket of process pid, taken with
// pidfd_getfd (the test is its ancestor, so it may).
func tcpNoDelay(pid int) (bool, error) {
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(pfd)
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		target, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(target, "socket:") {
			continue
		}
		n, _ := strconv.Atoi(e.Name())
		fd, err := unix.PidfdGetfd(pfd, n, 0)
		if err != nil {
			return false, err
		}
		v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY)
		unix.Close(fd)
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOPROTOOPT) {
			continue // a Unix socket
		}
		if err != nil {
			return false, err
		}
		return v != 0, nil
	}
	return false, errNoTCP
}

var errNoTCP = errors.New("no TCP socket")
