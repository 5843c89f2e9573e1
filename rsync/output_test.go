package rsync

import (
	"bytes"
	"path"
	"strconv"
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
		line  string
		ok    bool
		file  bool
		size  int64
		name  string
		mtime string
	}{
		{">f+++++++++|3000|2024/05/06-07:08:09|3043|ks/t1/a.db", true, true, 3000, "ks/t1/a.db", "2024/05/06-07:08:09"},
		{">f.st......|12|2024/05/06-07:08:09|0|1|2|3", true, true, 12, "1|2|3", "2024/05/06-07:08:09"},
		{"cL+++++++++|8|(time-out-of-range)|0|link", true, false, 8, "link", "(time-out-of-range)"},
		{">f+++++++++|3|2024/05/06-07:08:09|x|n", false, false, 0, "", ""},
		// the earlier format, without %M
		{">f+++++++++|3000|3043|ks/t1/a.db", true, true, 3000, "ks/t1/a.db", ""},
		{"<f..t......|59|59|x", true, true, 59, "x", ""},
		{"cd+++++++++|4096|0|ks/", true, false, 4096, "ks", ""},
		{"cL+++++++++|8|0|link", true, false, 8, "link", ""},
		{">f+++++++++|3|46|a/new\\#012line", true, true, 3, "a/new\nline", ""},
		{">f+++++++++|3|46|pipe|in|name", true, true, 3, "pipe|in|name", ""},
		{"created directory dst", false, false, 0, "", ""},
		{"sent 137 bytes  received 66 bytes  406.00 bytes/sec", false, false, 0, "", ""},
		{">f+++|3|46|short", false, false, 0, "", ""},
		{">f+++++++++|x|46|a", false, false, 0, "", ""},
		{"*deleting  |0|0|gone/dir/", true, false, 0, "gone/dir", ""},
		{"*deleting  |0|0|-lead\\#012nl", true, false, 0, "-lead\nnl", ""},
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
		if it.IsFile() != tt.file || it.Size != tt.size || string(it.Name) != tt.name || it.MTime != tt.mtime {
			t.Errorf("ParseItem(%q) = %+v (file %v)", tt.line, it, it.IsFile())
		}
		if dir := tt.line[len(tt.line)-1] == '/'; it.Dir != dir {
			t.Errorf("ParseItem(%q).Dir = %v", tt.line, it.Dir)
		}
		if del := tt.line[0] == '*'; it.IsDeletion() != del {
			t.Errorf("ParseItem(%q).IsDeletion() = %v", tt.line, it.IsDeletion())
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
		ParseMessage(line)
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
		got, ok := TempOf(tmp)
		if ok != (want != "") || got != want {
			t.Errorf("TempOf(%q) = %q, %v", tmp, got, ok)
		}
	}
}

// TestProtectTemp: the deletion pass's filter rule protects every name TempOf takes for a
// temp file (rsync's wildcards, as path.Match reads them: neither * nor ? matches a slash).
func TestProtectTemp(t *testing.T) {
	pattern := strings.TrimPrefix(ProtectTemp, "--filter=P ")
	for _, name := range []string{".big2.YeplO7", ".a.b.c.XyZ123", ". lead.abcdef", ".x.abcdef", ".big2.Ye", "big2.YeplO7", ".hidden", "plain"} {
		_, temp := TempOf(name)
		if matched, _ := path.Match(pattern, name); temp && !matched {
			t.Errorf("%q is a temp file (TempOf), but %q does not protect it", name, ProtectTemp)
		}
	}
}

func TestItemType(t *testing.T) {
	for change, want := range map[string]string{
		">f+++++++++": "file", "cd+++++++++": "dir", "cL+++++++++": "link", "cD+++++++++": "special",
		"cS+++++++++": "special", ".f..t......": "file", "*deleting  ": "", "": "", ">": "",
	} {
		if got := (Item{Change: change}).Type(); got != want {
			t.Errorf("Item{Change: %q}.Type() = %q, want %q", change, got, want)
		}
	}
	// every entry the real rsync itemized in the recorded runs has a type
	cases := recorded(t)
	n := 0
	for _, c := range cases {
		for _, l := range c.StdoutLines() {
			if it, ok := ParseItem([]byte(l)); ok && !it.IsDeletion() {
				n++
				if it.Type() == "" {
					t.Errorf("%s: %q names no type", c.Name, l)
				}
			}
		}
	}
	if n < 100 {
		t.Errorf("%d itemized lines in the recorded runs; they hold hundreds", n)
	}
}

func TestLandsAt(t *testing.T) {
	for e, want := range map[string]string{"a/b": "a/b", "./#h": "#h", "work/./a/b": "a/b", ".": ".", "x//y/": "x/y",
		".hidden/x": ".hidden/x", "a/..b": "a/..b", "a/../b": "b", "..": "..", "a/.": "a", "...": "..."} {
		if got := LandsAt([]byte(e)); got != want {
			t.Errorf("LandsAt(%q) = %q, want %q", e, got, want)
		}
	}
}

// TestLandsAtAll checks that landsAt, which shares one string among a chunk's entries,
// gives what LandsAt gives each, with clean and unclean entries mixed.
func TestLandsAtAll(t *testing.T) {
	in := []string{"a/b", "./#h", "work/./a/b", ".", "x//y/", ".hidden/x", "a/..b", "a/../b", "..",
		"a/.", "...", "c", "dir/sub/file name", "a/b", "é/ü"}
	entries := make([][]byte, len(in))
	for i, e := range in {
		entries[i] = []byte(e)
	}
	got := make([]string, len(in))
	landsAt(entries, got)
	for i, e := range in {
		if want := LandsAt([]byte(e)); got[i] != want {
			t.Errorf("landsAt: entry %d %q lands at %q, want %q", i, e, got[i], want)
		}
	}
}

// parseItemReference is the first, plain form of ParseItem, which the fast one must match.
func parseItemReference(line []byte) (it Item, ok bool) {
	f := bytes.SplitN(line, []byte{'|'}, 4)
	if len(f) != 4 || len(f[0]) != 11 || bytes.IndexByte([]byte("<>ch.*"), f[0][0]) < 0 {
		return Item{}, false
	}
	size, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return Item{}, false
	}
	mtime := ""
	if _, err := strconv.ParseInt(string(f[2]), 10, 64); err != nil {
		// not the earlier format's %b: %M, then %b
		g := bytes.SplitN(f[3], []byte{'|'}, 2)
		if len(f[2]) == 0 || len(g) != 2 {
			return Item{}, false
		}
		if _, err := strconv.ParseInt(string(g[0]), 10, 64); err != nil {
			return Item{}, false
		}
		mtime, f[3] = string(f[2]), g[1]
	}
	name := Unescape(f[3])
	dir := false
	if len(name) > 1 && name[len(name)-1] == '/' {
		name, dir = name[:len(name)-1], true
	}
	return Item{Change: string(f[0]), Size: size, MTime: mtime, Name: name, Dir: dir}, true
}

// FuzzParseItem: ParseItem agrees with its reference form on every line.
func FuzzParseItem(f *testing.F) {
	for _, l := range []string{
		">f+++++++++|3000|3043|ks/t1/a\\#012.db", "cd+++++++++|0|0|d/", "*deleting  |0|0|x|y",
		">f.st......|-1|+2|n", ">f+++++++++||0|n", ">f+++++++++|99999999999999999999|0|n",
		">f+++++++++|9223372036854775807|0|n", ">f+++++++++|1|2|", "xf+++++++++|1|2|n", "created directory d",
		">f+++++++++|3|2024/05/06-07:08:09|46|a|b", ">f+++++++++|3|(time-out-of-range)|0|n", ">f+++++++++|3|x||n",
		">f+++++++++|3|x|y|n", ">f+++++++++|3||9|n",
	} {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, gok := ParseItem(line)
		want, wok := parseItemReference(line)
		if gok != wok || got.Change != want.Change || got.Size != want.Size || got.MTime != want.MTime || !bytes.Equal(got.Name, want.Name) || got.Dir != want.Dir {
			t.Fatalf("ParseItem(%q) = %+v %v, reference %+v %v", line, got, gok, want, wok)
		}
	})
}

func BenchmarkParseItem(b *testing.B) {
	line := []byte(">f+++++++++|21874|21874|d12/d7/file-003412.dat")
	for b.Loop() {
		ParseItem(line)
	}
}
