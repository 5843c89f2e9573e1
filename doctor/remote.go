package doctor

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
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

// SSHVersion runs `rsync --version` on the far side of e over the remote shell rsync
// would use, bounded by ProbeTimeout, with nothing on its stdin. A plain ssh gets
// BatchMode (no password prompt) and a ConnectTimeout. It returns the command as run
// (for messages), its output and its error.
func SSHVersion(ctx context.Context, e rsync.Endpoint, args []string) (string, []byte, error) {
	shell, _ := rsync.RemoteShell(args, os.Getenv("RSYNC_RSH"))
	if len(shell) == 0 {
		shell = []string{"ssh"}
	}
	argv := append([]string(nil), shell...)
	if filepath.Base(shell[0]) == "ssh" {
		argv = append(argv, "-o", "BatchMode=yes", "-o", "ConnectTimeout=5")
	}
	argv = append(argv, e.Login(), rsync.RsyncPath(args)+" --version")
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

// readGreeting reads a daemon's first line and returns its protocol (rsync.ParseGreeting).
func readGreeting(r *bufio.Reader) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("read the greeting: %w", err)
	}
	return rsync.ParseGreeting(line)
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

// ProbeSpec is how doctor reaches a daemon's module as the run's rsyncs do.
type ProbeSpec struct {
	Rsync  string // the local rsync
	Addr   string // the daemon, HOST:PORT
	User   string // the login, USER of rsync://USER@HOST/, or ""
	Module string
	Push   bool     // the run copies into the module (a DEST), else out of it (a --root)
	Args   []string // the run's rsync options: those that shape the connection are passed on
	Env    []string // the rsyncs' environment (an empty RSYNC_PASSWORD); nil: doctor's own
	TmpDir string   // where a pull's DEST is named, never created; "": os.TempDir()
}

// ProbeConnections runs n rsyncs at once (at most MaxConnProbes) against the module, as
// the run's rsyncs connect: each a dry run of a --files-from list that stays open, in the
// run's direction. Every rsync the daemon admits holds a slot of the module's "max
// connections" until all have their answer, which the probe reads from each rsync's
// output: "building file list" or "receiving file list" once admitted, else the daemon's
// @ERROR line (max connections, an unknown module, a failed login). Then every list is
// closed empty, and each admitted rsync ends its session as any rsync does: the daemon
// logs a normal session, no protocol error, and gives the slot back before the probe
// returns. The whole probe is bounded by ProbeTimeout.
func ProbeConnections(ctx context.Context, spec ProbeSpec, n int) ConnProbe {
	n = min(max(n, 1), MaxConnProbes)
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	// the rsyncs connect through a relay, which sees each daemon session close its socket
	// as it exits, its slot given back: an rsync itself may exit a moment before
	rl, err := newRelay(ctx, spec.Addr, rsync.LongValue(spec.Args, "--address"))
	if err != nil {
		return ConnProbe{Tried: n, Err: err}
	}
	defer rl.close()
	clients := make([]*probeClient, n)
	var wg sync.WaitGroup
	for i := range clients {
		clients[i] = startProbe(ctx, spec, rl.addr())
		wg.Add(1)
		go func(c *probeClient) {
			defer wg.Done()
			select { // every admitted rsync holds its slot until all have answered
			case <-c.admitted:
			case <-c.exited:
			case <-ctx.Done():
			}
		}(clients[i])
	}
	wg.Wait()
	for _, c := range clients {
		c.endList()
	}
	p := ConnProbe{Tried: n}
	for _, c := range clients {
		select {
		case <-c.exited:
		case <-ctx.Done():
			<-c.exited // CommandContext kills it, and Wait returns
		}
		out, admitted := c.result()
		switch {
		case admitted:
			p.Admitted++
		case c.startErr != nil:
			p.Err = cmp.Or(p.Err, c.startErr)
		case rsync.StatedLimit(out) > 0:
			p.Refused++
			p.Limit = rsync.StatedLimit(out) // the module's setting, the same in each
		case rsync.ErrorLine(out) != "":
			p.Other = cmp.Or(p.Other, rsync.ErrorLine(out))
		case ctx.Err() != nil:
			p.Err = cmp.Or(p.Err, fmt.Errorf("no answer: %w after %v", errTimeout, ProbeTimeout))
		default:
			p.Err = cmp.Or(p.Err, fmt.Errorf("rsync ended without an answer: %v: %s", c.waitErr, strings.TrimSpace(firstLineOf([]byte(out)))))
		}
	}
	rl.close() // waits, at most hangUpWait, until the daemon has ended every session
	return p
}

// probeClient is one rsync of ProbeConnections.
type probeClient struct {
	cmd      *osexec.Cmd
	stdin    io.WriteCloser
	admitted chan struct{} // closed once its output says the daemon admitted it
	exited   chan struct{} // closed once it has exited (or could not start)
	startErr error
	waitErr  error

	mu   sync.Mutex
	out  []byte
	seen bool
}

// probeArgs is the probe's rsync command line: a dry run, verbose (rsync.AdmitOption, for
// rsync.Admitted), of a NUL-separated --files-from list on stdin, with the run's connection
// options (rsync.ConnectionOptions), pushing / into the module or pulling the module into a
// DEST that is never created, the daemon reached at via (the relay).
func probeArgs(spec ProbeSpec, via string) []string {
	args := []string{"--dry-run", rsync.AdmitOption, "--files-from=-", "--from0", "--contimeout=" + strconv.Itoa(int(ProbeTimeout/time.Second))}
	args = append(args, rsync.ConnectionOptions(spec.Args)...)
	url := rsync.DaemonURL(spec.User, via, spec.Module)
	if spec.Push {
		return append(args, "/", url)
	}
	tmp := cmp.Or(spec.TmpDir, os.TempDir())
	return append(args, url, filepath.Join(tmp, fmt.Sprintf("prsync-doctor-%d-not-created", os.Getpid()))+"/")
}

func startProbe(ctx context.Context, spec ProbeSpec, via string) *probeClient {
	c := &probeClient{admitted: make(chan struct{}), exited: make(chan struct{})}
	c.cmd = osexec.CommandContext(ctx, spec.Rsync, probeArgs(spec, via)...)
	c.cmd.Env = spec.Env
	c.cmd.WaitDelay = time.Second
	c.cmd.Stdout = probeWriter{c}
	c.cmd.Stderr = probeWriter{c}
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err == nil {
		err = c.cmd.Start()
	}
	if err != nil {
		c.startErr = err
		close(c.exited)
		return c
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	return c
}

// probeWriter takes an rsync's output, and closes admitted once it says so (rsync.Admitted).
type probeWriter struct{ c *probeClient }

func (w probeWriter) Write(b []byte) (int, error) {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.out) < 64<<10 {
		c.out = append(c.out, b...)
	}
	if !c.seen && rsync.Admitted(string(c.out)) {
		c.seen = true
		close(c.admitted)
	}
	return len(b), nil
}

// endList ends the rsync's list, empty: an admitted rsync then ends its session.
func (c *probeClient) endList() {
	if c.stdin != nil {
		c.stdin.Close()
	}
}

// result returns the rsync's output, and whether the daemon admitted it.
func (c *probeClient) result() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.out), c.seen
}

// relay joins the probe's rsyncs, which connect to it on 127.0.0.1, to the daemon, and
// tells when the daemon has closed each session's socket.
type relay struct {
	l      net.Listener
	daemon string
	dialer net.Dialer
	served chan struct{} // closed once the accept loop has returned

	mu    sync.Mutex
	ended []chan struct{} // one per connection, closed once the daemon closed its side
	once  sync.Once
}

// newRelay listens on 127.0.0.1 for connections to the daemon at addr, dialled from local
// (rsync's --address) when it is not "". The relay ends with ctx.
func newRelay(ctx context.Context, addr, local string) (*relay, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{l: l, daemon: addr, served: make(chan struct{})}
	if local != "" {
		r.dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	go r.serve(ctx)
	return r, nil
}

func (r *relay) addr() string { return r.l.Addr().String() }

func (r *relay) serve(ctx context.Context) {
	defer close(r.served)
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		ended := make(chan struct{})
		r.mu.Lock()
		r.ended = append(r.ended, ended)
		r.mu.Unlock()
		go r.join(ctx, c, ended)
	}
}

// join relays one rsync's connection c to the daemon, until the daemon closes its side.
func (r *relay) join(ctx context.Context, c net.Conn, ended chan struct{}) {
	defer close(ended)
	defer c.Close()
	d, err := r.dialer.DialContext(ctx, "tcp", r.daemon)
	if err != nil {
		return // the rsync sees its connection closed, and says so
	}
	defer d.Close()
	stop := context.AfterFunc(ctx, func() { c.Close(); d.Close() })
	defer stop()
	go func() {
		io.Copy(d, c)
		if tc, ok := d.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}()
	// until the daemon's session ends: it closes its socket as it exits. What it sends
	// once the rsync has gone is read and dropped: closing with it unread would reset the
	// connection under the daemon's last reads, which it logs as a protocol error.
	if _, err := io.Copy(c, d); err != nil {
		io.Copy(io.Discard, d)
	}
}

// close stops the relay, and waits (at most hangUpWait) until the daemon has closed every
// connection it relayed. Later calls do nothing.
func (r *relay) close() {
	r.once.Do(func() {
		r.l.Close()
		<-r.served
		timeout := time.After(hangUpWait)
		r.mu.Lock()
		ended := r.ended
		r.mu.Unlock()
		for _, e := range ended {
			select {
			case <-e:
			case <-timeout:
				return
			}
		}
	})
}

// hangUpWait bounds the wait for a daemon to close a probe's connection.
const hangUpWait = 3 * time.Second
