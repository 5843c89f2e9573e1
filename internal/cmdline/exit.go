package cmdline

import (
	"errors"
	"fmt"

	"github.com/alecthomas/kong"
)

// ExitCoder is an error that knows the exit code it ends a command with.
type ExitCoder interface{ ExitCode() int }

// Code returns the exit code for err: 0 for none, the code it carries (ExitCoder), or
// otherwise.
func Code(err error, otherwise int) int {
	var e ExitCoder
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e.ExitCode()
	}
	return otherwise
}

// Exit is the kong.Exit of a parser that Parse runs: kong calls it to end the command
// itself, and it unwinds to Parse.
func Exit(code int) { panic(exited(code)) }

// Parse runs k.Parse(args), for a parser made with kong.Exit(Exit). When kong ends the
// command itself, after --help or --version or on an error of its own, Parse returns no
// context and an error that Exited recognises.
func Parse(k *kong.Kong, args []string) (kctx *kong.Context, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exited)
			if !ok {
				panic(r)
			}
			kctx, err = nil, e
		}
	}()
	return k.Parse(args)
}

// Exited reports whether err is kong's own end of the command, and its exit code: 0 after
// --help or --version, and 1, a usage error, for any other (kong's 80 included).
func Exited(err error) (code int, ok bool) {
	var e exited
	if !errors.As(err, &e) {
		return 0, false
	}
	return e.ExitCode(), true
}

// exited is the code kong ended the command with.
type exited int

func (e exited) Error() string { return fmt.Sprintf("kong exit %d", int(e)) }

func (e exited) ExitCode() int {
	if e == 0 {
		return 0
	}
	return 1
}

// Error ends a command with an exit code, a message and a hint ("" for none): what prsync
// and prsync ctl fail with before or outside a run.
type Error struct {
	Code      int
	Msg, Hint string
}

func (e *Error) Error() string { return e.Msg }

// ExitCode is the code the command ends with.
func (e *Error) ExitCode() int { return e.Code }

// HintText is the next step that helps, or "".
func (e *Error) HintText() string { return e.Hint }
