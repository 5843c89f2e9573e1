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
	ExitNoRsync     = 127
)

// runError ends a run before it starts: its exit code, its message and a hint ("" for
// none). Written by fail, as the rules of stderr say (internal/cmdline).
type runError struct {
	code      int
	msg, hint string
}

func (e *runError) Error() string    { return e.msg }
func (e *runError) ExitCode() int    { return e.code }
func (e *runError) HintText() string { return e.hint }

// usage is a bad command line: exit 1.
func usage(msg, hint string) error { return &runError{code: ExitUsage, msg: msg, hint: hint} }

// fail writes an error that ended the run before it started, and its hint, on stderr, and
// returns its exit code: the one it carries, else 1. A run that started picks its own
// with exitStatus.
func fail(stderr io.Writer, err error) int { return cmdline.Fail(stderr, err, ExitUsage) }
