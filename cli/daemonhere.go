package cli

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/prsync/prsync/rsync"
)

// localDaemonPorts returns the ports of the rsync daemons on this machine that the run
// talks to over TCP, as DEST or as a remote --root: the throttle counts their work as the
// copy's (throttle.SystemSampler.CountDaemon). A daemon reached through a remote shell,
// or on a host that is not this machine, or whose name does not resolve within a second,
// is none.
func (r *runner) localDaemonPorts() []int {
	var ports []int
	for _, arg := range []string{r.f.Dest, r.srcRemote} {
		if !rsync.IsDaemon(arg) {
			continue
		}
		if _, given := rsync.RemoteShell(r.args, ""); given && !strings.HasPrefix(arg, "rsync://") {
			continue // host::module over -e: no TCP connection of rsync's own
		}
		e := rsync.ParseEndpoint(arg, r.args)
		if onThisMachine(e.Host) {
			ports = append(ports, e.Port)
		}
	}
	return ports
}

// onThisMachine reports whether host (a name or an address) is one of this machine's
// addresses: a loopback address, or one of its interfaces'.
func onThisMachine(host string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return false
	}
	own, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		a = a.Unmap()
		if a.IsLoopback() {
			return true
		}
		for _, o := range own {
			if p, err := netip.ParsePrefix(o.String()); err == nil && p.Addr().Unmap() == a {
				return true
			}
		}
	}
	return false
}
