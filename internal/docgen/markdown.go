package docgen

import (
	"fmt"
	"regexp"
	"strings"
)

// The small part of Markdown README.md uses: paragraphs, tables, code blocks, bullet lists
// and headings, and inline code, bold, emphasis and links.

type blockKind int

const (
	para blockKind = iota
	table
	code
	item
	heading
)

// block is one block of Markdown: a paragraph's or an item's text (lines joined), a code
// block's lines, a table's rows (header first, the |---| row dropped) or a heading.
type block struct {
	kind  blockKind
	text  string
	lines []string
	rows  [][]string
}

// section returns the lines of the "## " section of md whose heading starts with title,
// without the heading.
func section(md, title string) ([]string, error) {
	lines := strings.Split(md, "\n")
	start := -1
	for i, l := range lines {
		if start < 0 {
			if strings.HasPrefix(l, "## ") && strings.HasPrefix(strings.TrimPrefix(l, "## "), title) {
				start = i + 1
			}
			continue
		}
		if strings.HasPrefix(l, "## ") || strings.HasPrefix(l, "# ") {
			return lines[start:i], nil
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("README.md has no section %q", "## "+title)
	}
	return lines[start:], nil
}

// title returns the text of md's first "# " heading.
func title(md string) (string, error) {
	for _, l := range strings.Split(md, "\n") {
		if t, ok := strings.CutPrefix(l, "# "); ok {
			return strings.TrimSpace(t), nil
		}
	}
	return "", fmt.Errorf("README.md has no title")
}

// intro returns the first paragraph after md's title.
func intro(md string) (string, error) {
	lines := strings.Split(md, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "# ") {
			for _, b := range parseBlocks(lines[i+1:]) {
				if b.kind == para {
					return b.text, nil
				}
			}
			break
		}
	}
	return "", fmt.Errorf("README.md has no paragraph after its title")
}

// parseBlocks splits lines into blocks.
func parseBlocks(lines []string) []block {
	var out []block
	for i := 0; i < len(lines); {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
			i++
		case strings.HasPrefix(l, "```"):
			b := block{kind: code}
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				b.lines = append(b.lines, lines[i])
			}
			i++
			out = append(out, b)
		case strings.HasPrefix(l, "    "):
			b := block{kind: code}
			for ; i < len(lines) && (strings.HasPrefix(lines[i], "    ") || strings.TrimSpace(lines[i]) == ""); i++ {
				b.lines = append(b.lines, strings.TrimPrefix(lines[i], "    "))
			}
			for len(b.lines) > 0 && strings.TrimSpace(b.lines[len(b.lines)-1]) == "" {
				b.lines = b.lines[:len(b.lines)-1]
			}
			out = append(out, b)
		case strings.HasPrefix(l, "|"):
			b := block{kind: table}
			for ; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
				if isRule(lines[i]) {
					continue
				}
				b.rows = append(b.rows, cells(lines[i]))
			}
			out = append(out, b)
		case strings.HasPrefix(l, "#"):
			out = append(out, block{kind: heading, text: strings.TrimSpace(strings.TrimLeft(l, "#"))})
			i++
		default:
			kind := para
			if strings.HasPrefix(l, "- ") || strings.HasPrefix(l, "* ") {
				kind, l = item, l[2:]
			}
			text := []string{strings.TrimSpace(l)}
			for i++; i < len(lines); i++ {
				n := lines[i]
				if strings.TrimSpace(n) == "" || strings.HasPrefix(n, "|") || strings.HasPrefix(n, "```") ||
					strings.HasPrefix(n, "#") || strings.HasPrefix(n, "- ") || strings.HasPrefix(n, "* ") {
					break
				}
				text = append(text, strings.TrimSpace(n))
			}
			out = append(out, block{kind: kind, text: strings.Join(text, " ")})
		}
	}
	return out
}

var ruleRE = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+\s*$`)

func isRule(l string) bool { return ruleRE.MatchString(l) }

// cells splits a table row at the pipes that are not escaped as \|.
func cells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(row, "|")
	if strings.HasSuffix(row, "|") && !strings.HasSuffix(row, `\|`) {
		row = row[:len(row)-1]
	}
	var out []string
	var cur strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			cur.WriteByte('|')
			i++
		case row[i] == '|':
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(row[i])
		}
	}
	return append(out, strings.TrimSpace(cur.String()))
}

// findTable returns the first table in blocks whose header is want.
func findTable(blocks []block, want ...string) ([][]string, error) {
	for _, b := range blocks {
		if b.kind != table || len(b.rows) == 0 || len(b.rows[0]) != len(want) {
			continue
		}
		ok := true
		for i, h := range want {
			ok = ok && strings.EqualFold(b.rows[0][i], h)
		}
		if ok {
			return b.rows[1:], nil
		}
	}
	return nil, fmt.Errorf("no table | %s |", strings.Join(want, " | "))
}

var (
	codeRE = regexp.MustCompile("`[^`]+`")
	linkRE = regexp.MustCompile(`\[([^\]]+)\]\([^)]*\)`)
	boldRE = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	emRE   = regexp.MustCompile(`(^|[\s(])\*([^*\s][^*]*)\*`)
)

// inline turns Markdown text into roff text: `code` and **bold** in bold, *emphasis* in
// italics, links as their text.
func inline(md string) string {
	var b strings.Builder
	for {
		loc := codeRE.FindStringIndex(md)
		if loc == nil {
			b.WriteString(prose(md))
			return b.String()
		}
		b.WriteString(prose(md[:loc[0]]))
		b.WriteString(`\fB` + literal(md[loc[0]+1:loc[1]-1]) + `\fR`)
		md = md[loc[1]:]
	}
}

// prose converts Markdown text without code spans.
func prose(s string) string {
	s = linkRE.ReplaceAllString(s, "$1")
	s = escape(s)
	s = boldRE.ReplaceAllString(s, `\fB$1\fR`)
	s = emRE.ReplaceAllString(s, `$1\fI$2\fR`)
	return s
}
