package cli

import (
	"io"

	"github.com/prsync/prsync/internal/cmdline"
)

// Exit codes. They follow rsync's where the meaning matches.
const (
	ExitOK          = 0
	ExitUsage       = 1
	ExitInput       = 2
	ExitDest        = 3
	ExitInterrupted = 20
	ExitPartial     = 23
	ExitVanished    = 24
	// ExitMaxDuration: the --max-duration window ended with paths not done or input not
	// read. rsync has no such code; GNU timeout(1) exits 124 when its time is up.
	ExitMaxDuration = 124
	ExitNoRsync     = 127
)

// usage is a bad command line: exit 1.
func usage(msg, hint string) error { return &cmdline.Error{Code: ExitUsage, Msg: msg, Hint: hint} }

// fail writes an error that ended the run before it started, and its hint, on stderr, and
// returns its exit code: the one it carries, else 1. A run that started picks its own
// with exitStatus.
func fail(stderr io.Writer, err error) int { return cmdline.Fail(stderr, err, ExitUsage) }
