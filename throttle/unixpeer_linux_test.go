package throttle

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnixPeer: the two ends of a real socketpair are each other's peer, and a socket that is
// not there has none.
func TestUnixPeer(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	ino := func(fd int) uint64 {
		l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if err != nil {
			t.Fatal(err)
		}
		n, ok := socketInode(l)
		if !ok {
			t.Fatalf("fd %d links to %s", fd, l)
		}
		return n
	}
	a, b := ino(fds[0]), ino(fds[1])
	if p, ok := unixPeer(a); !ok || p != b {
		if !ok {
			t.Skip("no sock_diag for Unix sockets here")
		}
		t.Errorf("peer of %d: %d, want %d", a, p, b)
	}
	if p, ok := unixPeer(b); !ok || p != a {
		t.Errorf("peer of %d: %d, %v; want %d", b, p, ok, a)
	}
	if p, ok := unixPeer(1 << 31); ok {
		t.Errorf("a socket that is not there has peer %d", p)
	}
}
