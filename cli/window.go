package cli

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The time window (--max-duration D, as rclone's, for backup windows).
//
// It is SIGINT's cancellation in two steps, on the same contexts. At D, counted from
// prsync's start, the context that SIGINT ends ends with windowEnded as its cause: the
// input is no longer read (the paths never read are in no list, as after SIGINT), no chunk
// starts, nor a retry, an isolating re-run or the deletion pass, the throttle stops and
// continues every group it paused, and no group is paused any more, so that the rsyncs
// running can finish, and their chunks be settled (confirmed, verified). At D +
// --max-duration-grace the context that cancels those rsyncs (exec.Pool.Drain) ends too:
// TERM, then CONT, to each group, after which rsync removes its temp file. The paths left are not done, each with a reason that says the window
// ended (exec.Stopped): listed in --failed, ready to be fed to the next run. A signal
// meanwhile ends both at once.

// windowEnded is the cause the window's contexts end with; drain says it is the end of the
// grace, not of the window itself. Its text is the reason of the paths it leaves not done.
type windowEnded struct {
	d, grace time.Duration
	drain    bool
}

func (w windowEnded) Error() string {
	if w.drain {
		return fmt.Sprintf("the time window ended (--max-duration %s, then %s of grace)", shortDuration(w.d), shortDuration(w.grace))
	}
	return fmt.Sprintf("the time window ended (--max-duration %s)", shortDuration(w.d))
}

// window returns the contexts of --max-duration, and the channel closed when the window
// ends: start ends at the window's end, after which nothing starts, and drain at the end
// of its grace, when the rsyncs still running are cancelled. Both end with sig too.
// Without --max-duration both are sig and the channel is nil. stop releases them.
func (p *pipeline) window(sig context.Context) (start, drain context.Context, ended <-chan struct{}, stop func()) {
	f := &p.r.f
	if f.MaxDuration <= 0 {
		return sig, sig, nil, func() {}
	}
	start, endStart := context.WithCancelCause(sig)
	drain, endDrain := context.WithCancelCause(sig)
	ch := make(chan struct{})
	at := p.r.started.Add(f.MaxDuration)
	t1 := time.AfterFunc(time.Until(at), func() {
		close(ch) // first: whoever sees start end knows why
		endStart(windowEnded{d: f.MaxDuration, grace: f.MaxDurationGrace})
	})
	t2 := time.AfterFunc(time.Until(at.Add(f.MaxDurationGrace)), func() {
		endDrain(windowEnded{d: f.MaxDuration, grace: f.MaxDurationGrace, drain: true})
	})
	return start, drain, ch, func() {
		t1.Stop()
		t2.Stop()
		endStart(nil)
		endDrain(nil)
	}
}

// shortDuration writes d as a flag takes it, without the zero units time.Duration's String
// ends with: 6h, 1h30m, 90s as 1m30s, 500ms.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
