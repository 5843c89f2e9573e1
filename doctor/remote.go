package doctor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prsync/prsync/rsync"
)

// Bounds of the far side's probes.
const (
	// MaxConnProbes is the most connections doctor opens at once to a daemon.
	MaxConnProbes = 16
	// ProbeTimeout bounds each probe: a connect and the reply, or ssh's rsync --version.
	ProbeTimeout = 10 * time.Second
)

// Endpoint is a remote rsync source or destination.
type Endpoint struct {
	Daemon bool   // rsync://HOST/MODULE or HOST::MODULE; else HOST:PATH over a remote shell
	User   string // before @, or ""
	Host   string
	Port   int    // the daemon's port: rsync://HOST:PORT, else --port, else 873
	Module string // a daemon's module
}

// Addr is the daemon's address, HOST:PORT.
func (e Endpoint) Addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// Login is USER@HOST, or HOST.
func (e Endpoint) Login() string {
	if e.User != "" {
		return e.User + "@" + e.Host
	}
	return e.Host
}

// ParseEndpoint reads a remote rsync argument (rsync.IsRemote): rsync://[USER@]HOST[:PORT]/MODULE/PATH,
// [USER@]HOST::MODULE/PATH or [USER@]HOST:PATH. args are rsync's options, for --port.
func ParseEndpoint(s string, args []string) Endpoint {
	var e Endpoint
	if rest, ok := strings.CutPrefix(s, "rsync://"); ok {
		e.Daemon = true
		hostPort, path, _ := strings.Cut(rest, "/")
		e.Module, _, _ = strings.Cut(path, "/")
		e.User, hostPort = cutUser(hostPort)
		if h, p, err := net.SplitHostPort(hostPort); err == nil {
			e.Host = h
			e.Port, _ = strconv.Atoi(p)
		} else {
			e.Host = strings.Trim(hostPort, "[]")
		}
	} else {
		i := strings.IndexByte(s, ':')
		e.User, e.Host = cutUser(s[:max(i, 0)])
		if strings.HasPrefix(s[i:], "::") {
			e.Daemon = true
			e.Module, _, _ = strings.Cut(s[i+2:], "/")
		}
		e.Host = strings.Trim(e.Host, "[]")
	}
	if e.Daemon && e.Port == 0 {
		e.Port = optionPort(args)
	}
	return e
}

func cutUser(s string) (user, host string) {
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return "", s
}

// optionPort is --port=N of rsync's options, else 873.
func optionPort(args []string) int {
	port := 873
	for i, a := range args {
		switch {
		case a == "--":
			return port
		case strings.HasPrefix(a, "--port="):
			if n, err := strconv.Atoi(a[len("--port="):]); err == nil {
				port = n
			}
		case a == "--port" && i+1 < len(args):
			if n, err := strconv.Atoi(args[i+1]); err == nil {
				port = n
			}
		}
	}
	return port
}

// RemoteShell returns the remote shell rsync would use (-e or --rsh in args, else
// $RSYNC_RSH, else ssh), as words, and whether it was given (-e): a daemon reached
// through a remote shell has no TCP greeting to read.
func RemoteShell(args []string) ([]string, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			i = len(args)
		case a == "-e" || a == "--rsh":
			if i+1 < len(args) {
				return strings.Fields(args[i+1]), true
			}
		case strings.HasPrefix(a, "--rsh="):
			return strings.Fields(a[len("--rsh="):]), true
		case strings.HasPrefix(a, "-e") && len(a) > 2 && rsync.ShortFlags(a) == "e":
			return strings.Fields(a[2:]), true
		}
	}
	if rsh := os.Getenv("RSYNC_RSH"); rsh != "" {
		return strings.Fields(rsh), false
	}
	return []string{"ssh"}, false
}

// rsyncPath is --rsync-path of args, else rsync.
func rsyncPath(args []string) string {
	for i, a := range args {
		switch {
		case a == "--":
			return "rsync"
		case strings.HasPrefix(a, "--rsync-path="):
			return a[len("--rsync-path="):]
		case a == "--rsync-path" && i+1 < len(args):
			return args[i+1]
		}
	}
	return "rsync"
}

// SSHVersion runs `rsync --version` on the far side of e over the remote shell rsync
// would use, bounded by ProbeTimeout, with nothing on its stdin. A plain ssh gets
// BatchMode (no password prompt) and a ConnectTimeout. It returns the command as run
// (for messages), its output and its error.
func SSHVersion(ctx context.Context, e Endpoint, args []string) (string, []byte, error) {
	shell, _ := RemoteShell(args)
	if len(shell) == 0 {
		shell = []string{"ssh"}
	}
	argv := append([]string(nil), shell...)
	if filepath.Base(shell[0]) == "ssh" {
		argv = append(argv, "-o", "BatchMode=yes", "-o", "ConnectTimeout=5")
	}
	argv = append(argv, e.Login(), rsyncPath(args)+" --version")
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	cmd := osexec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w after %v", errTimeout, ProbeTimeout)
	}
	return strings.Join(argv, " "), out, err
}

var greetingRE = regexp.MustCompile(`^@RSYNCD: (\d+)`)

// readGreeting reads a daemon's first line, "@RSYNCD: 32.0 sha512 …", and returns its
// protocol.
func readGreeting(r *bufio.Reader) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("read the greeting: %w", err)
	}
	m := greetingRE.FindStringSubmatch(line)
	if m == nil {
		return 0, fmt.Errorf("not an rsync daemon: it said %q", strings.TrimSpace(line))
	}
	return strconv.Atoi(m[1])
}

// Greeting connects to an rsync daemon, reads its greeting, and closes the connection;
// it returns the protocol the daemon speaks. It takes at most ProbeTimeout.
func Greeting(ctx context.Context, addr string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	return readGreeting(bufio.NewReader(c))
}

// ProbeConnections opens n connections to the module of the daemon at addr at once and
// asks each for the module, as rsync does: every admitted one holds a slot of the
// module's "max connections" until all have their answer. Then it closes them all. n is
// bounded by MaxConnProbes, and the whole probe by ProbeTimeout.
func ProbeConnections(ctx context.Context, addr, module string, n int) ConnProbe {
	n = min(max(n, 1), MaxConnProbes)
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	type answer struct {
		conn  net.Conn
		reply string
		err   error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func(a *answer) {
			defer wg.Done()
			a.conn, a.reply, a.err = askModule(ctx, addr, module)
		}(&answers[i])
	}
	wg.Wait() // every admitted connection holds its slot until all have answered
	for _, a := range answers {
		if a.conn != nil {
			wg.Add(1)
			go func(c net.Conn) {
				defer wg.Done()
				hangUp(c)
			}(a.conn)
		}
	}
	wg.Wait()
	p := ConnProbe{Tried: n}
	for _, a := range answers {
		switch {
		case a.err != nil:
			if p.Err == nil {
				p.Err = a.err
			}
		case strings.HasPrefix(a.reply, "@RSYNCD: OK"), strings.HasPrefix(a.reply, "@RSYNCD: AUTHREQD"):
			p.Admitted++
		case rsync.StatedLimit(a.reply) > 0:
			p.Refused++
			p.Limit = rsync.StatedLimit(a.reply) // the module's setting, the same in each
		default:
			if p.Other == "" {
				p.Other = a.reply
			}
		}
	}
	return p
}

// askModule opens one connection, exchanges greetings, asks for module, and returns the
// open connection with the daemon's answer: "@RSYNCD: OK", "@RSYNCD: AUTHREQD …" or an
// "@ERROR: …" line (the message of the day before it is skipped).
func askModule(ctx context.Context, addr, module string) (net.Conn, string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, "", err
	}
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	r := bufio.NewReader(c)
	if _, err := readGreeting(r); err != nil {
		return c, "", err
	}
	// protocol 30 needs no checksum negotiation; the daemon takes the lower of the two
	if _, err := fmt.Fprintf(c, "@RSYNCD: 30.0\n%s\n", module); err != nil {
		return c, "", err
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = fmt.Errorf("no answer: %w after %v", errTimeout, ProbeTimeout)
			}
			return c, "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "@RSYNCD: ") || strings.HasPrefix(line, "@ERROR") {
			return c, line, nil
		}
	}
}

// hangUp ends a connection to a daemon so that its slot is free when hangUp returns: it
// closes the sending side, waits (at most hangUpWait) for the daemon to close its own,
// which it does as it exits and gives its "max connections" slot back, then closes.
func hangUp(c net.Conn) {
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(hangUpWait))
	io.Copy(io.Discard, c)
}

// hangUpWait bounds the wait for a daemon to close a probe's connection.
const hangUpWait = 3 * time.Second
