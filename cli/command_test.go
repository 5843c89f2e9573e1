package cli

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prsync/prsync/internal/cmdline"
)

// TestCommandTree: the command kong's tree chooses for argv, and what that command gets.
func TestCommandTree(t *testing.T) {
	tests := []struct {
		args []string
		cmd  string   // the command chosen
		dest string   // the copy's DEST
		rest []string // the copy's rsync options, or the words another command parses itself
		help bool     // the parse ends after --help, with the copy's
	}{
		{args: []string{"dst"}, cmd: "copy", dest: "dst"},
		{args: []string{"-0", "dst"}, cmd: "copy", dest: "dst"},
		{args: []string{"dst", "-0"}, cmd: "copy", dest: "dst"},
		{args: []string{"--", "dst"}, cmd: "copy", dest: "dst"},
		{args: []string{"dst", "--", "--bwlimit=1m", "a,b"}, cmd: "copy", dest: "dst", rest: []string{"--bwlimit=1m", "a,b"}},
		{args: []string{"--verify", "dst"}, cmd: "copy", dest: "dst"},
		{args: []string{"doctor", "-0", "dst", "--", "-v"}, cmd: "doctor", rest: []string{"-0", "dst", "--", "-v"}},
		{args: []string{"doctor"}, cmd: "doctor"},
		{args: []string{"doctor", "--help"}, cmd: "doctor", rest: []string{"--help"}},
		{args: []string{"ctl", "jobs", "-j", "-3"}, cmd: "ctl", rest: []string{"jobs", "-j", "-3"}},
		{args: []string{"ctl", "--help"}, cmd: "ctl", rest: []string{"--help"}},
		{args: []string{"report", "-o", "x.html", "ev.jsonl"}, cmd: "report", rest: []string{"-o", "x.html", "ev.jsonl"}},
		{args: []string{"report", "--help"}, cmd: "report", rest: []string{"--help"}},
		// a DEST named after a command, after a flag or --, is the copy's, as before the tree
		{args: []string{"-0", "doctor"}, cmd: "copy", dest: "doctor"},
		{args: []string{"--verify", "ctl"}, cmd: "copy", dest: "ctl"},
		{args: []string{"--", "doctor"}, cmd: "copy", dest: "doctor"},
		{args: []string{"-0", "--", "report"}, cmd: "copy", dest: "report"},
		{args: []string{"dst", "doctor"}, cmd: "copy", dest: "dst", rest: []string{"doctor"}},
		// and so is one named after the copy's own name in the tree
		{args: []string{"copy"}, cmd: "copy", dest: "copy"},
		{args: []string{"-0", "copy"}, cmd: "copy", dest: "copy"},
		{args: []string{"--help"}, cmd: "copy", help: true},
		{args: []string{"-h"}, cmd: "copy", help: true},
		{args: []string{"--help", "doctor"}, cmd: "copy", help: true},
		{args: []string{"-0", "doctor", "--help"}, cmd: "copy", help: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.args), func(t *testing.T) {
			cmd := chosen(tt.args)
			if cmd != tt.cmd {
				t.Fatalf("chosen = %q, want %q", cmd, tt.cmd)
			}
			var g commandLine
			var out bytes.Buffer
			k, err := newCommandLine(&g, &out, &out, cmdline.Exit)
			if err != nil {
				t.Fatal(err)
			}
			_, words := commandWords(cmd, tt.args)
			kctx, err := cmdline.Parse(k, words)
			if code, ok := cmdline.Exited(err); ok {
				if !tt.help || code != 0 || !strings.HasPrefix(out.String(), "Usage: prsync [flags] DEST") {
					t.Fatalf("kong exited %d:\n%s", code, out.String())
				}
				return
			}
			if err != nil || tt.help {
				t.Fatalf("parse: %v; want --help: %v", err, tt.help)
			}
			if got := kctx.Selected().Name; got != tt.cmd {
				t.Errorf("kong selected %q, want %q", got, tt.cmd)
			}
			var rest []string
			switch cmd {
			case "copy":
				if g.Copy.Dest != tt.dest {
					t.Errorf("DEST %q, want %q", g.Copy.Dest, tt.dest)
				}
				rest = g.Copy.RsyncArgs
			case "doctor":
				rest = g.Doctor.Args
			case "ctl":
				rest = g.Ctl.Args
			case "report":
				rest = g.Report.Args
			}
			if !slices.Equal(rest, tt.rest) {
				t.Errorf("rest %q, want %q", rest, tt.rest)
			}
		})
	}
}

// The copy's --help in the tree is the --help of a parser of the copy alone (Parser's, which
// the man page and the completions are made from).
func TestCommandTreeHelp(t *testing.T) {
	_, alone, _, exit, err := parseArgs(t, "--help")
	if err != nil || exit != 0 {
		t.Fatalf("--help alone: err %v, exit %d", err, exit)
	}
	var g commandLine
	var out bytes.Buffer
	k, err := newCommandLine(&g, &out, &out, cmdline.Exit)
	if err != nil {
		t.Fatal(err)
	}
	_, words := commandWords(chosen([]string{"--help"}), []string{"--help"})
	if _, err := cmdline.Parse(k, words); err == nil {
		t.Fatal("--help did not exit")
	}
	if out.String() != alone {
		t.Errorf("the tree's --help:\n%s\nwant:\n%s", out.String(), alone)
	}
}
