package htmlreport

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// node is an element of a parsed page.
type node struct {
	name     string
	attrs    map[string]string
	children []*node
	text     strings.Builder // the text of the element and its children
}

// parsePage parses a report as XML, strictly: the page is written to be well-formed, so
// that this check, with no HTML parser, catches an unclosed tag or a stray control
// character. It returns the root.
func parsePage(t *testing.T, page []byte) *node {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	root := &node{name: "#document"}
	stack := []*node{root}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			line := 0
			if l, _ := d.InputPos(); l > 0 {
				line = l
			}
			lines := strings.Split(string(page), "\n")
			t.Fatalf("the page is not well-formed: %v\nline %d: %s", err, line, lines[min(max(line-1, 0), len(lines)-1)])
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &node{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			top := stack[len(stack)-1]
			top.children = append(top.children, n)
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			for _, n := range stack {
				n.text.Write(tok)
			}
		}
	}
	if len(stack) != 1 {
		t.Fatalf("%d elements left open", len(stack)-1)
	}
	return root
}

// all returns the elements under n (n too) for which ok is true.
func (n *node) all(ok func(*node) bool) []*node {
	var out []*node
	if ok(n) {
		out = append(out, n)
	}
	for _, c := range n.children {
		out = append(out, c.all(ok)...)
	}
	return out
}

func (n *node) byName(name string) []*node {
	return n.all(func(c *node) bool { return c.name == name })
}

func (n *node) byID(id string) *node {
	if found := n.all(func(c *node) bool { return c.attrs["id"] == id }); len(found) == 1 {
		return found[0]
	}
	return nil
}

// js is s as a JSON string, as prsync writes it: a byte that is not UTF-8 becomes U+FFFD.
func js(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// render reads events and renders them, failing the test on an error.
func render(t *testing.T, events string) []byte {
	t.Helper()
	rep, err := Read(strings.NewReader(events))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(&b, rep, "events.jsonl"); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// hostile is a path with every trap: markup, quotes, a newline, a bidi override, a
// control character and a byte that is not UTF-8.
const hostile = "<script>alert(1)</script>\"'&amp;\n\u202e\x01\xff.txt"

// checkPage checks what every report must be: one self-contained, well-formed page with
// its sections and charts, fetching nothing and running nothing.
func checkPage(t *testing.T, page []byte) *node {
	t.Helper()
	root := parsePage(t, page)
	for _, id := range []string{"summary", "charts", "throttle", "failures", "limits", "chunks", "errors", "file",
		"rate-bytes", "rate-files", "rsyncs", "chunk-bytes", "chunk-files", "paused-by", "cpu"} {
		if root.byID(id) == nil {
			t.Errorf("no element with id %q", id)
		}
	}
	if n := len(root.byName("svg")); n != 7 {
		t.Errorf("%d charts, want 7", n)
	}
	for _, svg := range root.byName("svg") {
		if len(svg.byName("text")) < 4 || len(svg.byName("line")) < 3 {
			t.Errorf("chart %q has no axes", svg.attrs["aria-label"])
		}
	}
	for _, name := range []string{"script", "img", "link", "iframe", "object", "embed", "image", "use", "foreignObject", "a"} {
		if n := root.byName(name); len(n) > 0 {
			t.Errorf("the page has a <%s> element", name)
		}
	}
	for _, n := range root.all(func(*node) bool { return true }) {
		for k, v := range n.attrs {
			if strings.HasPrefix(strings.ToLower(k), "on") || k == "href" || k == "src" || k == "style" {
				t.Errorf("<%s> has the attribute %s=%q", n.name, k, v)
			}
		}
	}
	// nothing to fetch: no URL of any scheme, no CSS import or url()
	if m := regexp.MustCompile(`(?i)(https?:|ftp:|//[a-z0-9]|@import|url\()`).Find(page); m != nil {
		t.Errorf("the page refers to something outside it: %q", m)
	}
	return root
}

func TestRenderWhole(t *testing.T) {
	in := strings.Join([]string{evStart,
		ev(1, "progress", `"files_done":10,"bytes_done":1000000,"running":3,"suspended":1,"jobs":4`),
		ev(1.5, "chunk_start", `"chunk":1,"files":100,"bytes":5000000`),
		ev(2, "throttle", `"action":"suspend","reason":"cpu","pid":7,"chunk":1,"cpu_percent":95`),
		ev(3, "progress", `"files_done":30,"bytes_done":5000000,"running":2,"suspended":2,"jobs":4`),
		ev(4, "throttle", `"action":"resume","reason":"","pid":7`),
		ev(5, "path_failed", fmt.Sprintf(`"path":%s,"path_b64":"eA==","status":"failed","reason":%s`, js(hostile), js("rsync: "+hostile))),
		ev(5, "jobs", `"old":4,"new":2,"reason":"refused","detail":"<b>max connections</b>"`),
		ev(6, "error", `"error":"read input: </td></tr></table><script>x</script>"`),
		evSummary}, "\n") + "\n"
	page := render(t, in)
	root := checkPage(t, page)
	if b := root.all(func(n *node) bool { return strings.Contains(n.attrs["class"], "banner") }); len(b) != 0 {
		t.Errorf("a whole run has a banner: %q", b[0].text.String())
	}
	if o := root.byID("outcome"); o == nil || !strings.Contains(o.text.String(), "exit 23") {
		t.Errorf("outcome %v", o)
	}
	// the path as printable text: its base64 bytes ("x"); the reason with its markup as text
	fail := root.byID("failures").text.String()
	if !strings.Contains(fail, "rsync: <script>alert(1)</script>\"'&amp;\n\\u202e\\x01\ufffd.txt") {
		t.Errorf("the reason is not shown as text: %q", fail)
	}
	paths := root.byID("failures").all(func(n *node) bool { return n.attrs["class"] == "path" })
	if len(paths) != 1 || paths[0].text.String() != "x" {
		t.Errorf("paths %v", paths)
	}
	if !strings.Contains(root.byID("limits").text.String(), "<b>max connections</b>") {
		t.Errorf("the jobs detail is not shown as text")
	}
	if !strings.Contains(root.byID("errors").text.String(), "</td></tr></table><script>x</script>") {
		t.Errorf("the error is not shown as text")
	}
	for _, id := range []string{"rate-bytes", "rsyncs", "chunk-bytes", "paused-by"} {
		if len(root.byID(id).byName("path")) == 0 {
			t.Errorf("chart %s has no line", id)
		}
	}
}

func TestRenderHostilePath(t *testing.T) {
	in := evStart + "\n" + ev(1, "path_failed", fmt.Sprintf(`"path":%s,"status":"failed","reason":"x"`, js(hostile))) + "\n"
	root := checkPage(t, render(t, in))
	paths := root.byID("failures").all(func(n *node) bool { return n.attrs["class"] == "path" })
	want := "<script>alert(1)</script>\"'&amp;\\n\\u202e\\x01\ufffd.txt"
	if len(paths) != 1 || paths[0].text.String() != want {
		t.Errorf("path shown as %q, want %q", paths[0].text.String(), want)
	}
}

func TestRenderPartial(t *testing.T) {
	in := evStart + "\n" + ev(1, "progress", `"files_done":10,"bytes_done":100,"running":1,"jobs":4`) + "\nthis is not json\n" +
		ev(2, "progress", `"files_done":20`) + "\n" + `{"type":"progress","time":"2026-11-29T11:00:03Z","fi`
	root := checkPage(t, render(t, in))
	var banners []string
	for _, b := range root.all(func(n *node) bool { return strings.Contains(n.attrs["class"], "banner") }) {
		banners = append(banners, b.text.String())
	}
	all := strings.Join(banners, "\n")
	for _, want := range []string{"had not ended", "cut short", "1 line(s) of the file are not prsync events and were skipped (line 3)"} {
		if !strings.Contains(all, want) {
			t.Errorf("no banner says %q: %q", want, all)
		}
	}
	if o := root.byID("outcome"); o == nil || o.text.String() != "not ended" {
		t.Errorf("outcome %v", o)
	}
	if !strings.Contains(root.byID("summary").text.String(), "the last progress event") {
		t.Errorf("a partial run's summary is not the last progress")
	}
}

// TestRenderLong: a six-hour run with a progress event a second, a chunk every 5 s, and
// pauses, renders charts of at most maxBuckets points, in a page of bounded size.
func TestRenderLong(t *testing.T) {
	var b strings.Builder
	b.WriteString(evStart + "\n")
	const hours = 6
	for sec := 1; sec <= hours*3600; sec++ {
		t := fmt.Sprintf("2026-11-29T%02d:%02d:%02dZ", 11+sec/3600, sec/60%60, sec%60)
		fmt.Fprintf(&b, `{"type":"progress","time":%q,"files_done":%d,"bytes_done":%d,"running":4,"suspended":%d,"jobs":4}`+"\n", t, sec*10, sec*1000000, sec%3)
		if sec%5 == 0 {
			fmt.Fprintf(&b, `{"type":"chunk_start","time":%q,"chunk":%d,"files":50,"bytes":5000000,"pid":%d}`+"\n", t, sec/5, sec)
		}
		if sec%60 == 0 {
			fmt.Fprintf(&b, `{"type":"throttle","time":%q,"action":"suspend","reason":"load","pid":%d}`+"\n", t, sec)
		}
		if sec%60 == 30 {
			fmt.Fprintf(&b, `{"type":"throttle","time":%q,"action":"resume","reason":"","pid":%d}`+"\n", t, sec-30)
		}
	}
	page := render(t, b.String())
	root := checkPage(t, page)
	for _, p := range root.byName("path") {
		if p.attrs["fill"] != "none" {
			continue // a band: a line's least and most, there and back
		}
		if n := strings.Count(p.attrs["d"], "L"); n >= maxBuckets {
			t.Errorf("a line of %d points", n+1)
		}
	}
	if len(page) > 1<<20 {
		t.Errorf("page of %d bytes", len(page))
	}
	if !strings.Contains(root.byID("throttle").text.String(), "360 pauses, 3 h 00 min of rsync time paused") {
		t.Errorf("throttle: %q", root.byID("throttle").text.String())
	}
	// the time axis ends at six hours
	if !strings.Contains(root.byID("rate-bytes").text.String(), "6:00:00") {
		t.Errorf("no 6:00:00 tick")
	}
}

func TestCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "events.jsonl")
	os.WriteFile(good, []byte(evStart+"\n"+evSummary+"\n"), 0o644)
	partial := filepath.Join(dir, "partial.jsonl")
	os.WriteFile(partial, []byte(evStart+"\n{\"type\":\"prog"), 0o644)
	notEvents := filepath.Join(dir, "notes.txt")
	os.WriteFile(notEvents, []byte("dear diary\n"), 0o644)
	tests := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stderr string // a regexp
		out    string // the file the page goes to, "" for stdout
	}{
		{name: "to a file", args: []string{good, "-o", filepath.Join(dir, "r.html")}, out: filepath.Join(dir, "r.html")},
		{name: "to stdout", args: []string{good}},
		{name: "stdin", args: []string{"-", "-o", "-"}, stdin: evStart + "\n" + evSummary + "\n"},
		{name: "partial", args: []string{partial, "-o", filepath.Join(dir, "p.html")}, out: filepath.Join(dir, "p.html"),
			stderr: `^prsync: warning: .*partial.jsonl has no summary event: the run had not ended when it was written; the report says so\nprsync: warning: .*: the last line is cut short; the report leaves it out\n$`},
		{name: "no events argument", args: nil, code: 1, stderr: `^prsync: error: expected "<EVENTS>"`},
		{name: "unknown flag", args: []string{good, "--nope"}, code: 1, stderr: `^prsync: error: unknown flag --nope\nprsync: hint: see prsync report --help\n$`},
		{name: "missing file", args: []string{filepath.Join(dir, "nope.jsonl")}, code: 2, stderr: `^prsync: error: read events: .*nope.jsonl: no such file or directory\n$`},
		{name: "a directory", args: []string{dir}, code: 2, stderr: `^prsync: error: read events: .*: is a directory\n$`},
		{name: "not events", args: []string{notEvents}, code: 2, stderr: `^prsync: error: .*notes.txt holds no prsync events: none of its 1 lines is a prsync JSON event\nprsync: hint: `},
		{name: "empty stdin", args: []string{"-"}, code: 2, stderr: `^prsync: error: stdin holds no prsync events: it is empty\n`},
		{name: "unwritable", args: []string{good, "-o", filepath.Join(dir, "no", "such", "dir.html")}, code: 3, stderr: `^prsync: error: write report: .*dir.html: no such file or directory\n$`},
		{name: "onto the events", args: []string{good, "-o", good}, code: 1,
			stderr: `^prsync: error: -o .*events.jsonl is the events file \(EVENTS .*events.jsonl\): it would be overwritten\nprsync: hint: name another file for -o\n$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.code, stderr.String())
			}
			if !regexp.MustCompile(tt.stderr).MatchString(stderr.String()) || (tt.stderr == "" && stderr.Len() > 0) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.stderr)
			}
			if tt.code != 0 {
				if stdout.Len() > 0 {
					t.Errorf("stdout %q after an error", stdout.String())
				}
				return
			}
			page := stdout.Bytes()
			if tt.out != "" {
				if stdout.Len() > 0 {
					t.Errorf("stdout %q with -o", stdout.String())
				}
				var err error
				if page, err = os.ReadFile(tt.out); err != nil {
					t.Fatal(err)
				}
			}
			checkPage(t, page)
		})
	}
	// the events file is untouched by the refusal to write onto it
	if b, _ := os.ReadFile(good); !bytes.HasPrefix(b, []byte(evStart)) {
		t.Errorf("the events file was overwritten")
	}
}

// TestCommandClash: the page is never written over the events it reads, however the two
// names lead to one file: a symlink, a hard link, "..", stdin, or stdout that is the
// events file. Each is refused with exit 1 and one error naming both, and the events are
// left as they were.
func TestCommandClash(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	content := evStart + "\n" + evSummary + "\n"
	os.WriteFile(events, []byte(content), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink(events, filepath.Join(dir, "link.html"))
	os.Link(events, filepath.Join(dir, "hard.html"))
	open := func(flag int) *os.File {
		fh, err := os.OpenFile(events, flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fh.Close() })
		return fh
	}
	tests := []struct {
		name          string
		args          []string
		stdin, stdout bool // the events file is stdin, stdout
		want          string
	}{
		{name: "-o a symlink", args: []string{events, "-o", filepath.Join(dir, "link.html")},
			want: `-o .*/link.html is the events file \(EVENTS .*/events.jsonl\)`},
		{name: "-o a hard link", args: []string{events, "-o", filepath.Join(dir, "hard.html")},
			want: `-o .*/hard.html is the events file \(EVENTS .*/events.jsonl\)`},
		{name: "-o through ..", args: []string{events, "-o", filepath.Join(dir, "sub") + "/../events.jsonl"},
			want: `-o .*/sub/\.\./events.jsonl is the events file \(EVENTS .*/events.jsonl\)`},
		{name: "EVENTS a symlink", args: []string{filepath.Join(dir, "link.html"), "-o", events},
			want: `-o .*/events.jsonl is the events file \(EVENTS .*/link.html\)`},
		{name: "stdin", args: []string{"-", "-o", filepath.Join(dir, "hard.html")}, stdin: true,
			want: `-o .*/hard.html is the events file \(stdin\)`},
		{name: "stdout", args: []string{filepath.Join(dir, "hard.html")}, stdout: true,
			want: `stdout is the events file \(EVENTS .*/hard.html\)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdin io.Reader = strings.NewReader("")
			var stdout io.Writer = new(bytes.Buffer)
			if tt.stdin {
				stdin = open(os.O_RDONLY)
			}
			if tt.stdout {
				stdout = open(os.O_WRONLY | os.O_APPEND)
			}
			var stderr bytes.Buffer
			if code := Main(tt.args, stdin, stdout, &stderr); code != 1 {
				t.Errorf("exit %d, want 1; stderr %q", code, stderr.String())
			}
			re := `^prsync: error: ` + tt.want + `: it would be overwritten\nprsync: hint: [^\n]+\n$`
			if !regexp.MustCompile(re).MatchString(stderr.String()) {
				t.Errorf("stderr %q, want %q", stderr.String(), re)
			}
			if b, _ := os.ReadFile(events); string(b) != content {
				t.Errorf("the events file is now %q", b)
			}
		})
	}
	// a device loses nothing: the page goes to /dev/null
	var stderr bytes.Buffer
	if code := Main([]string{events, "-o", os.DevNull}, nil, nil, &stderr); code != 0 {
		t.Errorf("-o /dev/null: exit %d, stderr %q", code, stderr.String())
	}
}

// A line breaks where samples are missing, instead of joining across the gap: progress
// each second from 1 s to 10 s, none until 40 s, then each second again.
func TestRenderGap(t *testing.T) {
	evs := []string{evStart}
	for _, sec := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 40, 41, 42, 43, 44, 45} {
		evs = append(evs, ev(float64(sec), "progress", fmt.Sprintf(`"files_done":%d,"bytes_done":%d,"running":2,"suspended":0,"jobs":4`, sec*10, sec*1000)))
	}
	root := checkPage(t, render(t, lines(evs...)))
	for _, id := range []string{"rate-bytes", "rate-files", "rsyncs"} {
		fig := root.byID(id)
		if fig == nil {
			t.Fatalf("no chart %s", id)
		}
		for _, p := range fig.byName("path") {
			if p.attrs["fill"] != "none" {
				continue
			}
			if n := strings.Count(p.attrs["d"], "M"); n != 2 {
				t.Errorf("%s: a line in %d pieces, want 2 (broken at the gap): %s", id, n, p.attrs["d"])
			}
		}
	}
}

func TestSegments(t *testing.T) {
	pts := func(ts ...float64) []point {
		var out []point
		for _, t := range ts {
			out = append(out, point{t: t})
		}
		return out
	}
	lens := func(segs [][]point) []int {
		var out []int
		for _, s := range segs {
			out = append(out, len(s))
		}
		return out
	}
	tests := []struct {
		name string
		in   []point
		want []int
	}{
		{"none", nil, nil},
		{"one", pts(1), []int{1}},
		{"steady", pts(1, 2, 3, 4, 5), []int{5}},
		{"jitter", pts(1, 2.2, 2.9, 4.5, 5), []int{5}},
		{"a gap", pts(1, 2, 3, 10, 11, 12), []int{3, 3}},
		{"a lone sample between gaps", pts(1, 2, 3, 20, 40, 41, 42), []int{3, 1, 3}},
	}
	for _, tt := range tests {
		if got := lens(segments(tt.in)); !slices.Equal(got, tt.want) {
			t.Errorf("%s: segments of %d, want %d", tt.name, got, tt.want)
		}
	}
}

// Counts agree with their nouns: "1 reason", not "1 reasons".
func TestRenderPlurals(t *testing.T) {
	one := lines(evStart,
		ev(1, "throttle", `"action":"suspend","reason":"load","pid":7`),
		ev(2, "throttle", `"action":"resume","reason":"","pid":7`),
		ev(3, "path_failed", `"path":"a","status":"failed","reason":"rsync: gone"`),
		evSummary)
	text := checkPage(t, render(t, one)).text.String()
	for _, want := range []string{"1 path failed, vanished or was not done, for 1 reason.", "1 pause, 1 s of rsync time paused in all."} {
		if !strings.Contains(text, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(text, "1 reasons") || strings.Contains(text, "1 pauses") || strings.Contains(text, "1 paths") {
		t.Errorf("a plural after 1")
	}
	two := lines(evStart,
		ev(3, "path_failed", `"path":"a","status":"failed","reason":"rsync: gone"`),
		ev(4, "path_failed", `"path":"b","status":"failed","reason":"rsync: denied"`),
		evSummary)
	if text := checkPage(t, render(t, two)).text.String(); !strings.Contains(text, "2 paths failed, vanished or were not done, for 2 reasons.") {
		t.Errorf("two failures: %q", text)
	}
}

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
