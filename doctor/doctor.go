// Package doctor checks a planned prsync run, read-only, and reports each finding with its fix.
package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Status is how a check came out.
type Status int

const (
	OK      Status = iota // nothing to do
	Warning               // the run works, but not as the user may expect
	Error                 // the run would fail, or copy wrongly
)

func (s Status) String() string {
	switch s {
	case OK:
		return "ok"
	case Warning:
		return "warning"
	}
	return "error"
}

// MarshalText writes the status as ok, warning or error.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Check is one finding: its name (stable, for scripts), its status, what was found, and
// the fix (empty when there is nothing to fix).
type Check struct {
	Name    string `json:"name"`
	Status  Status `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

func ok(name, format string, args ...any) Check {
	return Check{Name: name, Status: OK, Message: fmt.Sprintf(format, args...)}
}

func warn(name, fix, format string, args ...any) Check {
	return Check{Name: name, Status: Warning, Message: fmt.Sprintf(format, args...), Fix: fix}
}

func fail(name, fix, format string, args ...any) Check {
	return Check{Name: name, Status: Error, Message: fmt.Sprintf(format, args...), Fix: fix}
}

// Report is every check of one doctor, in the order they ran.
type Report struct {
	Checks []Check
}

// Add appends checks.
func (r *Report) Add(c ...Check) { r.Checks = append(r.Checks, c...) }

// Count returns how many checks have status s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == s {
			n++
		}
	}
	return n
}

// WriteText writes one line per check: the status padded to 7 columns, the name, what
// was found and, after "; fix: ", the fix. A line never holds a newline.
//
//	warning  source-hard-links: 2 of 3 paths sampled are hard links (nlink > 1) and -H is off: each link lands as a separate copy; fix: add -H after --
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%-7s  %s: %s", c.Status, c.Name, oneLine(c.Message))
		if c.Fix != "" {
			fmt.Fprintf(&b, "; fix: %s", oneLine(c.Fix))
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as one JSON object on one line: ok (no check is an error),
// the counts, and every check.
func (r *Report) WriteJSON(w io.Writer) error {
	checks := r.Checks
	if checks == nil {
		checks = []Check{}
	}
	return json.NewEncoder(w).Encode(struct {
		OK       bool    `json:"ok"`
		Errors   int     `json:"errors"`
		Warnings int     `json:"warnings"`
		Checks   []Check `json:"checks"`
	}{r.Count(Error) == 0, r.Count(Error), r.Count(Warning), checks})
}

func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }
