package docgen

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prsync/prsync/cli"
)

const readme = "../../README.md"

func load(t *testing.T) *Source {
	t.Helper()
	s, err := Load(readme)
	if err != nil {
		t.Fatal(err)
	}
	s.Version, s.Date = "v1.2.3", "2026-12-01"
	return s
}

func manPage(t *testing.T, s *Source) string {
	t.Helper()
	var b bytes.Buffer
	if err := Man(&b, s); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// hasOption reports whether text names the option as a whole word: --progress is not in
// "--no-progress".
func hasOption(text, option string) bool {
	return regexp.MustCompile(`(^|[^\w-])` + regexp.QuoteMeta(option) + `($|[^\w-])`).MatchString(text)
}

// readmeFlags returns README.md's flag table: the options each row names, and the row's
// default cell.
func readmeFlags(t *testing.T) (rows [][]string) {
	t.Helper()
	md, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := section(string(md), "Command line")
	if err != nil {
		t.Fatal(err)
	}
	rows, err = findTable(parseBlocks(lines), "flag", "default", "meaning")
	if err != nil {
		t.Fatalf("README.md, Command line: %v", err)
	}
	return rows
}

// The agreement test: every flag of the kong model is in --help, in the man page's OPTIONS
// and in README.md's flag table; README's table names no flag the model lacks, and gives
// the model's defaults.
func TestEveryFlagDocumented(t *testing.T) {
	s := load(t)
	var help, stderr bytes.Buffer
	if code := cli.Run([]string{"--help"}, strings.NewReader(""), &help, &stderr); code != 0 {
		t.Fatalf("prsync --help: exit %d: %s", code, stderr.String())
	}
	man := manPage(t, s)
	rows := readmeFlags(t)
	var cellsText []string
	for _, r := range rows {
		cellsText = append(cellsText, strings.ReplaceAll(r[0], "`", ""))
	}
	inReadme := func(option string) int {
		for i, c := range cellsText {
			if hasOption(c, option) {
				return i
			}
		}
		return -1
	}

	var missing []string
	modelOptions := map[string]bool{}
	for _, fl := range Flags(s.App) {
		option := "--" + fl.Name
		modelOptions[option] = true
		for _, a := range fl.Aliases {
			modelOptions["--"+a] = true
		}
		if !hasOption(help.String(), option) {
			t.Errorf("prsync --help lacks %s", option)
		}
		if !strings.Contains(man, `\fB\-\-`+literal(fl.Name)+`\fR`) {
			t.Errorf("the man page lacks %s", option)
		}
		row := inReadme(option)
		if row < 0 {
			missing = append(missing, option)
			continue
		}
		// a default README gives must be the model's ("0" means automatic or off, which
		// README says in words)
		if d := cli.Default(fl.Value); d != "" && d != "0" && !strings.Contains(rows[row][1], d) {
			t.Errorf("README.md gives %s the default %q; the flag's is %q", option, rows[row][1], d)
		}
	}
	if len(missing) > 0 {
		t.Errorf("README.md's flag table (## Command line) lacks %s: add a row for each", strings.Join(missing, ", "))
	}
	optionRE := regexp.MustCompile(`--[a-z][a-z0-9-]*`)
	for _, c := range cellsText {
		for _, o := range optionRE.FindAllString(c, -1) {
			if !modelOptions[o] {
				t.Errorf("README.md's flag table has %s, which prsync does not have", o)
			}
		}
	}
}

// The man page has its sections in order, and README's exit codes and event types.
func TestManPage(t *testing.T) {
	s := load(t)
	man := manPage(t, s)
	at := 0
	for _, sh := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "DOCTOR", "PROGRESS", "SIGNALS", "METRICS",
		"LIVE CONTROL", "PRSYNC REPORT", "EXIT STATUS", "EVENTS", "ENVIRONMENT", "EXAMPLES", "COPYRIGHT", "SEE ALSO"} {
		i := strings.Index(man, "\n.SH "+quoteArg(sh)+"\n")
		if i < at {
			t.Errorf("section %s missing or out of order", sh)
			continue
		}
		at = i
	}
	if !strings.HasPrefix(man, `.\" prsync(1), generated`) || !strings.Contains(man, `.TH PRSYNC 1 2026-12-01 "prsync v1.2.3" "User Commands"`) {
		t.Errorf("the page's head:\n%s", man[:min(len(man), 300)])
	}
	exits, _ := section(s.Readme, "Exit codes")
	codes, err := findTable(parseBlocks(exits), "code", "meaning")
	if err != nil || len(codes) < 5 {
		t.Fatalf("README's exit codes: %v %v", codes, err)
	}
	for _, row := range codes {
		if !strings.Contains(man, ".TP\n\\fB"+inline(row[0])+"\\fR\n"+inline(row[1])+"\n") {
			t.Errorf("the man page lacks exit code %s", row[0])
		}
	}
	events, _ := section(s.Readme, "Events")
	types, err := findTable(parseBlocks(events), "type", "when", "fields")
	if err != nil || len(types) < 5 {
		t.Fatalf("README's event types: %v %v", types, err)
	}
	for _, row := range types {
		if !strings.Contains(man, ".TP\n"+inline(row[0])+"\n") {
			t.Errorf("the man page lacks event type %s", row[0])
		}
	}
	for _, fl := range Flags(s.App) {
		for _, e := range fl.Envs {
			if !strings.Contains(man, ".TP\n\\fB"+e+"\\fR\n") {
				t.Errorf("ENVIRONMENT lacks %s", e)
			}
		}
	}
	for _, ex := range s.Examples {
		for _, l := range ex.Lines {
			if !strings.Contains(man, "\n"+literal(l)+"\n") {
				t.Errorf("EXAMPLES lacks %q", l)
			}
		}
	}
	// the licence, and no URL of a home page that is not public (README, Licence)
	if !strings.Contains(man, "Apache License, Version 2.0") || !strings.Contains(man, "SPDX\\-License\\-Identifier: Apache\\-2.0") {
		t.Errorf("the man page does not give the licence")
	}
	if strings.Contains(man, "github.com/prsync") {
		t.Errorf("the man page points to a home page that is not public")
	}
	if strings.IndexFunc(man, func(r rune) bool { return r > 0x7e || (r < ' ' && r != '\n') }) >= 0 {
		t.Errorf("the page is not plain ASCII")
	}
}

func quoteArg(s string) string {
	if strings.Contains(s, " ") {
		return `"` + s + `"`
	}
	return s
}

// The page renders with man(1) without a warning.
func TestManRenders(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("man is not installed")
	}
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("groff is not installed")
	}
	p := filepath.Join(t.TempDir(), "prsync.1")
	if err := os.WriteFile(p, []byte(manPage(t, load(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("man", "--warnings", "-l", p)
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "PAGER=cat")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("man --warnings -l prsync.1: %v\n%s", err, stderr.String())
	}
	text := out.String()
	for _, want := range []string{"prsync - parallel rsync", "--chunk-files=N", "Environment: PRSYNC_CHUNK_FILES", "EXIT STATUS"} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
}

func TestCells(t *testing.T) {
	tests := []struct {
		row  string
		want []string
	}{
		{"| a | b |", []string{"a", "b"}},
		{"| `--out-format` | reads `%i\\|%l` |", []string{"`--out-format`", "reads `%i|%l`"}},
		{"|x|y|z|", []string{"x", "y", "z"}},
	}
	for _, tt := range tests {
		if got := cells(tt.row); !slices.Equal(got, tt.want) {
			t.Errorf("cells(%q) = %q, want %q", tt.row, got, tt.want)
		}
	}
}

func TestInline(t *testing.T) {
	tests := []struct{ md, want string }{
		{"run `rsync --delete` once", `run \fBrsync \-\-delete\fR once`},
		{"**Input.** One path", `\fBInput.\fR One path`},
		{"see [Scale-out](#scale-out)", "see Scale-out"},
		{"a back\\slash … and *and*", `a back\eslash \[u2026] and \fIand\fR`},
		{"`PRSYNC_*` and 2*3", `\fBPRSYNC_*\fR and 2*3`},
	}
	for _, tt := range tests {
		if got := inline(tt.md); got != tt.want {
			t.Errorf("inline(%q) = %q, want %q", tt.md, got, tt.want)
		}
	}
}

func TestHelpText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Pass --compress to rsync.", `Pass \-\-compress to rsync.`},
		{"(find -print0, fd -0, git ls-files -z)", `(find \-print0, fd \-0, git ls-files \-z)`},
		{"Options for every rsync, after --.", `Options for every rsync, after \-\-.`},
		{"the 1-minute load", "the 1-minute load"},
	}
	for _, tt := range tests {
		if got := helpText(tt.in); got != tt.want {
			t.Errorf("helpText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSummary(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Close a chunk at this many bytes (1G, 512M, 64K); a bigger file gets a chunk of its own.", "Close a chunk at this many bytes"},
		{"Source root: paths land in DEST relative to it.", "Source root"},
		{"Never pause rsyncs.", "Never pause rsyncs"},
	}
	for _, tt := range tests {
		if got := summary(tt.in); got != tt.want {
			t.Errorf("summary(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Each generator names every flag.
func TestCompletionsNameEveryFlag(t *testing.T) {
	s := load(t)
	for name, gen := range map[string]func(*bytes.Buffer) error{
		"bash": func(b *bytes.Buffer) error { return Bash(b, s.App) },
		"zsh":  func(b *bytes.Buffer) error { return Zsh(b, s.App) },
		"fish": func(b *bytes.Buffer) error { return Fish(b, s.App) },
	} {
		var b bytes.Buffer
		if err := gen(&b); err != nil {
			t.Fatal(err)
		}
		for _, fl := range Flags(s.App) {
			want := "--" + fl.Name
			if name == "fish" {
				want = "-l " + fl.Name
			}
			if !hasOption(b.String(), want) && !strings.Contains(b.String(), want+" ") {
				t.Errorf("the %s completion lacks --%s", name, fl.Name)
			}
		}
	}
}

// pkgSpec is what a packaging file says about the package: its contents (src → dst, mode,
// and the packager and type of an entry for one packager), its dependencies, its
// description, its licence, maintainer and homepage.
type pkgSpec struct {
	contents, deps                []string
	description                   string
	conflicts                     []string // "PACKAGER: NAME", from the overrides
	license, maintainer, homepage string
}

// readPkgSpec reads the contents, dependencies, description and conflicts of nfpm.yaml or of
// .goreleaser.yaml's nfpms section, which are written alike, line by line.
func readPkgSpec(t *testing.T, path string) pkgSpec {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	var s pkgSpec
	lines := strings.Split(string(b), "\n")
	// in .goreleaser.yaml, only its nfpms section
	if i := slices.Index(lines, "nfpms:"); i >= 0 {
		lines = lines[i+1:]
		for j, l := range lines {
			if l != "" && indent(l) == 0 && !strings.HasPrefix(l, "#") {
				lines = lines[:j]
				break
			}
		}
	}
	packager := "" // inside overrides: the packager whose lines these are
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		key, value, _ := strings.Cut(strings.TrimSpace(l), ":")
		value = strings.TrimSpace(value)
		switch key {
		case "deb", "rpm", "apk", "archlinux":
			packager = key
		case "conflicts":
			for i++; i < len(lines) && indent(lines[i]) > indent(l) && strings.HasPrefix(strings.TrimSpace(lines[i]), "- "); i++ {
				s.conflicts = append(s.conflicts, packager+": "+strings.TrimPrefix(strings.TrimSpace(lines[i]), "- "))
			}
			i--
		case "- src":
			s.contents = append(s.contents, "src "+value)
		case "license":
			s.license = value
		case "maintainer":
			s.maintainer = value
		case "homepage":
			s.homepage = value
		case "dst", "mode", "packager", "type":
			if len(s.contents) > 0 {
				s.contents[len(s.contents)-1] += " " + key + " " + value
			}
		case "depends", "dependencies":
			for i++; i < len(lines) && indent(lines[i]) > indent(l) && strings.HasPrefix(strings.TrimSpace(lines[i]), "- "); i++ {
				s.deps = append(s.deps, strings.TrimPrefix(strings.TrimSpace(lines[i]), "- "))
			}
			i--
		case "description":
			if value != "|-" {
				continue
			}
			var d []string
			for i++; i < len(lines) && indent(lines[i]) > indent(l); i++ {
				d = append(d, strings.TrimSpace(lines[i]))
			}
			i--
			s.description = strings.Join(d, "\n")
		}
	}
	return s
}

// nfpm.yaml (the CI's .deb) and .goreleaser.yaml (the release's .deb and .rpm) package the
// same files, with the same dependencies and description; goreleaser adds the binary.
func TestPackagesAgree(t *testing.T) {
	nfpm, gr := readPkgSpec(t, "../../nfpm.yaml"), readPkgSpec(t, "../../.goreleaser.yaml")
	const bin = "src ./dist/nfpm/prsync dst /usr/bin/prsync mode 0755"
	if len(nfpm.contents) == 0 || nfpm.contents[0] != bin {
		t.Fatalf("nfpm.yaml's first entry is %q, want the binary: %q", nfpm.contents, bin)
	}
	if !slices.Equal(nfpm.contents[1:], gr.contents) {
		t.Errorf("the packages' contents differ:\nnfpm.yaml:        %q\n.goreleaser.yaml: %q", nfpm.contents[1:], gr.contents)
	}
	if !slices.Equal(nfpm.deps, []string{"rsync"}) || !slices.Equal(gr.deps, nfpm.deps) {
		t.Errorf("dependencies: nfpm.yaml %q, .goreleaser.yaml %q; want rsync", nfpm.deps, gr.deps)
	}
	// pssh's /usr/bin/prsync (Fedora, EPEL, Alpine); Debian's pssh names it parallel-rsync
	if !slices.Equal(nfpm.conflicts, []string{"rpm: pssh"}) || !slices.Equal(gr.conflicts, nfpm.conflicts) {
		t.Errorf("conflicts: nfpm.yaml %q, .goreleaser.yaml %q; want the .rpm's on pssh alone", nfpm.conflicts, gr.conflicts)
	}
	if nfpm.description == "" || nfpm.description != gr.description {
		t.Errorf("descriptions differ:\n%s\n--\n%s", nfpm.description, gr.description)
	}
	// the licence (LICENSE, Apache-2.0), a maintainer with no made-up address, and no
	// homepage while nothing is public (README, Install)
	for _, s := range []struct {
		file string
		spec pkgSpec
	}{{"nfpm.yaml", nfpm}, {".goreleaser.yaml", gr}} {
		if s.spec.license != "Apache-2.0" {
			t.Errorf("%s: license %q, want Apache-2.0", s.file, s.spec.license)
		}
		if s.spec.maintainer != "The prsync authors" {
			t.Errorf("%s: maintainer %q, want The prsync authors", s.file, s.spec.maintainer)
		}
		if s.spec.homepage != "" {
			t.Errorf("%s: homepage %q: prsync has none that is public", s.file, s.spec.homepage)
		}
	}
	for _, want := range []string{
		"src ./packaging/copyright dst /usr/share/doc/prsync/copyright packager deb mode 0644",
		"src ./LICENSE dst /usr/share/licenses/prsync/LICENSE packager rpm type license mode 0644",
	} {
		if !slices.Contains(gr.contents, want) {
			t.Errorf("the packages lack %q", want)
		}
	}
	g, err := os.ReadFile("../../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(g), "\n    bindir: /usr/bin\n") {
		t.Errorf(".goreleaser.yaml's nfpms do not install the binary in /usr/bin")
	}
	for _, want := range []string{"/usr/share/man/man1/prsync.1.gz", "/usr/share/bash-completion/completions/prsync",
		"/usr/share/zsh/vendor-completions/_prsync", "/usr/share/fish/vendor_completions.d/prsync.fish"} {
		if !strings.Contains(strings.Join(gr.contents, "\n"), " dst "+want+" ") {
			t.Errorf("the packages do not install %s", want)
		}
	}
}
