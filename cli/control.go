package cli

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/prsync/prsync/books"
	"github.com/prsync/prsync/control"
	"github.com/prsync/prsync/internal/cmdline"
)

// ctlHandler answers live control (prsync ctl) for a run. Its methods run on the control
// server's goroutines: what they change goes through the pool's own lock, and what they
// report goes to the reporter, the one owner of the books, which write the events.
type ctlHandler struct {
	p      *pipeline
	pinned atomic.Bool // jobs was set by hand: -j auto stops tuning
}

// statusRequest asks the reporter for a status; it answers on reply, and writes a
// status event (and, for a signal, one line on stderr).
type statusRequest struct {
	by    string // "socket" or "signal"
	reply chan control.Status
}

// controlChange is a change made by live control, for the control event.
type controlChange struct {
	what, old, new string
}

func (m controlChange) apply(r *reporter) { r.books.ControlChanged(m.what, m.old, m.new) }

func (h *ctlHandler) Status() (control.Status, error) {
	req := statusRequest{by: "socket", reply: make(chan control.Status, 1)}
	h.p.rep.in <- req
	return <-req.reply, nil
}

func (h *ctlHandler) SetJobs(n int) (old, new int, err error) {
	p := h.p
	if n > p.r.maxJobs {
		return 0, 0, &control.Error{Msg: fmt.Sprintf("jobs %d is above --max-jobs %d", n, p.r.maxJobs),
			Hint: "start prsync with a higher --max-jobs to go further"}
	}
	old = p.pool.Limit()
	if p.r.tuner != nil && !h.pinned.Swap(true) {
		cmdline.Warnf(p.r.stderr, "-j set by prsync ctl: -j auto stops tuning")
	}
	p.pool.SetLimit(n, "control", "prsync ctl jobs", 0)
	p.rep.in <- controlChange{"jobs", fmt.Sprint(old), fmt.Sprint(n)}
	return old, n, nil
}

func (h *ctlHandler) SetBWLimit(spec string) (old, new string, err error) {
	p := h.p
	if p.bw == nil {
		return "", "", &control.Error{Msg: "the bandwidth limit is not measured on this system"}
	}
	old, new, err = p.bw.set(spec)
	if err != nil {
		return "", "", &control.Error{Msg: err.Error(), Hint: `write a rate such as 20M, "off", or a timetable such as "08:00,20M 19:00,200M 23:00,off"`}
	}
	p.rep.in <- controlChange{"bwlimit", old, new}
	return old, new, nil
}

func (h *ctlHandler) Pause() error {
	if h.p.pool.PauseAll() {
		h.p.rep.in <- controlChange{"pause", "running", "paused"}
	}
	return nil
}

func (h *ctlHandler) Resume() error {
	if h.p.pool.ResumeAll() {
		h.p.rep.in <- controlChange{"resume", "paused", "running"}
	}
	return nil
}

// startControl opens the control socket of the run; it returns a func that closes it,
// to be called before the reporter stops.
func (p *pipeline) startControl() func() {
	r := p.r
	if r.f.NoControl {
		return func() {}
	}
	dir, err := control.DefaultDir()
	if err != nil {
		cmdline.Warnf(r.stderr, "no live control: %v", err)
		return func() {}
	}
	srv, err := control.Listen(control.SocketPath(dir, os.Getpid()), p.control, cmdline.Warner(r.stderr))
	if err != nil {
		cmdline.Warnf(r.stderr, "no live control: %v", err)
		return func() {}
	}
	p.controlSocket = srv.Path()
	return func() { srv.Close() }
}

// apply answers a status request: the books tell the status (an event, and for a signal
// one line on stderr) from one snapshot, which the reply gets too.
func (m statusRequest) apply(r *reporter) {
	s := r.books.Status(m.by)
	if m.reply != nil {
		m.reply <- books.ControlStatus(s)
	}
}
