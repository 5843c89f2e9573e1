// Package htmlreport is prsync report: one self-contained HTML page of a run's events.
package htmlreport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/alecthomas/kong"
	"github.com/mattn/go-isatty"

	"github.com/prsync/prsync/internal/clash"
	"github.com/prsync/prsync/internal/cmdline"
)

// The exit codes of prsync report.
const (
	exitOK     = 0 // the report was written, of a whole run or of part of one
	exitUsage  = 1 // a usage error
	exitInput  = 2 // the events cannot be read, or are not prsync's
	exitOutput = 3 // the report cannot be written
)

const description = `Turn a run's JSON events into one HTML page: charts of the rate, the rsyncs running and paused, -j and the chunk size over time; the throttle's pauses; the failures by reason; the summary.

  prsync -0 -C /data /mnt/backup/ <list >events.jsonl
  prsync report events.jsonl -o report.html

The page fetches nothing: its styles and charts are inline, it has no script. A file whose run had not ended (no summary event, a last line cut short) is reported, and the page says so; lines that are not events are skipped and counted.

Exit codes: 0 the report was written; 1 usage error; 2 EVENTS cannot be read or holds no prsync events; 3 the report cannot be written.`

// flags is the command line of prsync report.
type flags struct {
	Output string `short:"o" name:"output" placeholder:"FILE" help:"Write the report to FILE (default: stdout)."`
	Events string `arg:"" name:"EVENTS" help:"The events of a run: prsync's stdout, JSON lines; - for stdin."`
}

// Main runs prsync report, args being the words after "report", and returns its exit code.
// It writes the page to -o FILE or stdout, and errors on stderr as "prsync: error: …".
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var f flags
	parser, err := newParser(&f, stderr, cmdline.Exit)
	if err != nil {
		panic(err)
	}
	parser.Stdout = stdout
	if _, err := cmdline.Parse(parser, args); err != nil {
		if code, ok := cmdline.Exited(err); ok {
			return code // after --help, or kong's own usage error
		}
		return cmdline.Fail(stderr, &cmdline.Error{Code: exitUsage, Msg: err.Error(), Hint: "see prsync report --help"}, exitUsage)
	}
	if err := run(f, stdin, stdout, stderr); err != nil {
		return cmdline.Fail(stderr, err, exitInput)
	}
	return exitOK
}

// Parser returns the parser of prsync report's command line, for the generators of the man
// page and the shell completions; it writes nothing, and never exits.
func Parser() (*kong.Kong, error) {
	var f flags
	return newParser(&f, io.Discard, func(int) {})
}

func newParser(f *flags, stderr io.Writer, exit func(int)) (*kong.Kong, error) {
	return kong.New(f,
		kong.Name("prsync report"),
		kong.Description(description),
		kong.Writers(stderr, stderr),
		kong.Exit(exit),
	)
}

func run(f flags, stdin io.Reader, stdout, stderr io.Writer) error {
	toStdout := f.Output == "" || f.Output == "-"
	if toStdout && isTerminal(stdout) {
		return &cmdline.Error{Code: exitUsage, Msg: "will not write HTML to a terminal", Hint: "name a file: prsync report " + f.Events + " -o report.html"}
	}
	if c := clash.Find(files(f, stdin, stdout, toStdout)); c != nil {
		return &cmdline.Error{Code: exitUsage, Msg: c.Error(), Hint: c.HintText()}
	}
	in, name := stdin, "stdin"
	if f.Events != "-" {
		file, err := os.Open(f.Events)
		if err != nil {
			return &cmdline.Error{Code: exitInput, Msg: fmt.Sprintf("read events: %v", unwrapPath(err, f.Events))}
		}
		defer file.Close()
		in, name = file, f.Events
	}
	rep, err := Read(in)
	switch {
	case errors.Is(err, errNoEvents):
		return &cmdline.Error{Code: exitInput, Msg: fmt.Sprintf("%s %v", name, err),
			Hint: "prsync report reads what prsync writes on stdout, as in: prsync … >events.jsonl"}
	case err != nil:
		return &cmdline.Error{Code: exitInput, Msg: fmt.Sprintf("read events: %s: %v", name, err)}
	}
	warn(stderr, rep, name)
	var page bytes.Buffer
	if err := Render(&page, rep, name); err != nil {
		return &cmdline.Error{Code: exitOutput, Msg: err.Error()}
	}
	if toStdout {
		if _, err := stdout.Write(page.Bytes()); err != nil {
			return &cmdline.Error{Code: exitOutput, Msg: fmt.Sprintf("write report: %v", err)}
		}
		return nil
	}
	if err := os.WriteFile(f.Output, page.Bytes(), 0o666); err != nil {
		return &cmdline.Error{Code: exitOutput, Msg: fmt.Sprintf("write report: %v", unwrapPath(err, f.Output))}
	}
	return nil
}

// warn says on stderr what the page says in its banners.
func warn(stderr io.Writer, rep *Report, name string) {
	if rep.Summary == nil {
		cmdline.Warnf(stderr, "%s has no summary event: the run had not ended when it was written; the report says so", name)
	}
	if rep.Truncated {
		cmdline.Warnf(stderr, "%s: the last line is cut short; the report leaves it out", name)
	}
	if rep.Bad > 0 {
		cmdline.Warnf(stderr, "%s: %d line(s) are not prsync events (the first is line %d); the report skips them", name, rep.Bad, rep.BadAt[0])
	}
	if rep.Runs > 1 {
		cmdline.Warnf(stderr, "%s holds %d runs; the report shows the first", name, rep.Runs)
	}
}

// unwrapPath drops the path from a *PathError, which the message names already in full.
func unwrapPath(err error, path string) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", path, pe.Err)
	}
	return err
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// files returns what prsync report reads and writes, for clash.Find: the events (a file,
// or stdin), then the page's file (-o, or stdout when that is a file).
func files(f flags, stdin io.Reader, stdout io.Writer, toStdout bool) []clash.File {
	const noun = "the events file"
	var files []clash.File
	if f.Events != "-" {
		files = append(files, clash.File{Flag: "EVENTS", Path: f.Events, Noun: noun})
	} else if fi := clash.StreamInfo(stdin); fi != nil {
		files = append(files, clash.File{Flag: "stdin", Info: fi, Noun: noun})
	}
	if !toStdout {
		files = append(files, clash.File{Flag: "-o", Path: f.Output, Out: true})
	} else if fi := clash.StreamInfo(stdout); fi != nil {
		files = append(files, clash.File{Flag: "stdout", Info: fi, Out: true})
	}
	return files
}
