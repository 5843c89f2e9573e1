package docgen

import (
	"bytes"
	"strings"
	"testing"
)

// Every subcommand has a synopsis line and a section of the man page, from README's section
// of its name, and all three completions name its word and its flags.
func TestSubcommandsDocumented(t *testing.T) {
	s := load(t)
	man := manPage(t, s)
	for _, app := range Subcommands() {
		sh := "\n.SH " + quoteArg(strings.ToUpper(readmeSection(app))) + "\n"
		if !strings.Contains(man, sh) {
			t.Errorf("the man page has no section %q", strings.TrimSpace(sh))
		}
		if !strings.Contains(man, ".br\n"+subSynopsis(app)+"\n") {
			t.Errorf("the man page's synopsis lacks %s", app.Name)
		}
		if strings.Contains(man, "![") {
			t.Errorf("the man page has a README picture")
		}
		for name, gen := range map[string]func(*bytes.Buffer) error{
			"bash": func(b *bytes.Buffer) error { return Bash(b, s.App) },
			"zsh":  func(b *bytes.Buffer) error { return Zsh(b, s.App) },
			"fish": func(b *bytes.Buffer) error { return Fish(b, s.App) },
		} {
			var b bytes.Buffer
			if err := gen(&b); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), subWord(app)) {
				t.Errorf("the %s completion lacks %q", name, subWord(app))
			}
			for _, c := range commands(app) {
				if !strings.Contains(b.String(), c.Name) {
					t.Errorf("the %s completion lacks %s %s", name, app.Name, c.Name)
				}
			}
			for _, fl := range Flags(app) {
				want := "--" + fl.Name
				if name == "fish" {
					want = "-l " + fl.Name
				}
				if !strings.Contains(b.String(), want) {
					t.Errorf("the %s completion lacks %s %s", name, app.Name, want)
				}
				if !strings.Contains(man, `\fB\-\-`+literal(fl.Name)+`\fR`) {
					t.Errorf("the man page lacks %s --%s", app.Name, fl.Name)
				}
			}
		}
	}
}

// prsync ctl is a subcommand, with its commands in the man page's synopsis and section.
func TestCtlDocumented(t *testing.T) {
	man := manPage(t, load(t))
	for _, want := range []string{
		".br\n\\fBprsync ctl\\fR [\\fB\\-\\-pid\\fR=\\fIPID\\fR] [\\fB\\-\\-socket\\fR=\\fIPATH\\fR] [\\fB\\-\\-json\\fR] \\fBstatus\\fR | \\fBjobs\\fR \\fIN\\fR | ",
		"\n.SH \"LIVE CONTROL\"\n",
		"\n.TP\n\\fBprsync ctl\\fR \\fBjobs\\fR \\fIN\\fR\nSet the number of concurrent rsyncs.\n",
	} {
		if !strings.Contains(man, want) {
			t.Errorf("the man page lacks %q", want)
		}
	}
}
