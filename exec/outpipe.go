package exec

import (
	"io"
	"os"
	"syscall"
	"time"
)

// outPipe carries one of rsync's output streams to prsync, read by polling rather than
// through Go's netpoller. rsync writes each out-format line with a write(2) of its own,
// and a pipe in the netpoller wakes a thread of prsync for each one, even while its
// reader naps so that lines gather: on 2 CPUs that scheduling was 40 % of prsync's CPU.
// Polled, the read end is a non-blocking descriptor that only its drain goroutine
// reads, every nap, and nothing wakes prsync in between. The naps of all pipes end on
// common instants (see aligned): 8 rsyncs' 16 pipes napping on their own clocks were
// 16 wake-ups of prsync where one does, about a quarter of its CPU in a copy that
// rsync's --bwlimit slowed.
type outPipe struct {
	fd int      // the read end: non-blocking, prsync's
	w  *os.File // the write end, for the child; closed in the parent once it started
	// nap is the pause after a read that did not fill the buffer; while the pipe stays
	// empty it doubles up to maxNap, and data brings it back
	nap, maxNap time.Duration
	done        chan struct{} // closed when drain returns
}

// newOutPipe makes a pipe whose buffer is grown to size bytes where the system allows
// (0: the default), so that lines wait in it while the reader naps.
func newOutPipe(nap, maxNap time.Duration, size int) (*outPipe, error) {
	var p [2]int
	syscall.ForkLock.RLock() // no child may inherit the descriptors before CloseOnExec
	err := syscall.Pipe(p[:])
	if err == nil {
		syscall.CloseOnExec(p[0])
		syscall.CloseOnExec(p[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, os.NewSyscallError("pipe", err)
	}
	if err := syscall.SetNonblock(p[0], true); err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, os.NewSyscallError("fcntl", err)
	}
	if size > 0 {
		growPipe(p[0], size)
	}
	return &outPipe{fd: p[0], w: os.NewFile(uintptr(p[1]), "|rsync"), nap: nap, maxNap: maxNap,
		done: make(chan struct{})}, nil
}

// drain copies the pipe to w until every writer has closed it, or until stop is closed;
// it then closes the read end, and done. exited, once closed, ends the long naps: the
// child is gone and what it wrote is waiting, but a grandchild may still hold the pipe
// open, so drain polls every 10 ms until stop.
func (o *outPipe) drain(w io.Writer, exited, stop <-chan struct{}) {
	defer close(o.done)
	defer syscall.Close(o.fd)
	buf := make([]byte, 64<<10)
	nap := o.nap
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	stopped := false
	for {
		n, err := syscall.Read(o.fd, buf)
		switch {
		case n > 0:
			w.Write(buf[:n])
			nap = o.nap
			if n == len(buf) && !stopped {
				continue // more is waiting
			}
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			nap = min(2*nap, o.maxNap)
		default:
			return // end of file: every writer closed it; or the descriptor failed
		}
		if stopped {
			return
		}
		d := nap
		if exited == nil {
			d = min(d, 10*time.Millisecond)
		}
		t.Reset(aligned(time.Now(), d))
		select {
		case <-t.C:
		case <-exited:
			exited = nil
		case <-stop:
			stopped = true
		}
		t.Stop() // no stale tick stays behind (Go 1.23 timers)
	}
}

// epoch is the clock the naps of every outPipe are aligned to.
var epoch = time.Now()

// aligned returns how long from now until the next multiple of d since epoch: the
// pipes that nap as long wake at the same instants, so that their timers fire together
// and the runtime wakes one thread for all of them, not one for each.
func aligned(now time.Time, d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d - now.Sub(epoch)%d
}

// outPipes are a child's stdout and stderr.
type outPipes struct {
	out, err *outPipe
	exited   chan struct{}
	stop     chan struct{}
}

// newOutPipes makes the pipes for cmd's stdout and stderr and starts draining them into
// stdout and stderr. The caller must call started after cmd.Start, and then wait.
func newOutPipes(stdout, stderr io.Writer) (*outPipes, error) {
	// 25 ms of one rsync's lines at its fastest (20,000 files a second) is about 35 KiB;
	// quiet, the reader looks every 100 ms
	out, err := newOutPipe(25*time.Millisecond, 100*time.Millisecond, 256<<10)
	if err != nil {
		return nil, err
	}
	errp, err := newOutPipe(25*time.Millisecond, 100*time.Millisecond, 0)
	if err != nil {
		out.w.Close()
		syscall.Close(out.fd)
		return nil, err
	}
	ps := &outPipes{out: out, err: errp, exited: make(chan struct{}), stop: make(chan struct{})}
	go out.drain(stdout, ps.exited, ps.stop)
	go errp.drain(stderr, ps.exited, ps.stop)
	return ps, nil
}

// started closes the parent's copies of the write ends, once the child has them (or
// failed to start): the pipes then end when the child and its children have exited.
func (ps *outPipes) started() {
	ps.out.w.Close()
	ps.err.w.Close()
}

// wait waits, once the child has exited, until both streams are read to their end, for
// at most grace (a grandchild may hold them open), and reports whether they ended.
func (ps *outPipes) wait(grace time.Duration) bool {
	close(ps.exited)
	t := time.NewTimer(grace)
	defer t.Stop()
	for _, o := range []*outPipe{ps.out, ps.err} {
		select {
		case <-o.done:
		case <-t.C:
			close(ps.stop)
			<-ps.out.done
			<-ps.err.done
			return false
		}
	}
	return true
}
