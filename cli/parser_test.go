package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// exited is the panic of a parser's exit function in these tests.
type exited struct{ code int }

// parseArgs runs newParser's parser on args; exit is -1 when the parser did not exit.
func parseArgs(t *testing.T, args ...string) (f Flags, stdout, stderr string, exit int, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	p, err := newParser(&f, &out, &errb, func(c int) { panic(exited{c}) })
	if err != nil {
		t.Fatal(err)
	}
	exit = -1
	func() {
		defer func() {
			if r := recover(); r != nil {
				e, ok := r.(exited)
				if !ok {
					panic(r)
				}
				exit = e.code
			}
		}()
		_, err = p.Parse(args)
	}()
	return f, out.String(), errb.String(), exit, err
}

// oneLine joins the words of s with single spaces, undoing kong's wrapping.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestHelp(t *testing.T) {
	_, out, stderr, exit, err := parseArgs(t, "--help")
	if err != nil || exit != 0 || stderr != "" {
		t.Fatalf("--help: err %v, exit %d, stderr %q", err, exit, stderr)
	}
	if !strings.HasPrefix(out, "Usage: prsync [flags] DEST [-- RSYNC_OPTION ...]\n") {
		t.Errorf("--help starts with %q", strings.SplitN(out, "\n", 2)[0])
	}
	flat := oneLine(out)
	for _, want := range []string{
		"--chunk-files=N The most paths in a chunk (2000 in a pull from a remote --root whose rsync options rule out anchors, such as -r; in a pull from a daemon with anchors a chunk's list also stops at 256 KiB unless this is given; see README); given without --chunk-time, chunks are cut at exactly this many (default: 10000, $PRSYNC_CHUNK_FILES).",
		"(default: 2s, $PRSYNC_CHUNK_TIME)",
		"(default: 128M, $PRSYNC_CHUNK_BYTES)",
		"(default: 1s, $PRSYNC_CHUNK_WAIT)",
		"Input paths are NUL-separated (find -print0, fd -0, git ls-files -z) ($PRSYNC_NULL).",
		"Examples:",
		"Exit codes, events, progress, signals and metrics: man prsync",
		"Commands (each has its own --help): doctor check a planned run",
		"ctl change a running prsync: status, jobs N, bwlimit RATE, pause, resume",
		"report turn a run's JSON events into an HTML page",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
	for _, ex := range examples {
		if !strings.Contains(out, "  # "+ex.Comment+"\n") {
			t.Errorf("--help lacks the example %q", ex.Comment)
		}
		for _, l := range ex.Lines {
			if !strings.Contains(out, "  "+l+"\n") {
				t.Errorf("--help lacks the example line %q", l)
			}
		}
	}
	for _, l := range CommandSynopses {
		if !strings.Contains(out, "\n       "+l+"\n") {
			t.Errorf("--help's usage lacks %q", l)
		}
	}
	if i, j := strings.Index(out, "Flags:"), strings.Index(out, "Examples:"); i < 0 || j < i {
		t.Errorf("the examples do not come after the flags:\n%s", out)
	}
	if strings.Contains(out, "PRSYNC_VERSION") || strings.Contains(out, "PRSYNC_HELP") {
		t.Errorf("--help gives --version or --help a variable:\n%s", out)
	}
}

// Every flag of the model shows its default and its variable in --help.
func TestHelpEveryFlag(t *testing.T) {
	p, err := Parser()
	if err != nil {
		t.Fatal(err)
	}
	_, out, _, _, _ := parseArgs(t, "--help")
	flat := oneLine(out)
	for _, fl := range p.Model.Flags {
		if fl.Hidden {
			continue
		}
		if !strings.Contains(flat, "--"+fl.Name) {
			t.Errorf("--help lacks --%s", fl.Name)
		}
		if fl.Name != "help" && fl.Name != "version" && len(fl.Envs) != 1 {
			t.Errorf("--%s reads %v, want one PRSYNC_ variable", fl.Name, fl.Envs)
		}
		for _, e := range fl.Envs {
			if !strings.Contains(flat, "$"+e) {
				t.Errorf("--help lacks $%s of --%s", e, fl.Name)
			}
		}
		if d := Default(fl.Value); d != "" && !strings.Contains(flat, "(default: "+d) {
			t.Errorf("--help lacks the default %q of --%s", d, fl.Name)
		}
	}
}

func TestHelpSuffix(t *testing.T) {
	p, err := Parser()
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]*kong.Flag{}
	for _, fl := range p.Model.Flags {
		flags[fl.Name] = fl
	}
	tests := map[string]string{
		"chunk-files": " (default: 10000, $PRSYNC_CHUNK_FILES)",
		"null":        " ($PRSYNC_NULL)", // a bool is off by default
		"root":        " ($PRSYNC_ROOT)", // no default
		"version":     "",
		"help":        "",
	}
	for name, want := range tests {
		fl := flags[name]
		if fl == nil {
			t.Errorf("no flag --%s", name)
			continue
		}
		if got := helpSuffix(fl.Value); got != want {
			t.Errorf("helpSuffix(--%s) = %q, want %q", name, got, want)
		}
	}
	for _, pos := range p.Model.Positional {
		if got := helpSuffix(pos); got != "" {
			t.Errorf("helpSuffix(%s) = %q, want none", pos.Name, got)
		}
	}
}

// --version must not read PRSYNC_VERSION: a variable of that name left in a build script's
// environment would turn every run into a version print.
func TestVersionReadsNoEnvironment(t *testing.T) {
	t.Setenv("PRSYNC_VERSION", "1.2.3")
	f, out, _, exit, err := parseArgs(t, "dst")
	if err != nil || exit != -1 || out != "" || f.Dest != "dst" {
		t.Fatalf("PRSYNC_VERSION=1.2.3 prsync dst: err %v, exit %d, stdout %q", err, exit, out)
	}
}

func TestVersionFlag(t *testing.T) {
	_, out, _, exit, err := parseArgs(t, "--version")
	if err != nil || exit != 0 {
		t.Fatalf("--version: err %v, exit %d", err, exit)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "prsync ") || !strings.HasPrefix(lines[1], "commit ") {
		t.Fatalf("--version printed:\n%s", out)
	}
	if !strings.Contains(lines[2], "rsync 3.1.0 or newer") || !strings.Contains(lines[2], "3.2.3 or newer") {
		t.Errorf("--version does not name the rsync it needs:\n%s", out)
	}
}

func TestSynopsis(t *testing.T) {
	p, err := Parser()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Synopsis(p.Model), "prsync [flags] DEST [-- RSYNC_OPTION ...]"; got != want {
		t.Errorf("Synopsis = %q, want %q", got, want)
	}
}

// The parser parses as run.go's did: flags from the environment, the positionals.
func TestParserParses(t *testing.T) {
	t.Setenv("PRSYNC_CHUNK_FILES", "7")
	f, _, _, exit, err := parseArgs(t, "-0", "--root", "/data", "dst", "--", "--bwlimit=1m")
	if err != nil || exit != -1 {
		t.Fatalf("err %v, exit %d", err, exit)
	}
	if !f.Null || f.Root != "/data" || f.ChunkFiles != 7 || f.Dest != "dst" || len(f.RsyncArgs) != 1 || f.RsyncArgs[0] != "--bwlimit=1m" {
		t.Errorf("parsed %+v", f)
	}
	_, _, _, _, err = parseArgs(t, "--bogus", "dst")
	if err == nil || !strings.Contains(err.Error(), "unknown flag --bogus") {
		t.Errorf("--bogus: %v", err)
	}
}
