// Package cmdline holds what prsync's two command lines, prsync and prsync ctl, share:
// the rules of stderr and their helpers, the exit code an error carries, and kong's exits.
package cmdline

import (
	"errors"
	"fmt"
	"io"
)

// The rules of stderr.
//
// stdout carries what a program reads: prsync's events, prsync ctl's reply. stderr is for
// the person at the terminal, and every line of it starts with "prsync: ":
//
//   - "prsync: error: …" says why the run, or a part of it, failed. The exit code says it
//     too, so a script need not read it.
//   - "prsync: warning: …" says what a user may not expect, and the run goes on: an option
//     that does nothing here, a figure that cannot be measured and whose limit is ignored.
//   - "prsync: hint: …" follows an error or a warning when a next step helps: what to type,
//     or what to change.
//   - "prsync: status: …" (SIGUSR1), the progress line and the summary line on a terminal,
//     and the odd note such as the rsync temp files removed, report; they are not
//     diagnostics.
//
// A message is lowercase and ends with no period; it starts with what it is about (the
// flag, the file, the step: "--failed: …", "create destination: …") and wraps its cause
// with that short context. Diagnostics are not events: the events say what became of
// every path, for a program; a diagnostic says what a person must know, once, and is
// never the only place an outcome is told.
//
// Only the command lines write here, through the helpers below. Library packages return
// errors, or hand their warnings to a func(error) the command line gives them (Warner).

const prefix = "prsync: "

// Printf writes one line on w, after the "prsync: " prefix: a note that is no diagnostic.
func Printf(w io.Writer, format string, a ...any) {
	fmt.Fprintf(w, prefix+format+"\n", a...)
}

// Sprintf returns a line with the "prsync: " prefix and no newline, for a writer that
// draws it itself: the progress line, redrawn in place on a terminal.
func Sprintf(format string, a ...any) string {
	return prefix + fmt.Sprintf(format, a...)
}

// Errorf writes a "prsync: error: …" line on w.
func Errorf(w io.Writer, format string, a ...any) { Printf(w, "error: "+format, a...) }

// Warnf writes a "prsync: warning: …" line on w.
func Warnf(w io.Writer, format string, a ...any) { Printf(w, "warning: "+format, a...) }

// Hintf writes a "prsync: hint: …" line on w.
func Hintf(w io.Writer, format string, a ...any) { Printf(w, "hint: "+format, a...) }

// Warner returns a func that writes each warning it is given on w: what a library package
// that warns is given.
func Warner(w io.Writer) func(error) {
	return func(err error) { Warnf(w, "%v", err) }
}

// Fail writes err as an error on w, then its hint if it has one, and returns the exit code
// it carries (see Code).
func Fail(w io.Writer, err error, otherwise int) int {
	Errorf(w, "%v", err)
	if h := Hint(err); h != "" {
		Hintf(w, "%s", h)
	}
	return Code(err, otherwise)
}

// Hinter is an error with a hint, the next step that helps.
type Hinter interface{ HintText() string }

// Hint returns the hint of err, or "" if it has none.
func Hint(err error) string {
	var h Hinter
	if errors.As(err, &h) {
		return h.HintText()
	}
	return ""
}
