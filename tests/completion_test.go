package tests

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prsync/prsync/cli"
	"github.com/prsync/prsync/internal/docgen"
)

// The shell completions are the ones make completions writes (docgen, from the kong
// model), run by the real shells. bash with bash-completion is part of the suite: missing,
// it skips, or fails when PRSYNC_TEST_INSTALL is set (CI installs it). zsh and fish are
// tested when present.

// writeCompletion writes one completion script into a new directory, at rel.
func writeCompletion(t *testing.T, rel string, gen func(*bytes.Buffer) error) string {
	t.Helper()
	var b bytes.Buffer
	if err := gen(&b); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func model(t *testing.T) *docgen.Source {
	t.Helper()
	p, err := cli.Parser()
	if err != nil {
		t.Fatal(err)
	}
	return &docgen.Source{App: p.Model}
}

// bashCompletionScript finds bash-completion's main script.
func bashCompletionScript() string {
	for _, p := range []string{
		"/usr/share/bash-completion/bash_completion",
		"/usr/local/share/bash-completion/bash_completion",
		"/opt/homebrew/share/bash-completion/bash_completion",
		"/opt/homebrew/etc/profile.d/bash_completion.sh",
		"/usr/local/etc/profile.d/bash_completion.sh",
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// bashComplete completes words (as bash splits the line: "--transport=d" is three words,
// "--transport", "=", "d") in dir. With bash-completion, its own loader finds the script
// in BASH_COMPLETION_USER_DIR/completions/prsync, as it finds the installed one in
// /usr/share/bash-completion/completions, and runs the function it registered.
func bashComplete(t *testing.T, compDir, bashCompletion, dir, line string, words ...string) []string {
	t.Helper()
	script := `
set -u
if [ -n "$BC" ]; then
    source "$BC"
    _completion_loader prsync
else
    source "$COMPDIR/completions/prsync"
fi
spec=$(complete -p prsync) || exit 3
fn=${spec#*-F }
fn=${fn%% *}
COMP_WORDS=("$@")
COMP_CWORD=$(($# - 1))
COMP_LINE=${LINE:-$*}
COMP_POINT=${#COMP_LINE}
COMPREPLY=()
"$fn" prsync "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
printf '%s\n' "${COMPREPLY[@]}"
`
	cmd := exec.Command("bash", append([]string{"--norc", "--noprofile", "-c", script, "bash"}, words...)...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), "BC="+bashCompletion, "COMPDIR="+compDir, "BASH_COMPLETION_USER_DIR="+compDir, "LINE="+line)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bash completion of %q: %v\n%s", words, err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("bash completion of %q wrote to stderr: %s", words, stderr.String())
	}
	return strings.Fields(out.String())
}

func completionDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "list.txt"), "", 0o644)
	writeFile(t, filepath.Join(dir, "srcdir", "f"), "", 0o644)
	writeFile(t, filepath.Join(dir, "--chimera"), "", 0o644) // a file for rsync, after --
	return dir
}

var completionCases = []struct {
	words []string
	line  string // COMP_LINE, when it is not the words joined by spaces
	want  []string
}{
	{[]string{"prsync", "--ch"}, "", []string{"--chunk-files", "--chunk-bytes", "--chunk-time", "--chunk-wait"}},
	{[]string{"prsync", "--no-p"}, "", []string{"--no-progress"}},
	{[]string{"prsync", "--transport", ""}, "", []string{"direct", "pipe"}},
	{[]string{"prsync", "--transport", "=", "d"}, "prsync --transport=d", []string{"direct"}},
	{[]string{"prsync", "--chunk-files", ""}, "", nil},
	{[]string{"prsync", "--from", "li"}, "", []string{"list.txt"}},
	{[]string{"prsync", "-C", ""}, "", []string{"srcdir"}},
	{[]string{"prsync", "dst", "--", "--ch"}, "", []string{"--chimera"}},
	// prsync report: a word first, then its own flags and files
	{[]string{"prsync", "rep"}, "", []string{"report"}},
	{[]string{"prsync", "report", "li"}, "", []string{"list.txt"}},
	{[]string{"prsync", "report", "list.txt", "--o"}, "", []string{"--output"}},
	{[]string{"prsync", "report", "list.txt", "-o", "li"}, "", []string{"list.txt"}},
	// prsync doctor: the run's flags and its own
	{[]string{"prsync", "doc"}, "", []string{"doctor"}},
	{[]string{"prsync", "doctor", "--js"}, "", []string{"--json"}},
	{[]string{"prsync", "doctor", "--chunk-f"}, "", []string{"--chunk-files"}},
	// prsync ctl: a word first, then its flags, its commands, and bwlimit's off
	{[]string{"prsync", "c"}, "", []string{"ctl"}},
	{[]string{"prsync", "ctl", ""}, "", []string{"status", "jobs", "bwlimit", "pause", "resume"}},
	{[]string{"prsync", "ctl", "--pid", "123", "p"}, "", []string{"pause"}},
	{[]string{"prsync", "ctl", "--pid", "=", "123", "re"}, "prsync ctl --pid=123 re", []string{"resume"}},
	{[]string{"prsync", "ctl", "--js"}, "", []string{"--json"}},
	{[]string{"prsync", "ctl", "--pid", ""}, "", nil},
	{[]string{"prsync", "ctl", "--socket", "li"}, "", []string{"list.txt"}},
	{[]string{"prsync", "ctl", "bwlimit", ""}, "", []string{"off"}},
	{[]string{"prsync", "ctl", "jobs", ""}, "", nil},
	{[]string{"prsync", "ctl", "status", ""}, "", nil},
}

func TestBashCompletion(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	_, err := exec.LookPath("bash")
	need(t, "bash", err == nil)
	bc := bashCompletionScript()
	need(t, "bash-completion", bc != "")
	m := model(t)
	compDir := writeCompletion(t, "completions/prsync", func(b *bytes.Buffer) error { return docgen.Bash(b, m.App) })
	dir := completionDir(t)
	for _, tt := range completionCases {
		if got := bashComplete(t, compDir, bc, dir, tt.line, tt.words...); !slices.Equal(got, tt.want) {
			t.Errorf("bash: %s<TAB> = %q, want %q", strings.Join(tt.words, " "), got, tt.want)
		}
	}
	// without bash-completion, the script still completes flags
	if got := bashComplete(t, compDir, "", dir, "", "prsync", "--ch"); !slices.Equal(got, completionCases[0].want) {
		t.Errorf("bash without bash-completion: prsync --ch<TAB> = %q", got)
	}
}

func TestZshCompletion(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skip("zsh is not installed")
	}
	m := model(t)
	fpath := writeCompletion(t, "_prsync", func(b *bytes.Buffer) error { return docgen.Zsh(b, m.App) })
	out := t.TempDir()
	// an interactive zsh on a pseudo-terminal (zsh/zpty) completes the line with ^T bound
	// to complete-word; a wrapper of compadd writes the matches it adds to a file
	// (it waits up to 60 s for that: beside the other tests, compinit on a busy CI machine
	// took more than the 5 s it once had)
	rc := `
PROMPT='%% '
unsetopt zle_bracketed_paste
fpath=("$FPATHDIR" $fpath)
autoload -Uz compinit && compinit -u -D
compadd () {
    # -O, -A and -D only compute arrays; they add nothing
    if (( ${@[(Ie)-O]} || ${@[(Ie)-A]} || ${@[(Ie)-D]} )); then
        builtin compadd "$@"
        return
    fi
    local -a hits
    builtin compadd -A hits "$@"
    (( $#hits )) && print -lr -- $hits >>"$OUT/matches"
    builtin compadd "$@"
}
comptest () { zle complete-word; print >"$OUT/done" }
zle -N comptest
bindkey '^T' comptest
`
	writeFile(t, filepath.Join(out, "rc.zsh"), rc, 0o644)
	script := `
zmodload zsh/zpty || exit 3
zpty z zsh -f -i
zpty -w z "source ${(q)OUT}/rc.zsh"
zpty -n -w z "$LINE"$'\x14'
for i in {1..1200}; do [[ -e $OUT/done ]] && break; sleep 0.05; done
zpty -d z
[[ -e $OUT/done ]]
`
	want := map[string][]string{
		"prsync --ch":             {"--chunk-files", "--chunk-bytes", "--chunk-time", "--chunk-wait"},
		"prsync --transport=":     {"direct", "pipe"},
		"prsync report x --o":     {"--output"},
		"prsync doctor --js":      {"--json"},
		"prsync doctor --chunk-f": {"--chunk-files"},
		"prsync doc":              {"doctor"},
		"prsync c":                {"ctl"},
		"prsync ctl ":             {"status", "jobs", "bwlimit", "pause", "resume"},
		"prsync ctl --pid 1 p":    {"pause"},
		"prsync ctl --js":         {"--json"},
		"prsync ctl bwlimit ":     {"off"},
	}
	for _, line := range slices.Sorted(maps.Keys(want)) {
		os.Remove(filepath.Join(out, "matches"))
		os.Remove(filepath.Join(out, "done"))
		cmd := exec.Command("zsh", "-f", "-c", script)
		cmd.Dir = t.TempDir()
		cmd.Env = append(cleanEnv(), "FPATHDIR="+fpath, "OUT="+out, "LINE="+line)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("zsh completion of %q: %v\n%s", line, err, b)
		}
		b, _ := os.ReadFile(filepath.Join(out, "matches"))
		got := strings.Fields(string(b))
		if !slices.Equal(got, want[line]) {
			t.Errorf("zsh: %s<TAB> = %q, want %q", line, got, want[line])
		}
	}
}

func TestFishCompletion(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("fish is not installed")
	}
	m := model(t)
	dir := writeCompletion(t, "prsync.fish", func(b *bytes.Buffer) error { return docgen.Fish(b, m.App) })
	for _, tt := range []struct {
		line string
		want []string // fish sorts
	}{
		{"prsync --ch", []string{"--chunk-bytes", "--chunk-files", "--chunk-time", "--chunk-wait"}},
		{"prsync --transport ", []string{"direct", "pipe"}},
		{"prsync dst -- --ch", nil},
		{"prsync report x --o", []string{"--output"}},
		{"prsync c", []string{"ctl"}},
		{"prsync ctl ", []string{"bwlimit", "jobs", "pause", "resume", "status"}},
		{"prsync ctl --js", []string{"--json"}},
		{"prsync ctl --pid 1 p", []string{"pause"}},
		{"prsync ctl bwlimit ", []string{"off"}},
		{"prsync ctl jobs ", nil},
		{"prsync ctl --ch", nil}, // the run's flags are not ctl's
	} {
		cmd := exec.Command("fish", "--no-config", "-c", `source $argv[1]; complete -C $argv[2]`, filepath.Join(dir, "prsync.fish"), tt.line)
		cmd.Dir = t.TempDir()
		cmd.Env = cleanEnv()
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fish completion of %q: %v\n%s", tt.line, err, b)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("fish: %s<TAB> = %q, want %q", tt.line, got, tt.want)
		}
	}
}
