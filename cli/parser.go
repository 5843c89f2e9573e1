package cli

import (
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/alecthomas/kong"
)

// description is the top of --help and of the man page's DESCRIPTION.
const description = "Copy the paths read on stdin (one per line, or NUL-separated with -0) " +
	"with many rsyncs at once, and write one JSON event per line on stdout."

// Example is one example of --help and of the man page.
type Example struct {
	Comment string   // what it does, one line
	Lines   []string // the command, one or more shell lines
}

var examples = []Example{
	{"a local backup; /data/a/f lands in /mnt/backup/data/a/f", []string{
		"find /data -type f -print0 | prsync -0 /mnt/backup/"}},
	{"strip the source prefix with --root: /data/a/f lands in /mnt/backup/a/f", []string{
		"find /data -type f -print0 | prsync -0 --root /data /mnt/backup/"}},
	{"to another host over ssh", []string{
		"find /data -type f -print0 | prsync -0 -C /data backup1:/srv/backup/"}},
	{"to an rsync daemon's module", []string{
		"find /data -type f -print0 | prsync -0 -C /data rsync://backup1/mod/"}},
	{"keep the failures, fix their cause, then copy just those again", []string{
		"find /data -type f -print0 |",
		"  prsync -0 -C /data --failed failed.list /mnt/backup/ >events.jsonl",
		"prsync -0 -C /data /mnt/backup/ <failed.list"}},
	{"the last pass of a migration: copy, delete what /data lacks, check every byte", []string{
		"find /data -print0 | prsync -0 -C /data --delete --verify /mnt/new/"}},
}

// Examples returns the examples --help ends with, for the man page.
func Examples() []Example { return append([]Example(nil), examples...) }

// Synopsis is prsync's command line in one line: kong's own usage line would put the rsync
// options before the flags, and without the "--" they need.
func Synopsis(app *kong.Application) string { return synopsis(app.Name, app.Positional) }

// synopsis is the Synopsis of a command named name with the positional arguments pos.
func synopsis(name string, pos []*kong.Positional) string {
	s := name + " [flags]"
	for _, p := range pos {
		switch {
		case p.IsCumulative():
			s += " [-- " + p.Name + " ...]"
		case p.Required:
			s += " " + p.Name
		default:
			s += " [" + p.Name + "]"
		}
	}
	return s
}

// Parser returns the parser of prsync's command line, for the generators of its man page
// and shell completions; it writes nothing, and never exits.
func Parser() (*kong.Kong, error) {
	var f Flags
	return newParser(&f, io.Discard, io.Discard, func(int) {})
}

// newParser builds the parser of prsync's command line into f (a *Flags, or a struct that
// embeds one): the flags and their PRSYNC_* environment variables, --help (every flag with
// its default and variable, then the examples) and --version. extra options come last,
// and so win.
func newParser(f any, stdout, stderr io.Writer, exit func(int), extra ...kong.Option) (*kong.Kong, error) {
	opts := []kong.Option{
		kong.Name("prsync"),
		kong.Description(description),
		kong.Vars{"version": versionText(), "description": description},
		kong.DefaultEnvars("PRSYNC"),
		noEnvForExits(),
		kong.Writers(stdout, stderr),
		kong.Exit(exit),
		kong.UsageOnError(),
		kong.ConfigureHelp(kong.HelpOptions{NoAppSummary: true, WrapUpperBound: 100}),
		kong.ValueFormatter(helpValue),
		kong.Help(printHelp),
	}
	return kong.New(f, append(opts, extra...)...)
}

// noEnvForExits takes the environment variable DefaultEnvars gave --version away: a
// PRSYNC_VERSION=1.2.3 left in a build script's environment would make every prsync print
// its version and exit 0 without copying anything. (--help never gets one.)
func noEnvForExits() kong.Option {
	return kong.PostBuild(func(k *kong.Kong) error {
		return kong.Visit(k.Model, func(n kong.Visitable, next kong.Next) error {
			if fl, ok := n.(*kong.Flag); ok && fl.Target.Type() == reflect.TypeFor[kong.VersionFlag]() {
				fl.Envs, fl.Tag.Envs = nil, nil
			}
			return next(nil)
		})
	})
}

// helpValue is a flag's help in --help: its text, then its default and its variable.
func helpValue(v *kong.Value) string {
	if h, ok := strings.CutSuffix(v.Help, "."); ok {
		return h + helpSuffix(v) + "."
	}
	return v.Help + helpSuffix(v)
}

// helpSuffix is " (default: 2000, $PRSYNC_CHUNK_FILES)" before the help's final period;
// "" for a flag with neither, or a positional argument.
func helpSuffix(v *kong.Value) string {
	var parts []string
	if d := Default(v); d != "" && !kong.HasInterpolatedVar(v.OrigHelp, "default") {
		parts = append(parts, "default: "+d)
	}
	if v.Flag != nil && !kong.HasInterpolatedVar(v.OrigHelp, "env") {
		for _, e := range v.Flag.Envs {
			parts = append(parts, "$"+e)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// Default is a flag's default as --help and the man page show it: "" for none, and for a
// bool, which is always off by default.
func Default(v *kong.Value) string {
	if !v.HasDefault || v.IsBool() || v.Flag == nil {
		return ""
	}
	return v.Default
}

// CommandSynopses are the command lines of prsync's commands beside the run, as --help
// lists them under its own usage line.
var CommandSynopses = []string{
	"prsync doctor [flags] DEST [-- RSYNC_OPTION ...]",
	"prsync ctl [flags] status|jobs N|bwlimit RATE|pause|resume",
	"prsync report [-o FILE] EVENTS",
}

// commandsHelp is the end of --help: what each command beside the run does.
const commandsHelp = `
Commands (each has its own --help):
  doctor   check a planned run, read-only: its command with doctor in front
  ctl      change a running prsync: status, jobs N, bwlimit RATE, pause, resume
  report   turn a run's JSON events into an HTML page: charts, pauses, failures

Exit codes, events, progress, signals and metrics: man prsync, or README.md.
`

// printHelp is --help: the synopsis and those of the commands beside the run, kong's own
// listing of arguments and flags, the examples, then the commands.
func printHelp(options kong.HelpOptions, ctx *kong.Context) error {
	return helpWith(examples, CommandSynopses, commandsHelp)(options, ctx)
}

// helpWith is a --help printer: the synopsis (and more usage lines), kong's own listing of
// arguments and flags, the examples, then the closing text.
func helpWith(exs []Example, more []string, closing string) kong.HelpPrinter {
	return func(options kong.HelpOptions, ctx *kong.Context) error {
		w := ctx.Stdout
		pos := ctx.Model.Positional
		if sel := ctx.Selected(); sel != nil {
			pos = sel.Positional // the copy's node in prsync's command tree
		}
		if _, err := fmt.Fprintf(w, "Usage: %s\n", synopsis(ctx.Model.Name, pos)); err != nil {
			return err
		}
		for _, l := range more {
			if _, err := fmt.Fprintf(w, "       %s\n", l); err != nil {
				return err
			}
		}
		options.NoAppSummary = true
		if err := kong.DefaultHelpPrinter(options, ctx); err != nil {
			return err
		}
		var b strings.Builder
		b.WriteString("\nExamples:\n")
		for i, ex := range exs {
			if i > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "  # %s\n", ex.Comment)
			for _, l := range ex.Lines {
				fmt.Fprintf(&b, "  %s\n", l)
			}
		}
		b.WriteString(closing)
		_, err := io.WriteString(w, b.String())
		return err
	}
}
