package cli

import (
	"io"
	"time"

	"github.com/alecthomas/kong"

	"github.com/prsync/prsync/control"
	"github.com/prsync/prsync/htmlreport"
)

// commandLine is prsync's command line as kong's command tree: the copy, kong's default
// command, and the commands beside it. Each of those parses its own words (passthrough),
// with its own flags and --help.
type commandLine struct {
	Copy   copyCommand   `cmd:"" name:"copy" default:"withargs" hidden:"" help:"${description}"`
	Doctor doctorCommand `cmd:"" passthrough:"" help:"Check a planned run, read-only: its command with doctor in front."`
	Ctl    ctlCommand    `cmd:"" passthrough:"" help:"Change a running prsync: status, jobs N, bwlimit RATE, pause, resume."`
	Report reportCommand `cmd:"" passthrough:"" help:"Turn a run's JSON events into an HTML page."`
}

// copyName is the copy's name in the tree. No one types it: the copy is the default
// command, and run puts the name in front of the copy's words itself, so that a DEST named
// doctor after a flag (prsync -0 doctor) or named copy is the copy's DEST, as before the
// tree.
const copyName = "copy"

// session is what a command runs with: the streams, and for the copy its signals, the
// runtime's tuning, its start and its words; Run sets code, the exit code.
type session struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	sig            *signals
	tune           func(stats bool) (examined func())
	started        time.Time
	argv           []string
	code           int
}

// copyCommand is the copy: the run's flags, DEST and rsync's options.
type copyCommand struct {
	Flags `embed:""`
}

// Run validates the copy, tunes the process (if s.tune is not nil), Opens what the run
// needs, Runs it, and Closes.
func (c *copyCommand) Run(s *session) error {
	r := &runner{f: c.Flags, stdin: s.stdin, stdout: s.stdout, stderr: s.stderr, sig: s.sig, argv: s.argv, started: s.started}
	s.code = r.life(s.tune)
	return nil
}

// doctorCommand is prsync doctor: a read-only check of a planned run.
type doctorCommand struct {
	Args []string `arg:"" optional:""`
}

func (c *doctorCommand) Run(s *session) error {
	s.code = Doctor(c.Args, s.stdin, s.stdout, s.stderr)
	return nil
}

// ctlCommand is prsync ctl: live control of a running prsync.
type ctlCommand struct {
	Args []string `arg:"" optional:""`
}

func (c *ctlCommand) Run(s *session) error {
	s.code = control.Main(c.Args, s.stdout, s.stderr)
	return nil
}

// reportCommand is prsync report: an HTML page of a run's events.
type reportCommand struct {
	Args []string `arg:"" optional:""`
}

func (c *reportCommand) Run(s *session) error {
	s.code = htmlreport.Main(c.Args, s.stdin, s.stdout, s.stderr)
	return nil
}

// newCommandLine builds the parser of prsync's command tree into g: newParser's, with
// kong's --help moved from the tree's root into the copy's node, so that the copy's --help
// lists it with the copy's flags as one group (kong sets a node's flags apart from its
// parent's), as a parser of the copy alone does (Parser). At the root, kong offers the
// default command's flags, --help among them.
func newCommandLine(g *commandLine, stdout, stderr io.Writer, exit func(int)) (*kong.Kong, error) {
	return newParser(g, stdout, stderr, exit, kong.PostBuild(func(k *kong.Kong) error {
		root := k.Model.Node
		root.DefaultCmd.Flags = append(root.Flags, root.DefaultCmd.Flags...)
		root.Flags = nil
		return nil
	}))
}

// chosen returns the name of the command kong's tree chooses for args, with no side
// effects (kong.Trace): doctor, ctl or report when args start with its name, else the
// copy. Args kong cannot trace are the copy's, whose parse reports them; and a command's
// name after the first word (prsync -- doctor, prsync --help doctor) is the copy's DEST or
// nothing, as the synopses write the commands.
func chosen(args []string) string {
	var g commandLine
	k, err := newCommandLine(&g, io.Discard, io.Discard, func(int) {})
	if err != nil {
		panic(err)
	}
	kctx, err := kong.Trace(k, args)
	if err != nil || kctx.Error != nil {
		return copyName
	}
	sel := kctx.Selected()
	if sel == nil || len(args) == 0 || args[0] != sel.Name {
		return copyName
	}
	return sel.Name
}

// commandWords returns the words kong's tree parses for cmd, the command chosen for args:
// for the copy, args with a bare --verify and a negative -j rewritten (verifyArgs,
// negativeJobs), and the words, those after the copy's name; for another command, args
// as given, twice.
func commandWords(cmd string, args []string) (argv, words []string) {
	if cmd != copyName {
		return args, args
	}
	argv = negativeJobs(verifyArgs(args))
	return argv, append([]string{copyName}, argv...)
}
