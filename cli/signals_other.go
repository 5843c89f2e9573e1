//go:build !(darwin || freebsd || netbsd || openbsd || dragonfly)

package cli

import "os"

// infoSignals are the status signals besides SIGUSR1; this system has no SIGINFO.
var infoSignals []os.Signal
