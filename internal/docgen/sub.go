package docgen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/prsync/prsync/htmlreport"
)

// Subcommands returns the kong models of the commands of their own under prsync that the
// documents describe beside the run (prsync report), each named "prsync WORD".
func Subcommands() []*kong.Application {
	p, err := htmlreport.Parser()
	if err != nil {
		panic(err) // a static model: a test catches it
	}
	return []*kong.Application{p.Model}
}

// subWord is the word after "prsync" that picks the subcommand: report.
func subWord(app *kong.Application) string {
	_, w, _ := strings.Cut(app.Name, " ")
	return w
}

// subSynopsis is a subcommand's line of SYNOPSIS: prsync report [-o FILE] EVENTS.
func subSynopsis(app *kong.Application) string {
	s := `\fB` + literal(app.Name) + `\fR`
	for _, fl := range Flags(app) {
		if fl.Name == "help" {
			continue
		}
		s += " [" + flagTag(fl) + "]"
	}
	for _, pos := range app.Positional {
		s += ` \fI` + escape(pos.Name) + `\fR`
	}
	return s
}

// manSubcommand writes a subcommand's section: README's section of the same name (## prsync
// report) but its pictures, then its arguments and options.
func manSubcommand(p *page, app *kong.Application, readme string) error {
	lines, err := section(readme, app.Name)
	if err != nil {
		return err
	}
	p.macro("SH", strings.ToUpper(app.Name))
	lines = slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "![") }) // a picture: not for a terminal
	renderBlocks(p, parseBlocks(lines))
	for _, pos := range app.Positional {
		p.macro("TP")
		p.line(`\fI` + escape(pos.Name) + `\fR`)
		p.line(helpText(pos.Help))
	}
	for _, fl := range Flags(app) {
		p.macro("TP")
		p.line(flagTag(fl))
		p.line(helpText(fl.Help))
	}
	return nil
}

// bashSubcommands is the part of the bash completion that completes a subcommand's flags
// and files once its word is the first, and offers the words as a first argument.
func bashSubcommands(fn string) string {
	var b strings.Builder
	words := []string{"doctor"} // doctor takes the run's flags: the run's completion goes on for it
	for _, app := range Subcommands() {
		w := subWord(app)
		words = append(words, w)
		var all, file []string
		for _, fl := range Flags(app) {
			all = append(all, names(fl)...)
			if kind, _ := flagValue(fl); kind != noValue {
				file = append(file, names(fl)...)
			}
		}
		fmt.Fprintf(&b, "    if [[ ${words[1]-} == %s ]]; then\n", w)
		if len(file) > 0 {
			fmt.Fprintf(&b, "        case $prev in\n            %s)\n                %s__files\n                return\n                ;;\n        esac\n", strings.Join(file, " | "), fn)
		}
		fmt.Fprintf(&b, "        if [[ $cur == -* ]]; then\n            COMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n        else\n            %s__files\n        fi\n        return\n    fi\n", strings.Join(all, " "), fn)
	}
	fmt.Fprintf(&b, "    if ((cword == 1)) && [[ $split == false && $cur != -* ]]; then\n        # DEST, or a subcommand (not the value of a --flag=value, which bash-completion splits)\n        %s__files -d\n        COMPREPLY+=($(compgen -W '%s' -- \"$cur\"))\n        return\n    fi\n", fn, strings.Join(words, " "))
	return b.String()
}

// zshSubcommands is the part of the zsh completion that hands a subcommand's words to an
// _arguments of its own.
func zshSubcommands() string {
	var b strings.Builder
	for _, app := range Subcommands() {
		fmt.Fprintf(&b, "if (( CURRENT > 2 )) && [[ ${words[2]} == %s ]]; then\n  shift words\n  (( CURRENT-- ))\n  _arguments -s -S \\\n", subWord(app))
		for _, fl := range Flags(app) {
			kind, vals := flagValue(fl)
			spec := "'(" + strings.Join(names(fl), " ") + ")'"
			var spelled []string
			for _, n := range names(fl) {
				switch {
				case kind == noValue:
					spelled = append(spelled, n)
				case strings.HasPrefix(n, "--"):
					spelled = append(spelled, n+"=")
				default:
					spelled = append(spelled, n+"+")
				}
			}
			if len(spelled) == 1 {
				spec += spelled[0]
			} else {
				spec += "{" + strings.Join(spelled, ",") + "}"
			}
			spec += "'[" + zshQuote(zshBracket(summary(fl.Help))) + "]"
			if kind != noValue {
				spec += ":" + zshQuote(zshMessage(fl.FormatPlaceHolder())) + ":" + zshAction(kind, vals)
			}
			fmt.Fprintf(&b, "    %s' \\\n", spec)
		}
		for i, pos := range app.Positional {
			fmt.Fprintf(&b, "    '%d:%s:_files'", i+1, zshQuote(zshMessage(pos.Name)))
			if i < len(app.Positional)-1 {
				b.WriteString(" \\")
			}
			b.WriteString("\n")
		}
		b.WriteString("  return\nfi\n\n")
	}
	return b.String()
}

// fishSubcommands completes each subcommand's word first, and its flags after it.
func fishSubcommands(name string) string {
	var b strings.Builder
	for _, app := range Subcommands() {
		w := subWord(app)
		fmt.Fprintf(&b, "complete -c %s -n '__fish_use_subcommand' -a %s -d %s\n", name, w, fishQuote(summary(strings.SplitN(app.Help, "\n", 2)[0])))
		for _, fl := range Flags(app) {
			line := fmt.Sprintf("complete -c %s -n '__fish_seen_subcommand_from %s'", name, w)
			if fl.Short != 0 {
				line += " -s " + string(fl.Short)
			}
			line += " -l " + fl.Name
			if kind, _ := flagValue(fl); kind != noValue {
				line += " -r -F"
			}
			b.WriteString(line + " -d " + fishQuote(summary(fl.Help)) + "\n")
		}
	}
	return b.String()
}
