package control

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/prsync/prsync/internal/cmdline"
	"github.com/prsync/prsync/internal/human"
)

// The exit codes of prsync ctl.
const (
	exitOK      = 0 // done
	exitUsage   = 1 // a usage error, several prsyncs and none picked, or prsync refused
	exitNoReach = 2 // no running prsync found, or it cannot be reached or gave no reply
)

// Client timeouts: to connect, and for the whole request and reply.
const (
	dialTimeout  = 2 * time.Second
	replyTimeout = 10 * time.Second
	maxReply     = 1 << 20
)

const ctlDescription = `Change a running prsync from another shell.

  prsync ctl status
  prsync ctl jobs 4
  prsync ctl bwlimit 20M
  prsync ctl bwlimit "08:00,20M 19:00,200M 23:00,off"
  prsync ctl pause

prsync ctl finds the run by its socket, PID.sock in $XDG_RUNTIME_DIR/prsync or else in /tmp/prsync-UID. With several runs, pick one with --pid; a run of another user (as root) or with another XDG_RUNTIME_DIR, with --socket.

Exit codes: 0 done; 1 usage error, several runs and none picked, or the request refused; 2 no running prsync found, or it cannot be reached.`

// ctlFlags is the command line of prsync ctl.
type ctlFlags struct {
	PID    int    `name:"pid" placeholder:"PID" xor:"target" help:"Control the prsync with this process ID."`
	Socket string `name:"socket" placeholder:"PATH" xor:"target" help:"Control the prsync listening on this socket."`
	JSON   bool   `name:"json" help:"Print prsync's reply as the JSON line it sent."`

	Status  struct{}   `cmd:"" help:"Show what the run is doing."`
	Jobs    jobsCmd    `cmd:"" help:"Set the number of concurrent rsyncs."`
	Bwlimit bwlimitCmd `cmd:"" name:"bwlimit" help:"Set the bandwidth limit: a rate (20M), a timetable (\"08:00,20M 19:00,200M 23:00,off\") or off."`
	Pause   struct{}   `cmd:"" help:"Pause every rsync."`
	Resume  struct{}   `cmd:"" help:"Resume them."`
}

type jobsCmd struct {
	N int `arg:"" name:"N" help:"Concurrent rsyncs, at least 1 (at most --max-jobs)."`
}

type bwlimitCmd struct {
	Spec []string `arg:"" name:"RATE|TIMETABLE|off" help:"A rate, a timetable of TIME,RATE pairs, or off."`
}

// client is prsync ctl with its surroundings given.
type client struct {
	stdout, stderr io.Writer
	dir            func() (string, error) // the socket directory; not created
}

// Main runs prsync ctl, args being the words after "ctl", and returns its exit code:
//
//	0  done
//	1  a usage error, several prsyncs running and none picked with --pid, or prsync
//	   refused the request (a bad argument, or a user other than its own or root)
//	2  no running prsync found, or it could not be reached or gave no valid reply
//
// It writes the result on stdout, and errors on stderr as "prsync: error: …" with a
// "prsync: hint: …" line.
func Main(args []string, stdout, stderr io.Writer) int {
	c := client{stdout: stdout, stderr: stderr, dir: func() (string, error) {
		return runtimeDir(os.Getenv("XDG_RUNTIME_DIR"), "/tmp", os.Getuid(), false)
	}}
	return c.main(args)
}

// Parser returns the parser of prsync ctl's command line, for the generators of the man page
// and the shell completions; it writes nothing, and never exits.
func Parser() (*kong.Kong, error) {
	var f ctlFlags
	return newParser(&f, io.Discard, func(int) {})
}

func newParser(f *ctlFlags, stderr io.Writer, exit func(int)) (*kong.Kong, error) {
	return kong.New(f,
		kong.Name("prsync ctl"),
		kong.Description(ctlDescription),
		kong.Writers(stderr, stderr),
		kong.Exit(exit),
	)
}

func (c client) main(args []string) int {
	var f ctlFlags
	parser, err := newParser(&f, c.stderr, cmdline.Exit)
	if err != nil {
		panic(err)
	}
	parser.Stdout = c.stdout
	kctx, err := cmdline.Parse(parser, args)
	if code, ok := cmdline.Exited(err); ok {
		return code // after --help, or kong's own usage error
	}
	if err != nil {
		return c.fail(&cmdline.Error{Code: exitUsage, Msg: err.Error(), Hint: "see prsync ctl --help"})
	}
	req, err := request(kctx.Command(), &f)
	if err != nil {
		return c.fail(err)
	}
	path, err := c.target(&f)
	if err != nil {
		return c.fail(err)
	}
	raw, rep, err := exchange(path, req)
	if err != nil {
		return c.fail(err)
	}
	if f.JSON {
		fmt.Fprintf(c.stdout, "%s\n", raw)
	}
	if !rep.OK {
		return c.fail(&cmdline.Error{Code: exitUsage, Msg: rep.Error, Hint: rep.Hint})
	}
	if !f.JSON {
		fmt.Fprintln(c.stdout, summary(req, rep))
	}
	return exitOK
}

// fail writes err and its hint, and returns its exit code: that of a cmdline.Error, else 2.
func (c client) fail(err error) int { return cmdline.Fail(c.stderr, err, exitNoReach) }

// request builds the request of the command kong picked.
func request(cmd string, f *ctlFlags) (Request, error) {
	name, _, _ := strings.Cut(cmd, " ")
	req := Request{Cmd: name}
	switch name {
	case CmdJobs:
		if f.Jobs.N < 1 {
			return req, &cmdline.Error{Code: exitUsage, Msg: fmt.Sprintf("bad jobs %d: want a number of rsyncs, at least 1", f.Jobs.N), Hint: "as in: prsync ctl jobs 4"}
		}
		req.Arg = strconv.Itoa(f.Jobs.N)
	case CmdBWLimit:
		// a timetable may come as one quoted word or as several
		req.Arg = strings.Join(strings.Fields(strings.Join(f.Bwlimit.Spec, " ")), " ")
		if req.Arg == "" {
			return req, &cmdline.Error{Code: exitUsage, Msg: "bwlimit needs a rate, a timetable or off", Hint: `as in: prsync ctl bwlimit 20M, or prsync ctl bwlimit "08:00,20M 19:00,200M 23:00,off"`}
		}
	}
	if f.PID < 0 {
		return req, &cmdline.Error{Code: exitUsage, Msg: fmt.Sprintf("bad --pid %d", f.PID), Hint: "prsync ctl status shows the PID of the one running"}
	}
	return req, nil
}

const elsewhereHint = "a run of another user (as root), or started with another XDG_RUNTIME_DIR, is found with --socket PATH"

// target finds the socket to talk to: --socket, --pid, or the only live one.
func (c client) target(f *ctlFlags) (string, error) {
	if f.Socket != "" {
		return f.Socket, nil
	}
	dir, err := c.dir()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", &cmdline.Error{Code: exitNoReach, Msg: err.Error(), Hint: hintOf(err)}
	}
	if f.PID > 0 {
		path := SocketPath(dir, f.PID)
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			return "", &cmdline.Error{Code: exitNoReach, Msg: fmt.Sprintf("no prsync with pid %d found in %s", f.PID, dir), Hint: elsewhereHint}
		}
		return path, nil
	}
	pids, err := discover(dir)
	if err != nil {
		return "", &cmdline.Error{Code: exitNoReach, Msg: err.Error()}
	}
	switch len(pids) {
	case 0:
		return "", &cmdline.Error{Code: exitNoReach, Msg: "no running prsync found in " + dir, Hint: "prsync ctl controls a prsync that is copying now; " + elsewhereHint}
	case 1:
		return SocketPath(dir, pids[0]), nil
	}
	list := make([]string, len(pids))
	for i, p := range pids {
		list[i] = strconv.Itoa(p)
	}
	return "", &cmdline.Error{Code: exitUsage,
		Msg:  fmt.Sprintf("%d prsyncs are running, pids %s", len(pids), strings.Join(list, ", ")),
		Hint: fmt.Sprintf("pick one with --pid, as in: prsync ctl --pid %d status", pids[0])}
}

// discover returns the process IDs of the prsyncs with a live socket in dir, in order.
// It removes the sockets of prsyncs that died without removing theirs.
func discover(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		pid, ok := socketPID(e.Name())
		if !ok || e.Type() != fs.ModeSocket {
			continue
		}
		path := filepath.Join(dir, e.Name())
		conn, err := net.DialTimeout("unix", path, dialTimeout)
		if err == nil {
			conn.Close() // the server takes a connection with no request for a probe
			pids = append(pids, pid)
			continue
		}
		// a socket no one answers on is stale once its process is gone; while it lives,
		// it may be a prsync between creating its socket and listening on it
		if errors.Is(err, syscall.ECONNREFUSED) && processGone(pid) {
			os.Remove(path)
		}
	}
	slices.Sort(pids)
	return pids, nil
}

// exchange sends req to the socket at path and returns the reply, as sent and decoded.
func exchange(path string, req Request) ([]byte, Reply, error) {
	conn, err := net.DialTimeout("unix", path, dialTimeout)
	if err != nil {
		return nil, Reply{}, dialError(path, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(replyTimeout))
	b, err := json.Marshal(req)
	if err != nil {
		return nil, Reply{}, err
	}
	// a refused client still reads why: the server answers before it reads
	_, werr := conn.Write(append(b, '\n'))
	line, rerr := bufio.NewReader(io.LimitReader(conn, maxReply)).ReadBytes('\n')
	switch {
	case rerr == nil:
	case len(line) > 0 && errors.Is(rerr, io.EOF):
	case errors.Is(rerr, os.ErrDeadlineExceeded):
		return nil, Reply{}, &cmdline.Error{Code: exitNoReach, Msg: fmt.Sprintf("prsync did not answer within %v on %s", replyTimeout, path)}
	case errors.Is(rerr, io.EOF) || errors.Is(rerr, syscall.ECONNRESET):
		return nil, Reply{}, &cmdline.Error{Code: exitNoReach, Msg: fmt.Sprintf("prsync closed %s without a reply", path)}
	case werr != nil:
		return nil, Reply{}, &cmdline.Error{Code: exitNoReach, Msg: fmt.Sprintf("send to %s: %v", path, unwrapOp(werr))}
	default:
		return nil, Reply{}, &cmdline.Error{Code: exitNoReach, Msg: fmt.Sprintf("read the reply on %s: %v", path, unwrapOp(rerr))}
	}
	line = bytes.TrimRight(line, "\r\n")
	var rep Reply
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&rep); err != nil {
		return nil, Reply{}, &cmdline.Error{Code: exitNoReach, Msg: fmt.Sprintf("bad reply on %s: %v", path, err), Hint: "is a prsync of the same version listening there?"}
	}
	return line, rep, nil
}

// dialError explains a failed connection.
func dialError(path string, err error) error {
	e := &cmdline.Error{Code: exitNoReach, Msg: fmt.Sprintf("cannot connect to %s: %v", path, unwrapOp(err))}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		e.Msg = "no prsync socket at " + path
		e.Hint = "is prsync running? without --socket, prsync ctl finds the run itself"
	case errors.Is(err, syscall.ECONNREFUSED):
		e.Msg = "no prsync answers on " + path
		if pid, ok := socketPID(filepath.Base(path)); ok && processGone(pid) {
			e.Msg = fmt.Sprintf("prsync %d is not running: no one answers on %s", pid, path)
		}
		e.Hint = "it has ended, or died and left its socket behind"
	case errors.Is(err, fs.ErrPermission):
		e.Hint = "only the user who started prsync, or root, may control it"
	}
	return e
}

// unwrapOp drops the "dial unix PATH:" prefix of a net.OpError.
func unwrapOp(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		var se *os.SyscallError
		if errors.As(oe.Err, &se) {
			return se.Err
		}
		return oe.Err
	}
	return err
}

// summary is the line printed for a reply.
func summary(req Request, rep Reply) string {
	switch req.Cmd {
	case CmdStatus:
		if rep.Status == nil {
			return fmt.Sprintf("prsync %d: no status", rep.PID)
		}
		return statusLine(rep.Status)
	case CmdJobs, CmdBWLimit:
		return fmt.Sprintf("%s: %v -> %v", req.Cmd, rep.Old, rep.New)
	case CmdPause:
		return "paused"
	case CmdResume:
		return "resumed"
	}
	return "ok"
}

// statusLine is the human summary of a status.
func statusLine(st *Status) string {
	var parts []string
	if st.Paused {
		parts = append(parts, "paused")
	}
	jobs := fmt.Sprintf("jobs %d", st.Jobs)
	if st.JobsAuto {
		jobs += " auto"
	}
	if st.MaxJobs > 0 {
		jobs += fmt.Sprintf(" (max %d)", st.MaxJobs)
	}
	parts = append(parts, jobs, fmt.Sprintf("running %d", st.Running))
	if st.Suspended > 0 {
		parts = append(parts, fmt.Sprintf("suspended %d", st.Suspended))
	}
	bw := "bwlimit " + orDefault(st.BWLimit, "off")
	if st.BWLimitNow != "" && st.BWLimitNow != st.BWLimit {
		bw += " (now " + st.BWLimitNow + ")"
	}
	parts = append(parts, bw, fmt.Sprintf("done %d files %s", st.FilesDone, human.Bytes(st.BytesDone)))
	if st.FilesQueued > 0 || !st.InputDone {
		parts = append(parts, fmt.Sprintf("queued %d", st.FilesQueued))
	}
	if st.FilesFailed > 0 {
		parts = append(parts, fmt.Sprintf("failed %d", st.FilesFailed))
	}
	parts = append(parts, human.Bytes(int64(st.RateBps/8))+"/s", "elapsed "+human.Clock(st.Elapsed))
	return fmt.Sprintf("prsync %d: %s", st.PID, strings.Join(parts, ", "))
}

func orDefault(s, zero string) string {
	if s == "" {
		return zero
	}
	return s
}
