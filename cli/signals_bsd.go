//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package cli

import (
	"os"
	"syscall"
)

// infoSignals are the status signals besides SIGUSR1: SIGINFO is Ctrl-T on BSD terminals.
var infoSignals = []os.Signal{syscall.SIGINFO}
