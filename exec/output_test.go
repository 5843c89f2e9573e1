package exec

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestUnescape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{`new\#012line`, "new\nline"},
		{`bad\#377utf8`, "bad\xffutf8"},
		{`cr\#015`, "cr\r"},
		{`lit\#134#012`, `lit\#012`},
		{`back\slash`, `back\slash`},
		{`\#`, `\#`},
		{`\#01`, `\#01`},
		{`\#999`, `\#999`},
		{`\#400`, `\#400`},
		{`a\#012\#012b`, "a\n\nb"},
	}
	for _, tt := range tests {
		if got := string(Unescape([]byte(tt.in))); got != tt.want {
			t.Errorf("Unescape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseItem(t *testing.T) {
	tests := []struct {
		line string
		ok   bool
		file bool
		size int64
		name string
	}{
		{">f+++++++++|3000|3043|ks/t1/a.db", true, true, 3000, "ks/t1/a.db"},
		{"<f..t......|59|59|x", true, true, 59, "x"},
		{"cd+++++++++|4096|0|ks/", true, false, 4096, "ks"},
		{"cL+++++++++|8|0|link", true, false, 8, "link"},
		{">f+++++++++|3|46|a/new\\#012line", true, true, 3, "a/new\nline"},
		{">f+++++++++|3|46|pipe|in|name", true, true, 3, "pipe|in|name"},
		{"created directory dst", false, false, 0, ""},
		{"sent 137 bytes  received 66 bytes  406.00 bytes/sec", false, false, 0, ""},
		{">f+++|3|46|short", false, false, 0, ""},
		{">f+++++++++|x|46|a", false, false, 0, ""},
	}
	for _, tt := range tests {
		it, ok := ParseItem([]byte(tt.line))
		if ok != tt.ok {
			t.Errorf("ParseItem(%q) ok = %v", tt.line, ok)
			continue
		}
		if !ok {
			continue
		}
		if it.IsFile() != tt.file || it.Size != tt.size || string(it.Name) != tt.name {
			t.Errorf("ParseItem(%q) = %+v (file %v)", tt.line, it, it.IsFile())
		}
	}
}

func TestParseProblem(t *testing.T) {
	tests := []struct {
		line              string
		ok                bool
		name              string
		vanished, noSpace bool
	}{
		{`rsync: [sender] link_stat "/src/x" failed: No such file or directory (2)`, true, "/src/x", true, false},
		{`file has vanished: "/src/a\#012b"`, true, "/src/a\nb", true, false},
		{`rsync: [sender] send_files failed to open "/src/locked": Permission denied (13)`, true, "/src/locked", false, false},
		{`rsync: [receiver] write failed on "/dst/ten": No space left on device (28)`, true, "/dst/ten", false, true},
		{`rsync: [sender] link_stat "/src/q"uote" failed: Permission denied (13)`, true, `/src/q"uote`, false, false},
		{`rsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1394) [sender=3.5.0]`, false, "", false, false},
	}
	for _, tt := range tests {
		p, ok := ParseProblem([]byte(tt.line))
		if ok != tt.ok || string(p.Name) != tt.name || p.Vanished != tt.vanished || p.NoSpace != tt.noSpace {
			t.Errorf("ParseProblem(%q) = %+v, %v", tt.line, p, ok)
		}
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		code               int
		cancelled, noSpace bool
		want               Class
	}{
		{0, false, false, OK},
		{23, false, false, Partial},
		{24, false, false, Partial},
		{20, true, false, Cancelled},
		{-1, true, false, Cancelled},
		{20, false, false, Transient},
		{-1, false, false, Transient},
		{10, false, false, Transient},
		{12, false, false, Transient},
		{30, false, false, Transient},
		{35, false, false, Transient},
		{255, false, false, Transient},
		{1, false, false, Fatal},
		{3, false, false, Fatal},
		{5, false, false, Fatal},
		{11, false, true, Fatal},
		{23, false, true, Fatal},
		{11, false, false, ChunkFailed},
		{2, false, false, ChunkFailed},
		{14, false, false, ChunkFailed},
	}
	for _, tt := range tests {
		if got := Classify(tt.code, tt.cancelled, tt.noSpace); got != tt.want {
			t.Errorf("Classify(%d, %v, %v) = %v, want %v", tt.code, tt.cancelled, tt.noSpace, got, tt.want)
		}
	}
}

func TestEntryReader(t *testing.T) {
	for _, size := range []int{1, 2, 3, 7, 4096} {
		r := &entryReader{entries: [][]byte{[]byte("/a/./b"), []byte(""), []byte("/c\nd")}}
		var got bytes.Buffer
		buf := make([]byte, size)
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if err == io.EOF {
				break
			}
		}
		if got.String() != "/a/./b\x00\x00/c\nd\x00" {
			t.Errorf("size %d: %q", size, got.String())
		}
	}
}

func TestLineWriter(t *testing.T) {
	var lines []string
	w := &lineWriter{fn: func(l []byte) { lines = append(lines, string(l)) }}
	for _, part := range []string{"ab", "c\nde", "f\r\n", "\nlast"} {
		w.Write([]byte(part))
	}
	w.flush()
	if got := strings.Join(lines, "|"); got != "abc|def|last" {
		t.Errorf("lines %q", got)
	}
}

func TestIsRemote(t *testing.T) {
	tests := map[string]bool{
		"dst/": false, "/mnt/backup": false, "./host:file": false, "a/b:c": false,
		"host:path": true, "user@host:/p": true, "host::mod/p": true, "rsync://h/m/p": true,
	}
	for d, want := range tests {
		if got := IsRemote(d); got != want {
			t.Errorf("IsRemote(%q) = %v", d, got)
		}
	}
}

// FuzzParse: the out-format and stderr decoders never panic, and escaping round-trips.
func FuzzParse(f *testing.F) {
	f.Add([]byte(">f+++++++++|3000|3043|ks/t1/a\\#012.db"))
	f.Add([]byte(`rsync: [sender] link_stat "/src/x" failed: No such file or directory (2)`))
	f.Add([]byte(`\#\#1\#777\#0`))
	f.Fuzz(func(t *testing.T, line []byte) {
		ParseItem(line)
		ParseProblem(line)
		// rsync's escaping: \ before # becomes \#134, control and high bytes \#ooo
		var esc []byte
		for i, c := range line {
			switch {
			case c == '\\' && i+1 < len(line) && line[i+1] == '#':
				esc = append(esc, `\#134`...)
			case c < 32 || c >= 127:
				esc = append(esc, '\\', '#', '0'+c>>6, '0'+(c>>3)&7, '0'+c&7)
			default:
				esc = append(esc, c)
			}
		}
		if got := Unescape(esc); !bytes.Equal(got, line) {
			t.Fatalf("Unescape(escape(%q)) = %q", line, got)
		}
	})
}

func TestTempOf(t *testing.T) {
	tests := map[string]string{
		".big2.YeplO7": "big2", ".a.b.c.XyZ123": "a.b.c", ".big2.Ye": "", "big2.YeplO7": "",
		".hidden": "", ".x.abcdefg": "", ". lead.abcdef": " lead",
	}
	for tmp, want := range tests {
		got, ok := tempOf(tmp)
		if ok != (want != "") || got != want {
			t.Errorf("tempOf(%q) = %q, %v", tmp, got, ok)
		}
	}
}
