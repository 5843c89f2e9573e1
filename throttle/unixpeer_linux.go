package throttle

import (
	"encoding/binary"
	"syscall"

	"golang.org/x/sys/unix"
)

// The parts of linux/unix_diag.h that x/sys/unix does not define.
const (
	udiagShowPeer = 0x4 // UDIAG_SHOW_PEER: the request asks for the peer's inode
	unixDiagPeer  = 2   // UNIX_DIAG_PEER: the attribute that holds it
)

// unixPeer returns the inode of the socket at the other end of the Unix socket ino (one end
// of a socketpair, or a connection), as ss -x finds it: from the kernel's sock_diag. false
// when it cannot be told (no such socket, none connected, or no sock_diag).
func unixPeer(ino uint64) (uint64, bool) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 1})
	// struct nlmsghdr, then struct unix_diag_req
	req := make([]byte, unix.NLMSG_HDRLEN+24)
	e := binary.NativeEndian
	e.PutUint32(req[0:], uint32(len(req)))
	e.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	e.PutUint16(req[6:], unix.NLM_F_REQUEST)
	d := req[unix.NLMSG_HDRLEN:]
	d[0] = unix.AF_UNIX                // sdiag_family; sdiag_protocol and the pad are 0
	e.PutUint32(d[4:], ^uint32(0))     // udiag_states: any
	e.PutUint32(d[8:], uint32(ino))    // udiag_ino
	e.PutUint32(d[12:], udiagShowPeer) // udiag_show
	e.PutUint32(d[16:], ^uint32(0))    // udiag_cookie: none (INET_DIAG_NOCOOKIE)
	e.PutUint32(d[20:], ^uint32(0))
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, false
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil || n <= 0 {
		return 0, false
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Type != unix.SOCK_DIAG_BY_FAMILY || len(m.Data) < 16 {
			continue // NLMSG_ERROR: no such socket
		}
		// struct unix_diag_msg (16 bytes), then its attributes
		if uint64(e.Uint32(m.Data[4:])) != ino {
			continue
		}
		for a := m.Data[16:]; len(a) >= 4; {
			l, t := int(e.Uint16(a[0:])), e.Uint16(a[2:])
			if l < 4 || l > len(a) {
				break
			}
			if t == unixDiagPeer && l >= 8 {
				peer := uint64(e.Uint32(a[4:]))
				return peer, peer != 0
			}
			a = a[min(len(a), (l+3)&^3):]
		}
	}
	return 0, false
}
