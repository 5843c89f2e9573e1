package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/mattn/go-isatty"

	"github.com/prsync/prsync/doctor"
	"github.com/prsync/prsync/internal/cmdline"
)

// ExitDoctor is prsync doctor's exit code when a check is an error (0 when none is; a bad
// command line is 1 as for the run).
const ExitDoctor = 1

const doctorDescription = "Check a planned run without running it: put doctor in front of the prsync command you " +
	"were about to run, with the same flags and the same list on stdin. It prints one line per check (ok, warning " +
	"or error, with its fix) and exits 0 when no check is an error, 1 when one is. It creates, copies and writes nothing."

// doctorFlags is prsync doctor's command line: the run's, and its own.
type doctorFlags struct {
	Run    Flags `embed:""`
	JSON   bool  `name:"json" help:"Print the checks as one JSON object."`
	Sample int   `default:"10000" placeholder:"N" help:"Examine the first N paths of the list for hard links, ACLs, xattrs and holes."`
}

// Doctor is prsync doctor: args are the words after "doctor", the run's flags, DEST and
// rsync's options. It returns the exit code.
func Doctor(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var f doctorFlags
	parser, err := newParser(&f, stdout, stderr, cmdline.Exit,
		kong.Name("prsync doctor"), kong.Description(doctorDescription), kong.Help(printDoctorHelp))
	if err != nil {
		panic(err)
	}
	args = negativeJobs(verifyArgs(args))
	if _, err := cmdline.Parse(parser, args); err != nil {
		if code, ok := cmdline.Exited(err); ok {
			return code
		}
		if errors.Is(err, syscall.EPIPE) {
			return 0
		}
		return fail(stderr, parseError(err, args, "see prsync doctor --help"))
	}
	if f.Sample < 1 {
		return fail(stderr, usage(fmt.Sprintf("--sample %d: want at least 1", f.Sample), ""))
	}
	r := &runner{f: f.Run, stdin: stdin, stdout: stdout, stderr: stderr, argv: args}
	err = r.Validate() // no side effects, and the run's own rules
	var rsyncErr error
	if err != nil {
		if cmdline.Code(err, ExitUsage) != ExitNoRsync {
			return fail(stderr, err)
		}
		rsyncErr = errors.New(strings.TrimPrefix(err.Error(), "rsync not found: "))
	}
	r.derive()
	plan, err := r.doctorPlan(f.Sample)
	if err != nil {
		return fail(stderr, &cmdline.Error{Code: ExitInput, Msg: fmt.Sprintf("--from: %v", err)})
	}
	if c, ok := plan.List.(*os.File); ok && plan.List != stdin {
		defer c.Close()
	}
	plan.RsyncErr = rsyncErr
	rep := doctor.Run(context.Background(), plan)
	if f.JSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil && !errors.Is(err, syscall.EPIPE) {
		cmdline.Errorf(stderr, "write the report: %v", err)
	}
	if rep.Count(doctor.Error) > 0 {
		return ExitDoctor
	}
	return ExitOK
}

// doctorPlan is what Validate decided, for doctor.Run. It opens --from (read only); the
// list is nil when stdin is a terminal, which holds no list.
func (r *runner) doctorPlan(sample int) (doctor.Plan, error) {
	f := &r.f
	p := doctor.Plan{
		Rsync: r.rsync, Args: r.args, Dest: f.Dest, Root: r.srcRemote,
		Jobs: r.jobs, Env: r.rsyncEnv(),
		Policy: r.policy, NoThrottle: f.NoThrottle, NoControl: f.NoControl,
		Source: doctor.SourceConfig{Sep: '\n', Sizes: f.Sizes, Base: r.root, Remote: r.srcRemote != "", Sample: sample},
	}
	if f.Null {
		p.Source.Sep = 0
	}
	if p.Source.Base == "" || p.Source.Remote {
		p.Source.Base = r.cwd
	}
	p.ListSource = "stdin"
	switch {
	case f.From != "" && f.From != "-":
		p.ListSource = f.From
		fh, err := os.Open(f.From)
		if err != nil {
			return p, err
		}
		p.List = fh
	case isTerminal(r.stdin):
	default:
		p.List = r.stdin
	}
	return p, nil
}

func isTerminal(in io.Reader) bool {
	fh, ok := in.(*os.File)
	return ok && (isatty.IsTerminal(fh.Fd()) || isatty.IsCygwinTerminal(fh.Fd()))
}

var doctorExamples = []Example{
	{"check a run before starting it: the same command, with doctor in front", []string{
		"find /data -type f -print0 | prsync doctor -0 -C /data -j 16 rsync://backup1/mod/ -- -H"}},
	{"in a script: stop unless every check passes", []string{
		"find /data -type f -print0 >list",
		"prsync doctor -0 -C /data --from list /mnt/backup/ && prsync -0 -C /data --from list /mnt/backup/"}},
	{"the checks as JSON: the errors only", []string{
		"prsync doctor --json --from list /mnt/backup/ | jq '.checks[] | select(.status==\"error\")'"}},
}

// printDoctorHelp is prsync doctor --help: its synopsis, the flags, and its examples.
func printDoctorHelp(options kong.HelpOptions, ctx *kong.Context) error {
	return helpWith(doctorExamples, nil, "\nThe checks and their fixes: README.md, prsync doctor; man prsync.\n")(options, ctx)
}
