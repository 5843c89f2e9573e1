package cli

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// jobControl is what Ctrl-Z stops and fg continues: every rsync group of the run.
type jobControl interface {
	Hold()
	Release()
}

// signals routes prsync's signals for the whole life of the process, so that a signal
// arriving after the summary changes nothing: the first SIGINT, SIGTERM or SIGHUP ends
// ctx, the second ends kill; SIGTSTP (Ctrl-Z) stops every rsync group, then prsync
// itself, and SIGCONT (fg) continues the groups; SIGUSR1 (and SIGINFO, Ctrl-T, on macOS)
// asks for a status; SIGPIPE is caught, so that a closed stdout is a write error prsync
// handles, not its death.
type signals struct {
	ctx, kill context.Context

	mu     sync.Mutex
	job    jobControl
	status func() // answers SIGUSR1 (SIGINFO on macOS)
}

// notifySignals starts routing the signals. The handlers stay until the process exits.
func notifySignals() *signals {
	ctx, cancel := context.WithCancel(context.Background())
	kill, killCancel := context.WithCancel(context.Background())
	s := &signals{ctx: ctx, kill: kill}
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, append([]os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGTSTP,
		syscall.SIGCONT, syscall.SIGPIPE, syscall.SIGUSR1}, infoSignals...)...)
	go func() {
		n := 0
		for sig := range ch {
			switch sig {
			case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP:
				n++
				if n == 1 {
					cancel()
				} else {
					killCancel()
				}
			case syscall.SIGTSTP:
				if j := s.current(); j != nil {
					j.Hold()
				}
				syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			case syscall.SIGCONT:
				if j := s.current(); j != nil {
					j.Release()
				}
			case syscall.SIGPIPE:
				// the write that raised it fails with EPIPE, which the encoder reports
			default: // SIGUSR1, SIGINFO
				s.mu.Lock()
				if s.status != nil {
					s.status()
				}
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// attach makes Ctrl-Z and fg act on j, and SIGUSR1 call status, until detach.
func (s *signals) attach(j jobControl, status func()) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.job, s.status = j, status
	s.mu.Unlock()
}

// detach undoes attach; once it returns, no status call is under way.
func (s *signals) detach() { s.attach(nil, nil) }

func (s *signals) current() jobControl {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.job
}

// contexts returns the interrupt and kill contexts; without signals, they never end.
func (s *signals) contexts() (ctx, kill context.Context) {
	if s == nil {
		return context.Background(), context.Background()
	}
	return s.ctx, s.kill
}
