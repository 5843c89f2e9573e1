package cmdline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/alecthomas/kong"
)

type coded struct {
	code int
	hint string
}

func (e *coded) Error() string    { return fmt.Sprintf("failed with %d", e.code) }
func (e *coded) ExitCode() int    { return e.code }
func (e *coded) HintText() string { return e.hint }

func TestFail(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		otherwise int
		want      int
		stderr    string
	}{
		{"plain", errors.New("bad thing"), 1, 1, "prsync: error: bad thing\n"},
		{"plain otherwise", errors.New("gone"), 2, 2, "prsync: error: gone\n"},
		{"coded", &coded{code: 3}, 1, 3, "prsync: error: failed with 3\n"},
		{"coded hint", &coded{code: 127, hint: "install rsync"}, 1, 127,
			"prsync: error: failed with 127\nprsync: hint: install rsync\n"},
		{"wrapped", fmt.Errorf("open: %w", &coded{code: 2, hint: "look"}), 1, 2,
			"prsync: error: open: failed with 2\nprsync: hint: look\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if got := Fail(&b, tt.err, tt.otherwise); got != tt.want {
				t.Errorf("Fail = %d, want %d", got, tt.want)
			}
			if b.String() != tt.stderr {
				t.Errorf("stderr %q, want %q", b.String(), tt.stderr)
			}
		})
	}
}

func TestCodeOfNil(t *testing.T) {
	if got := Code(nil, 1); got != 0 {
		t.Errorf("Code(nil) = %d, want 0", got)
	}
}

func TestHelpers(t *testing.T) {
	var b bytes.Buffer
	Warnf(&b, "--max-load: %v; ignoring it", errors.New("no such file"))
	Hintf(&b, "%s", "add --delete")
	Warner(&b)(errors.New("control socket: refused"))
	Printf(&b, "removed %d rsync temp file(s)", 2)
	Errorf(&b, "%d failed", 3)
	want := "prsync: warning: --max-load: no such file; ignoring it\n" +
		"prsync: hint: add --delete\n" +
		"prsync: warning: control socket: refused\n" +
		"prsync: removed 2 rsync temp file(s)\n" +
		"prsync: error: 3 failed\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// fatalFlag ends the command as kong does on an error of its own.
type fatalFlag bool

func (fatalFlag) BeforeApply(k *kong.Kong) error {
	k.Exit(80)
	return nil
}

// TestParse: kong's own exits come back from Parse with their exit codes.
func TestParse(t *testing.T) {
	tests := []struct {
		args   []string
		exited bool
		code   int
		err    bool
	}{
		{args: []string{"x"}},
		{args: []string{"--help"}, exited: true, code: 0},
		{args: []string{"--fatal"}, exited: true, code: 1},
		{args: []string{"--n", "x"}, err: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.args), func(t *testing.T) {
			var f struct {
				Fatal fatalFlag `help:"End as kong does on an error of its own."`
				N     int       `help:"A number."`
				Arg   string    `arg:"" optional:""`
			}
			k, err := kong.New(&f, kong.Writers(io.Discard, io.Discard), kong.Exit(Exit))
			if err != nil {
				t.Fatal(err)
			}
			kctx, err := Parse(k, tt.args)
			code, ok := Exited(err)
			if ok != tt.exited || code != tt.code {
				t.Errorf("Exited(%v) = %d, %v; want %d, %v", err, code, ok, tt.code, tt.exited)
			}
			if ok && kctx != nil {
				t.Errorf("a context after kong's exit")
			}
			if !ok && (err != nil) != tt.err {
				t.Errorf("Parse error %v, want one: %v", err, tt.err)
			}
		})
	}
}

// TestSprintf: a line drawn by its writer carries the prefix every stderr line has.
func TestSprintf(t *testing.T) {
	if got := Sprintf("status: %d files", 3); got != "prsync: status: 3 files" {
		t.Errorf("Sprintf = %q", got)
	}
}
