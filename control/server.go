package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxConns is how many connections the server handles at once; more wait to be accepted.
const maxConns = 16

// Server serves the control socket of a running prsync.
type Server struct {
	path    string
	ln      *net.UnixListener
	file    fs.FileInfo // the socket file Listen made: Close removes only it
	h       Handler
	uid     uint32 // prsync's own uid: it and root may connect
	pid     int
	timeout time.Duration
	sem     chan struct{}

	warnMu sync.Mutex
	warn   func(error)

	mu     sync.Mutex
	conns  map[*net.UnixConn]struct{}
	closed bool

	wg       sync.WaitGroup
	once     sync.Once
	closeErr error
}

// Listen creates the control socket at path with mode 0600 and serves it on its own
// goroutines until Close. A socket file already at path is replaced when no one answers
// on it; anything else there (a live socket, a symlink, another file) is an error. The
// directory of path should be private, as DefaultDir is.
//
// Only processes of prsync's own uid, and root, are served: any other peer, whatever the
// modes of the socket and its directory, gets an error reply and is disconnected before
// its request is read. Each connection carries one request of at most MaxRequest bytes,
// which must arrive within Timeout. Refused peers and failures to accept are warnings,
// given to warn one at a time ("control socket: …"); warn may be nil.
func Listen(path string, h Handler, warn func(error)) (*Server, error) {
	return listen(path, h, warn, uint32(os.Getuid()), Timeout)
}

func listen(path string, h Handler, warn func(error), uid uint32, timeout time.Duration) (*Server, error) {
	if warn == nil {
		warn = func(error) {}
	}
	if err := clearStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(false) // Close removes the file only if it is still this socket
	fi, err := os.Lstat(path)
	if err == nil && fi.Mode().Type() != fs.ModeSocket {
		ln.Close()
		return nil, fmt.Errorf("control socket %s was replaced as it was made", path)
	}
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		ln.Close()
		if fi != nil {
			os.Remove(path)
		}
		return nil, fmt.Errorf("control socket: %w", err)
	}
	s := &Server{
		path: path, ln: ln, file: fi, h: h, uid: uid, pid: os.Getpid(), timeout: timeout,
		sem: make(chan struct{}, maxConns), warn: warn, conns: map[*net.UnixConn]struct{}{},
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// clearStale removes a socket file at path that no one answers on: one left by a prsync
// that died. It refuses to touch anything else.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("control socket: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("control socket %s is a symlink: refusing to use it", path)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("control socket %s exists and is not a socket: refusing to replace it", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("control socket %s: another process is listening on it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("control socket %s exists and cannot be checked: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove a stale control socket: %w", err)
	}
	return nil
}

// Path returns the path of the socket.
func (s *Server) Path() string { return s.path }

// Close stops the server: it closes the socket and every connection, waits for the
// handler calls in progress to return, and removes the socket file. It may be called
// more than once.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.closeErr = s.ln.Close()
		s.wg.Wait()
		if fi, err := os.Lstat(s.path); err == nil && os.SameFile(fi, s.file) {
			if err := os.Remove(s.path); err != nil && s.closeErr == nil {
				s.closeErr = err
			}
		}
	})
	return s.closeErr
}

func (s *Server) warnf(format string, args ...any) {
	s.warnMu.Lock()
	defer s.warnMu.Unlock()
	s.warn(fmt.Errorf("control socket: "+format, args...))
}

func (s *Server) accept() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		s.sem <- struct{}{} // a free slot first: a full server leaves callers in the backlog
		c, err := s.ln.AcceptUnix()
		if err != nil {
			<-s.sem
			if errors.Is(err, net.ErrClosed) || s.isClosed() {
				return
			}
			// out of file descriptors and the like: back off, as net/http does
			if delay == 0 {
				s.warnf("accept: %v", err)
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if !s.track(c) {
			c.Close()
			<-s.sem
			return
		}
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Server) track(c *net.UnixConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) forget(c *net.UnixConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// serve handles one connection: who it is, then one request and its reply.
func (s *Server) serve(c *net.UnixConn) {
	defer func() {
		c.Close()
		s.forget(c)
		<-s.sem
		s.wg.Done()
	}()
	c.SetDeadline(time.Now().Add(s.timeout))
	uid, pid, err := peerCred(c)
	if err != nil {
		if s.isClosed() {
			return // Close closed it
		}
		s.warnf("refused a connection: %v", err)
		s.reply(c, s.fail(&Error{Msg: "prsync cannot tell who is asking: " + err.Error()}))
		return
	}
	if !allowed(uid, s.uid) {
		s.warnf("refused uid %d (pid %d): only uid %d and root may control this prsync", uid, pid, s.uid)
		s.reply(c, s.fail(&Error{
			Msg:  fmt.Sprintf("uid %d may not control prsync %d, which runs as uid %d", uid, s.pid, s.uid),
			Hint: fmt.Sprintf("only uid %d, or root, may control it", s.uid),
		}))
		return
	}
	line, err := readRequest(c, s.timeout)
	if errors.Is(err, errNoRequest) {
		return // a probe, or a client that went away
	}
	var rep Reply
	if err != nil {
		rep = s.fail(err)
	} else {
		rep = s.do(line)
	}
	c.SetWriteDeadline(time.Now().Add(s.timeout))
	s.reply(c, rep)
}

// allowed reports whether a peer of uid may control a prsync of uid own: the same user,
// or root, who could signal it anyway.
func allowed(uid, own uint32) bool { return uid == own || uid == 0 }

func (s *Server) reply(c io.Writer, rep Reply) {
	b, err := json.Marshal(rep)
	if err != nil { // a Status that does not encode: a bug, but not one to end the run for
		b, _ = json.Marshal(s.fail(fmt.Errorf("encode the reply: %w", err)))
	}
	c.Write(append(b, '\n'))
}

func (s *Server) fail(err error) Reply {
	return Reply{OK: false, PID: s.pid, Error: err.Error(), Hint: hintOf(err)}
}

// errNoRequest is a connection that ended with nothing to answer.
var errNoRequest = errors.New("no request")

// readRequest reads one request line of at most MaxRequest bytes, without its newline.
// A last line that the client ended by closing its side counts too.
func readRequest(r io.Reader, timeout time.Duration) ([]byte, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, MaxRequest+1), MaxRequest+1)
	line, err := br.ReadSlice('\n')
	switch {
	case err == nil:
		return line[:len(line)-1], nil
	case len(line) > MaxRequest || errors.Is(err, bufio.ErrBufferFull):
		return nil, &Error{Msg: fmt.Sprintf("request longer than %d bytes", MaxRequest), Hint: requestHint}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &Error{Msg: fmt.Sprintf("no request line within %v", timeout), Hint: requestHint}
	case errors.Is(err, io.EOF) && len(line) > 0:
		return line, nil
	}
	return nil, errNoRequest
}

const requestHint = `send one JSON object and a newline, as in {"cmd":"jobs","arg":"4"}`

// do carries out one request.
func (s *Server) do(line []byte) Reply {
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return s.fail(&Error{Msg: fmt.Sprintf("bad request: %v", err), Hint: requestHint})
	}
	rep := Reply{OK: true, PID: s.pid, Cmd: req.Cmd}
	var err error
	switch req.Cmd {
	case CmdStatus:
		if err = noArg(req); err == nil {
			var st Status
			if st, err = s.h.Status(); st.PID == 0 {
				st.PID = s.pid
			}
			rep.Status = &st
		}
	case CmdJobs:
		var n, old, new int
		if n, err = parseJobs(req.Arg); err == nil {
			old, new, err = s.h.SetJobs(n)
			rep.Old, rep.New = old, new
		}
	case CmdBWLimit:
		spec := strings.TrimSpace(req.Arg)
		if spec == "" {
			err = &Error{Msg: "bwlimit needs a rate, a timetable or off", Hint: `as in: prsync ctl bwlimit 20M, or prsync ctl bwlimit "08:00,20M 19:00,200M 23:00,off"`}
			break
		}
		var old, new string
		old, new, err = s.h.SetBWLimit(spec)
		rep.Old, rep.New = old, new
	case CmdPause:
		if err = noArg(req); err == nil {
			err = s.h.Pause()
		}
	case CmdResume:
		if err = noArg(req); err == nil {
			err = s.h.Resume()
		}
	case "":
		err = &Error{Msg: "request has no cmd", Hint: requestHint}
	default:
		err = &Error{Msg: fmt.Sprintf("unknown command %q", req.Cmd), Hint: commandsHint}
	}
	if err != nil {
		rep = s.fail(err)
		rep.Cmd = req.Cmd
	}
	return rep
}

func noArg(req Request) error {
	if strings.TrimSpace(req.Arg) != "" {
		return &Error{Msg: fmt.Sprintf("%s takes no argument, not %q", req.Cmd, req.Arg), Hint: commandsHint}
	}
	return nil
}
