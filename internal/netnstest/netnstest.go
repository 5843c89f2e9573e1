// Package netnstest makes, for a test, a network namespace joined to the test's own by a
// veth pair, so that a server in it is on this machine but not in this namespace.
package netnstest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// NS is a network namespace the test made, with Addr inside it and HostAddr, on the other
// end of the veth pair, in the test's own namespace. Both exist only on that pair.
type NS struct {
	Name     string
	Addr     string // the namespace's end, such as 10.241.7.2
	HostAddr string // the test's end, such as 10.241.7.1
}

// New makes the namespace and removes it when the test ends. It skips the test unless it
// runs as root with ip(8) (iproute2), where namespaces can be made.
func New(t testing.TB) *NS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip(8) (iproute2)")
	}
	r := rand.Uint32()
	id := fmt.Sprintf("%08x", r)
	sub := r & (1<<14 - 1) // a /30 of 10.240.0.0/14
	base := fmt.Sprintf("10.%d.%d.", 240+sub>>12, (sub>>4)&255)
	last := (sub & 15) * 4
	n := &NS{Name: "prsync-test-" + id, Addr: fmt.Sprintf("%s%d", base, last+2), HostAddr: fmt.Sprintf("%s%d", base, last+1)}
	host, peer := "prt"+id+"h", "prt"+id+"n"
	if out, err := exec.Command("ip", "netns", "add", n.Name).CombinedOutput(); err != nil {
		t.Skipf("cannot make a network namespace: %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n.Name).Run() }) // its end of the pair goes with it, and so does ours
	for _, c := range [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", peer, "netns", n.Name},
		{"addr", "add", n.HostAddr + "/30", "dev", host},
		{"link", "set", host, "up"},
		{"-n", n.Name, "addr", "add", n.Addr + "/30", "dev", peer},
		{"-n", n.Name, "link", "set", peer, "up"},
		{"-n", n.Name, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(c, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return n
}

// Command returns a command that runs name with args in the namespace (ip netns exec,
// which execs it: the command's PID is the program's).
func (n *NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}
