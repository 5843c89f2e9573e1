//go:build darwin

package control

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// xucredVersion is XUCRED_VERSION of <sys/ucred.h>.
const xucredVersion = 0

// peerCred returns the uid and process ID of the process at the other end of c, as the
// kernel recorded them when it connected (LOCAL_PEERCRED, LOCAL_PEERPID).
func peerCred(c *net.UnixConn) (uid uint32, pid int, err error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Xucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		if cerr == nil {
			pid, _ = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
		}
	}); err != nil {
		return 0, 0, err
	}
	if cerr != nil {
		return 0, 0, cerr
	}
	if cred.Version != xucredVersion {
		return 0, 0, fmt.Errorf("unknown xucred version %d", cred.Version)
	}
	return cred.Uid, pid, nil
}
