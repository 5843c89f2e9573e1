package docgen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/prsync/prsync/control"
	"github.com/prsync/prsync/htmlreport"
)

// Subcommands returns the kong models of the commands of their own under prsync that the
// documents describe beside the run (prsync ctl, prsync report), each named "prsync WORD".
func Subcommands() []*kong.Application {
	var apps []*kong.Application
	for _, parser := range []func() (*kong.Kong, error){control.Parser, htmlreport.Parser} {
		p, err := parser()
		if err != nil {
			panic(err) // a static model: a test catches it
		}
		apps = append(apps, p.Model)
	}
	return apps
}

// readmeSections names README's section of a subcommand, when it is not the command's name:
// the man page's section of the subcommand has its title.
var readmeSections = map[string]string{"prsync ctl": "Live control"}

// readmeSection is the title of README's section of a subcommand (## Live control, ## prsync
// report), and so of its man page's section.
func readmeSection(app *kong.Application) string {
	if s, ok := readmeSections[app.Name]; ok {
		return s
	}
	return app.Name
}

// subWord is the word after "prsync" that picks the subcommand: ctl, report.
func subWord(app *kong.Application) string {
	_, w, _ := strings.Cut(app.Name, " ")
	return w
}

// commands returns a subcommand's own commands (prsync ctl's status, jobs, ...), in order.
func commands(app *kong.Application) []*kong.Node {
	var out []*kong.Node
	for _, c := range app.Children {
		if c.Type == kong.CommandNode && !c.Hidden {
			out = append(out, c)
		}
	}
	return out
}

// commandTag is a command with its arguments in roff: jobs N.
func commandTag(c *kong.Node) string {
	s := `\fB` + literal(c.Name) + `\fR`
	for _, pos := range c.Positional {
		s += ` \fI` + escape(pos.Name) + `\fR`
	}
	return s
}

// subSynopsis is a subcommand's line of SYNOPSIS: prsync report [-o FILE] EVENTS, or prsync
// ctl [flags] status | jobs N | ....
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
	var cmds []string
	for _, c := range commands(app) {
		cmds = append(cmds, commandTag(c))
	}
	if len(cmds) > 0 {
		s += " " + strings.Join(cmds, " | ")
	}
	return s
}

// manSubcommand writes a subcommand's section: README's section of its title (## prsync
// report, ## Live control) but its pictures, then its arguments, its commands and its
// options.
func manSubcommand(p *page, app *kong.Application, readme string) error {
	title := readmeSection(app)
	lines, err := section(readme, title)
	if err != nil {
		return err
	}
	p.macro("SH", strings.ToUpper(title))
	lines = slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "![") }) // a picture: not for a terminal
	renderBlocks(p, parseBlocks(lines))
	for _, pos := range app.Positional {
		p.macro("TP")
		p.line(`\fI` + escape(pos.Name) + `\fR`)
		p.line(helpText(pos.Help))
	}
	for _, c := range commands(app) {
		p.macro("TP")
		p.line(`\fB` + literal(app.Name) + `\fR ` + commandTag(c))
		p.line(helpText(c.Help))
	}
	for _, fl := range Flags(app) {
		p.macro("TP")
		p.line(flagTag(fl))
		p.line(helpText(fl.Help))
	}
	return nil
}

// commandWords returns the words of a subcommand's commands, and those each command's
// first argument completes to (bwlimit: off).
func commandWords(app *kong.Application) (words []string, args map[string][]string) {
	args = map[string][]string{}
	for _, c := range commands(app) {
		words = append(words, c.Name)
		if len(c.Positional) > 0 {
			if kind, vals := valueOf(c.Positional[0], c.Positional[0].Name); kind == wordValue {
				args[c.Name] = vals
			}
		}
	}
	return words, args
}

// bashSubcommands is the part of the bash completion that completes a subcommand's flags
// and files, or its commands, once its word is the first, and offers the words as a first
// argument.
func bashSubcommands(fn string) string {
	var b strings.Builder
	words := []string{"doctor"} // doctor takes the run's flags: the run's completion goes on for it
	for _, app := range Subcommands() {
		w := subWord(app)
		words = append(words, w)
		var all, file, valued []string
		for _, fl := range Flags(app) {
			all = append(all, names(fl)...)
			switch kind, _ := flagValue(fl); kind {
			case noValue:
			case fileValue, dirValue:
				file = append(file, names(fl)...)
				valued = append(valued, names(fl)...)
			default:
				valued = append(valued, names(fl)...)
			}
		}
		fmt.Fprintf(&b, "    if [[ ${words[1]-} == %s ]]; then\n", w)
		if len(valued) > 0 {
			b.WriteString("        case $prev in\n")
			if len(file) > 0 {
				fmt.Fprintf(&b, "            %s)\n                %s__files\n                return\n                ;;\n", strings.Join(file, " | "), fn)
			}
			if other := slices.DeleteFunc(slices.Clone(valued), func(n string) bool { return slices.Contains(file, n) }); len(other) > 0 {
				fmt.Fprintf(&b, "            %s)\n                return\n                ;;\n", strings.Join(other, " | "))
			}
			b.WriteString("        esac\n")
		}
		fmt.Fprintf(&b, "        if [[ $cur == -* ]]; then\n            COMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n", strings.Join(all, " "))
		if cmds, args := commandWords(app); len(cmds) > 0 {
			// the command: the first word after the subcommand that is neither a flag nor a
			// flag's value (without bash-completion, --pid=1 comes as --pid, =, 1)
			fmt.Fprintf(&b, "            return\n        fi\n        local j cmd=\n        for ((j = 2; j < cword; j++)); do\n            case ${words[j]} in\n")
			if len(valued) > 0 {
				fmt.Fprintf(&b, "                %s)\n                    [[ ${words[j + 1]-} == = ]] && ((j++))\n                    ((j++))\n                    ;;\n", strings.Join(valued, " | "))
			}
			b.WriteString("                -*) ;;\n                *)\n                    cmd=${words[j]}\n                    break\n                    ;;\n            esac\n        done\n")
			fmt.Fprintf(&b, "        case $cmd in\n            '')\n                COMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n                ;;\n", strings.Join(cmds, " "))
			for _, c := range cmds {
				if vals := args[c]; len(vals) > 0 {
					fmt.Fprintf(&b, "            %s)\n                ((j == cword - 1)) && COMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n                ;;\n", c, strings.Join(vals, " "))
				}
			}
			b.WriteString("        esac\n        return\n    fi\n")
			continue
		}
		fmt.Fprintf(&b, "        else\n            %s__files\n        fi\n        return\n    fi\n", fn)
	}
	fmt.Fprintf(&b, "    if ((cword == 1)) && [[ $split == false && $cur != -* ]]; then\n        # DEST, or a subcommand (not the value of a --flag=value, which bash-completion splits)\n        %s__files -d\n        COMPREPLY+=($(compgen -W '%s' -- \"$cur\"))\n        return\n    fi\n", fn, strings.Join(words, " "))
	return b.String()
}

// zshSpecs returns the _arguments specs of a subcommand's flags.
func zshSpecs(app *kong.Application) []string {
	var specs []string
	for _, fl := range Flags(app) {
		kind, vals := flagValue(fl)
		excl := names(fl)
		for _, g := range fl.Xor { // --pid and --socket exclude each other
			for _, other := range Flags(app) {
				if other != fl && slices.Contains(other.Xor, g) {
					excl = append(excl, names(other)...)
				}
			}
		}
		spec := "'(" + strings.Join(excl, " ") + ")'"
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
		specs = append(specs, spec+"'")
	}
	return specs
}

// zshSubcommands is the part of the zsh completion that hands a subcommand's words to an
// _arguments of its own.
func zshSubcommands() string {
	var b strings.Builder
	for _, app := range Subcommands() {
		fmt.Fprintf(&b, "if (( CURRENT > 2 )) && [[ ${words[2]} == %s ]]; then\n  shift words\n  (( CURRENT-- ))\n", subWord(app))
		specs := zshSpecs(app)
		if cmds := commands(app); len(cmds) > 0 {
			// the command first, then its argument: the words of one (bwlimit off), or none
			var items []string
			for _, c := range cmds {
				items = append(items, c.Name+`\:"`+zshQuote(zshMessage(strings.ReplaceAll(summary(c.Help), `"`, "")))+`"`)
			}
			specs = append(specs, `'1:command:((`+strings.Join(items, " ")+`))'`, `'*:: :->args'`)
			b.WriteString("  local context state state_descr line\n  typeset -A opt_args\n  _arguments -s -S \\\n")
			for i, s := range specs {
				b.WriteString("    " + s)
				if i < len(specs)-1 {
					b.WriteString(" \\")
				}
				b.WriteString("\n")
			}
			_, args := commandWords(app)
			b.WriteString("  if [[ $state == args ]] && (( CURRENT == 2 )); then\n    case ${line[1]} in\n")
			for _, c := range cmds {
				if vals := args[c.Name]; len(vals) > 0 {
					fmt.Fprintf(&b, "      %s) compadd -- %s ;;\n", c.Name, strings.Join(vals, " "))
				}
			}
			b.WriteString("    esac\n  fi\n  return\nfi\n\n")
			continue
		}
		for i, pos := range app.Positional {
			specs = append(specs, fmt.Sprintf("'%d:%s:_files'", i+1, zshQuote(zshMessage(pos.Name))))
		}
		b.WriteString("  _arguments -s -S \\\n")
		for i, s := range specs {
			b.WriteString("    " + s)
			if i < len(specs)-1 {
				b.WriteString(" \\")
			}
			b.WriteString("\n")
		}
		b.WriteString("  return\nfi\n\n")
	}
	return b.String()
}

// fishSubcommands completes each subcommand's word first, and its flags (and commands)
// after it.
func fishSubcommands(name string) string {
	var b strings.Builder
	for _, app := range Subcommands() {
		w := subWord(app)
		seen := "__fish_seen_subcommand_from " + w
		fmt.Fprintf(&b, "complete -c %s -n '__fish_use_subcommand' -a %s -d %s\n", name, w, fishQuote(summary(strings.SplitN(app.Help, "\n", 2)[0])))
		for _, fl := range Flags(app) {
			line := fmt.Sprintf("complete -c %s -n '%s'", name, seen)
			if fl.Short != 0 {
				line += " -s " + string(fl.Short)
			}
			line += " -l " + fl.Name
			switch kind, _ := flagValue(fl); kind {
			case noValue:
			case fileValue, dirValue:
				line += " -r -F"
			default:
				line += " -x"
			}
			b.WriteString(line + " -d " + fishQuote(summary(fl.Help)) + "\n")
		}
		cmds, args := commandWords(app)
		if len(cmds) == 0 {
			continue
		}
		none := seen + "; and not __fish_seen_subcommand_from " + strings.Join(cmds, " ")
		for _, c := range commands(app) {
			fmt.Fprintf(&b, "complete -c %s -n '%s' -x -a %s -d %s\n", name, none, c.Name, fishQuote(summary(c.Help)))
		}
		for _, c := range cmds {
			// no files after a command: the words of its argument, or nothing
			line := fmt.Sprintf("complete -c %s -n '%s; and __fish_seen_subcommand_from %s' -x", name, seen, c)
			if vals := args[c]; len(vals) > 0 {
				line += " -a " + fishQuote(strings.Join(vals, " "))
			}
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
