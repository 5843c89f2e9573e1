package rsync

import (
	"strings"
	"testing"
)

// TestSettle drives the whole language with hand-written rsync output: (stdout, stderr,
// exit code, the chunk's entries, what DEST holds) -> each path's outcome. The recorded
// runs of the real rsync are in TestCorpus.
func TestSettle(t *testing.T) {
	tests := []struct {
		name        string
		src, dest   string
		local       string // local DEST
		entries     []string
		stdout      []string
		stderr      []string
		code        int
		cancelled   bool
		leftOut     bool            // rsync ran with a SkipOption and -ii
		landed      map[string]bool // what confirming finds; absent: not landed
		gone        map[string]bool // confirming finds it gone from the source and DEST
		notReason   string          // no failed path's reason may hold this
		want        []string        // status per entry, with ":reason substring" where it matters
		unexplained bool
	}{
		{
			name: "clean", src: "/s/", dest: "/d", local: "/d", entries: []string{"a", "b"},
			stdout: []string{">f+++++++++|3|3|a"}, code: 0,
			want: []string{"transferred", "up_to_date"},
		},
		{
			name: "immutable directory, push: the sender logs what the receiver then fails", src: "/s/", dest: "/d/", local: "/d",
			entries: []string{"sub/f1", "sub/f2", "top/t1"},
			stdout:  []string{">f+++++++++|2|45|sub/f1", ">f+++++++++|2|45|sub/f2", ">f+++++++++|3|46|top/t1"},
			stderr: []string{`rsync: [receiver] mkstemp "/d/sub/.f1.CZaxGm" failed: Operation not permitted (1)`,
				`rsync: [receiver] mkstemp "/d/sub/.f2.Xy12Ab" failed: Operation not permitted (1)`,
				`rsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1394) [sender=3.5.0]`},
			code: 23, landed: map[string]bool{"top/t1": true},
			want: []string{"failed:mkstemp", "failed:.f2.Xy12Ab", "transferred"},
		},
		{
			name: "a module its uid cannot write", src: "/s/", dest: "rsync://127.0.0.1:873/m/", entries: []string{"f6", "sub/f7"},
			stdout: []string{"<f+++++++++|2|45|f6", "<f+++++++++|2|45|sub/f7"},
			stderr: []string{`rsync: [receiver] mkstemp ".f6.NMSHrn" (in m) failed: Permission denied (13)`,
				`rsync: [receiver] mkstemp "sub/.f7.aaaaaa" (in m) failed: Permission denied (13)`},
			code: 23, want: []string{"failed:(in m)", "failed:.f7."},
		},
		{
			name: "a module's subdirectory", src: "/s/", dest: "rsync://h/m/x/y/", entries: []string{"f1"},
			stderr: []string{`rsync: [receiver] mkstemp "/x/y/.f1.NMSHrn" (in m) failed: Permission denied (13)`},
			code:   23, want: []string{"failed:mkstemp"},
		},
		{
			name: "a directory where a file goes: no out-format line, no quotes", src: "/s/", dest: "/d", local: "/d",
			entries: []string{"f1", "f2"},
			stdout:  []string{">f+++++++++|1|1|f2"},
			stderr:  []string{"cannot delete non-empty directory: f1", "could not make way for new regular file: f1"},
			code:    23, landed: map[string]bool{"f2": true},
			want: []string{"failed:non-empty", "transferred"},
		},
		{
			name: "vanished and missing sources", src: "/s/", dest: "/d", local: "/d", entries: []string{"gone", "went", "ok"},
			stderr: []string{`rsync: [sender] link_stat "/s/gone" failed: No such file or directory (2)`, `file has vanished: "/s/went"`},
			code:   24, landed: map[string]bool{"ok": true},
			want: []string{"vanished", "vanished", "up_to_date"},
		},
		{
			name: "a failure no line attributes: confirmation decides", src: "/s/", dest: "/d", local: "/d", entries: []string{"a", "b"},
			stdout: []string{">f+++++++++|1|1|a", ">f+++++++++|1|1|b"},
			stderr: []string{"rsync: [receiver] something odd happened: Input/output error (5)"},
			code:   23, landed: map[string]bool{"a": true},
			want: []string{"transferred", "failed:something odd"},
		},
		{
			name: "an error no path carries although every path landed", src: "/s/", dest: "/d", local: "/d", entries: []string{"a"},
			stderr: []string{`rsync: [generator] failed to set times on "/d/other": Operation not permitted (1)`},
			code:   23, landed: map[string]bool{"a": true},
			want: []string{"up_to_date"}, unexplained: true,
		},
		{
			name: "exit 0 yet a skipped path", src: "/s/", dest: "/d", local: "/d", entries: []string{"fifo", "a"},
			stderr: []string{`skipping non-regular file "fifo"`}, code: 0,
			want: []string{"failed:skipping", "up_to_date"},
		},
		{
			name: "a directory rsync could not make fails every path below it", src: "/s/", dest: "/d", local: "/d",
			entries: []string{"sub/f1", "sub/deep/f2", "subway"},
			stderr:  []string{`rsync: [generator] recv_generator: mkdir "/d/sub" failed: Permission denied (13)`},
			code:    23, landed: map[string]bool{"subway": true},
			want: []string{"failed:mkdir", "failed:mkdir", "up_to_date"},
		},
		{
			name: "cancelled: only what landed counts", src: "/s/", dest: "/d", local: "/d", entries: []string{"a", "b"},
			stdout: []string{">f+++++++++|1|1|a", ">f+++++++++|1|1|b"}, code: 20, cancelled: true,
			landed: map[string]bool{"a": true},
			want:   []string{"transferred", "not_done"},
		},
		{
			name: "a path listed twice", src: "/s/", dest: "/d", local: "/d", entries: []string{"a", "./a"},
			stdout: []string{">f+++++++++|5|5|a"}, code: 0,
			want: []string{"transferred", "transferred"},
		},
		{
			name: "anchored entries and comment-like names", src: "/", dest: "/d", local: "/d",
			entries: []string{"data/./ks/#h.db", "./;semi"},
			stdout:  []string{">f+++++++++|5|5|ks/#h.db"},
			stderr:  []string{`rsync: [sender] send_files failed to open "/;semi": Permission denied (13)`},
			code:    23, landed: map[string]bool{"ks/#h.db": true},
			want: []string{"transferred", "failed:Permission denied"},
		},
		{
			name: "escaped names", src: "/s/", dest: "/d/", local: "/d", entries: []string{"new\nline", "bad\xffname"},
			stdout: []string{`>f+++++++++|5|5|new\#012line`},
			stderr: []string{`rsync: [receiver] mkstemp "/d/.bad\#377name.ABCDEF" failed: Operation not permitted (1)`},
			code:   23, landed: map[string]bool{"new\nline": true},
			want: []string{"transferred", "failed:mkstemp"},
		},
		{
			name: "a remote home directory prefix", src: "/s/", dest: "host:backup/", entries: []string{"sub/f1", "f1"},
			stderr: []string{`rsync: [receiver] mkstemp "/home/u/backup/sub/.f1.ABCDEF" failed: Disk quota exceeded (122)`},
			code:   23, landed: map[string]bool{"f1": true},
			want: []string{"failed:quota", "up_to_date"},
		},
		{
			name: "-ii without a skip option: an unchanged line is up to date, not transferred", src: "/s/", dest: "/d", local: "/d",
			entries: []string{"a", "b", "dir", "link", "newlink"},
			stdout: []string{".f         |3|0|a", ">f.st......|4|4|b", ".d          |4096|0|dir/",
				"hf         |3|0|link", "hf+++++++++|3|0|newlink"}, code: 0,
			want: []string{"up_to_date", "transferred", "up_to_date", "up_to_date", "transferred"},
		},
		{
			name: "left out: exit 0 proves only what rsync named", src: "/s/", dest: "/d", local: "/d", leftOut: true,
			entries: []string{"a.txt", "b.db", "c.txt", "old.db"},
			stdout:  []string{">f+++++++++|2|45|a.txt", ".f         |2|0|c.txt"}, code: 0,
			landed: map[string]bool{"old.db": true}, // DEST held it from an earlier copy
			want:   []string{"transferred", "failed:not in DEST", "up_to_date", "up_to_date"},
		},
		{
			name: "left out, exit 23: named and unnamed paths are both confirmed", src: "/s/", dest: "rsync://h/m/", leftOut: true,
			entries: []string{"a.txt", "b.db", "c.txt"},
			stdout:  []string{">f+++++++++|2|45|a.txt", ".f         |2|0|c.txt"},
			stderr:  []string{`rsync: [receiver] mkstemp "/a.txt.XyZ" (in m) failed: Permission denied (13)`}, code: 23,
			landed: map[string]bool{"c.txt": true},
			want:   []string{"failed:Permission denied", "failed:not in DEST", "up_to_date"},
		},
		{
			name: "a vanish is no reason for another path's failure", src: "/s/", dest: "/d", local: "/d",
			entries: []string{"went", "kept", "deleted later", "never"},
			stdout:  []string{">f+++++++++|1|1|kept", ">f+++++++++|1|1|deleted later"},
			stderr:  []string{`file has vanished: "/s/went"`},
			code:    24, landed: map[string]bool{"kept": true}, gone: map[string]bool{"never": true},
			want:      []string{"vanished", "transferred", "failed:not in DEST", "vanished:source gone"},
			notReason: "went",
		},
		{
			name: "a session refused: nothing is proven", src: "/s/", dest: "rsync://h/m/", entries: []string{"a"},
			stderr: []string{"@ERROR: max connections (2) reached -- try again later"}, code: 5,
			want: []string{"failed:max connections"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries := make([][]byte, len(tt.entries))
			for i, e := range tt.entries {
				entries[i] = []byte(e)
			}
			a := NewAttributor(entries, tt.src, tt.dest, tt.local)
			for _, l := range tt.stdout {
				a.Stdout([]byte(l))
			}
			for _, l := range tt.stderr {
				a.Stderr([]byte(l))
			}
			s := Settle(a.Result(), tt.code, tt.cancelled, tt.leftOut)
			if len(s.Unproven) > 0 && tt.code == 0 && !tt.cancelled && !tt.leftOut {
				t.Errorf("paths left to confirm after exit 0")
			}
			vs := make([]Verdict, len(s.Unproven))
			for k, i := range s.Unproven {
				vs[k] = Verdict{Landed: tt.landed[LandsAt(entries[i])], Reason: "not in DEST"}
				if tt.gone[LandsAt(entries[i])] {
					vs[k] = Verdict{Gone: true, Reason: "source gone before its copy"}
				}
			}
			out, unexplained := s.Fold(vs)
			for i, w := range tt.want {
				status, sub, _ := strings.Cut(w, ":")
				if string(out[i].Status) != status || !strings.Contains(out[i].Reason, sub) {
					t.Errorf("%q: %s (%q), want %s", tt.entries[i], out[i].Status, out[i].Reason, w)
				}
				if tt.notReason != "" && out[i].Status == Failed && strings.Contains(out[i].Reason, tt.notReason) {
					t.Errorf("%q: reason %q names %q, another path", tt.entries[i], out[i].Reason, tt.notReason)
				}
			}
			if (unexplained != "") != tt.unexplained {
				t.Errorf("unexplained %q, want %v", unexplained, tt.unexplained)
			}
		})
	}
}

func TestDifferences(t *testing.T) {
	entries := [][]byte{[]byte("same"), []byte("differs"), []byte("err")}
	a := NewAttributor(entries, "/s/", "rsync://h/m/", "")
	a.Stdout([]byte("<f.st......|3|0|differs"))
	a.Stderr([]byte(`rsync: [sender] send_files failed to open "/s/err": Permission denied (13)`))
	vs := Differences(a.Result(), 23)
	// every error named a path of its own: the pass compared the others
	if vs[1].Landed || !strings.Contains(vs[1].Reason, "differs") || vs[2].Landed || !vs[0].Landed {
		t.Errorf("exit 23: %+v", vs)
	}
	a.Stderr([]byte("rsync: [receiver] something odd happened: Input/output error (5)"))
	if vs := Differences(a.Result(), 23); vs[0].Landed || !strings.Contains(vs[0].Reason, "could not be confirmed") {
		t.Errorf("exit 23 with an error that names no path: %+v", vs[0])
	}
	b := NewAttributor(entries, "/s/", "rsync://h/m/", "")
	b.Stderr([]byte(`rsync: [sender] link_stat "/s/err" failed: No such file or directory (2)`))
	if vs := Differences(b.Result(), 23); !vs[0].Landed || !vs[1].Landed || vs[2].Landed {
		t.Errorf("exit 23, a source deleted since the copy: %+v", vs)
	}
	vs = Differences(NewAttributor(entries, "/s/", "rsync://h/m/", "").Result(), 0)
	for i, v := range vs {
		if !v.Landed {
			t.Errorf("exit 0, nothing said: %q not landed", entries[i])
		}
	}
}

// TestChecksCulprit: a difference the checksum pass finds is blamed on the source when
// it is listed with another size or mtime than it was copied with, else on DEST: under
// the source's size and mtime, or under its own; with no record of the copy, on neither.
func TestChecksCulprit(t *testing.T) {
	entries := [][]byte{[]byte("src"), []byte("dst"), []byte("dststamp"), []byte("uptodate"), []byte("touched"), []byte("fine"), []byte("oldline")}
	a := NewAttributor(entries, "/s/", "/d/", "/d")
	for _, l := range []string{
		">fcst......|9|2024/05/06-07:08:10|0|src", ">fc........|3|2024/05/06-07:08:09|0|dst",
		">fc.t......|5|2024/05/06-07:08:09|0|dststamp", ">fc.t......|5|2024/05/06-07:08:09|0|uptodate",
		">fc........|2|2024/05/06-07:08:11|0|touched", ">fc.t......|2|0|oldline",
	} {
		a.Stdout([]byte(l))
	}
	listed := []Stamp{{3, "2024/05/06-07:08:09"}, {3, "2024/05/06-07:08:09"}, {5, "2024/05/06-07:08:09"}, {},
		{2, "2024/05/06-07:08:09"}, {1, "2024/05/06-07:08:09"}, {2, "2024/05/06-07:08:09"}}
	want := []Check{
		{Status: Failed, Reason: "verify: source changed since it was copied (>fcst......): copied at size 3, mtime 2024/05/06-07:08:09; now size 9, mtime 2024/05/06-07:08:10", Hint: SourceChanged.String()},
		{Status: Failed, Reason: "verify: content differs (>fc........)", Hint: ContentDiffers.String()},
		{Status: Failed, Reason: "verify: content differs, DEST changed since it was copied (>fc.t......)", Hint: DestChanged.String()},
		{Status: Failed, Reason: "verify: content differs (>fc.t......)", Hint: StampDiffers.String()},
		{Status: Failed, Reason: "verify: source changed since it was copied (>fc........): copied at size 2, mtime 2024/05/06-07:08:09; now size 2, mtime 2024/05/06-07:08:11", Hint: SourceChanged.String()},
		{OK: true},
		{Status: Failed, Reason: "verify: content differs (>fc.t......)", Hint: StampDiffers.String()}, // a line without %M tells nothing
	}
	got := Checks(a.Result(), 0, false, "", listed)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: %+v, want %+v", entries[i], got[i], want[i])
		}
	}
}

func TestChecks(t *testing.T) {
	entries := [][]byte{[]byte("same"), []byte("content"), []byte("new"), []byte("dir"), []byte("gone"), []byte("locked")}
	const summary = "rsync error: error in rsync protocol data stream (code 12) at io.c(232) [sender=3.5.0]\n"
	ok := Check{OK: true}
	tests := []struct {
		name      string
		stdout    []string
		stderr    []string
		raw       string // stderr as written, when it differs from the lines
		code      int
		cancelled bool
		want      []Check
	}{
		{"nothing differs", []string{".d..t......|4096|0|dir"}, nil, "", 0, false,
			[]Check{ok, ok, ok, ok, ok, ok}},
		{"content differs, a file is missing", []string{">fc........|3|0|content", ">f+++++++++|5|0|new"}, nil, "", 0, false,
			[]Check{ok, {Status: Failed, Reason: "verify: content differs (>fc........)", Hint: ContentDiffers.String()},
				{Status: Failed, Reason: "verify: missing from DEST (>f+++++++++)"}, ok, ok, ok}},
		{"a source vanished, another is unreadable", nil, []string{
			`rsync: [sender] link_stat "/s/gone" failed: No such file or directory (2)`,
			`rsync: [sender] send_files failed to open "/s/locked": Permission denied (13)`,
		}, "", 23, false,
			[]Check{ok, ok, ok, ok,
				{Status: Vanished, Reason: `verify: rsync: [sender] link_stat "/s/gone" failed: No such file or directory (2)`},
				{Status: Failed, Reason: `verify: not checked: rsync: [sender] send_files failed to open "/s/locked": Permission denied (13)`, Hint: SourceNotReadable.String()}}},
		{"an error that names no path", []string{">fc........|3|0|content"}, []string{
			`rsync: [receiver] write error: Broken pipe (32)`,
		}, "", 23, false,
			[]Check{{Status: Failed, Reason: "verify: not checked: rsync: [receiver] write error: Broken pipe (32)"},
				{Status: Failed, Reason: "verify: content differs (>fc........)", Hint: ContentDiffers.String()},
				{Status: Failed, Reason: "verify: not checked: rsync: [receiver] write error: Broken pipe (32)"},
				{Status: Failed, Reason: "verify: not checked: rsync: [receiver] write error: Broken pipe (32)"},
				{Status: Failed, Reason: "verify: not checked: rsync: [receiver] write error: Broken pipe (32)"},
				{Status: Failed, Reason: "verify: not checked: rsync: [receiver] write error: Broken pipe (32)"}}},
		{"only the closing summary", nil, []string{summary}, summary, 12, false,
			[]Check{{Status: Failed, Reason: "verify: not checked: " + summary}, {Status: Failed, Reason: "verify: not checked: " + summary},
				{Status: Failed, Reason: "verify: not checked: " + summary}, {Status: Failed, Reason: "verify: not checked: " + summary},
				{Status: Failed, Reason: "verify: not checked: " + summary}, {Status: Failed, Reason: "verify: not checked: " + summary}}},
		{"a session failure", nil, []string{"@ERROR: max connections (2) reached -- try again later"}, "", 5, false,
			[]Check{{Status: Failed, Reason: "verify: not checked: @ERROR: max connections (2) reached -- try again later"},
				{Status: Failed, Reason: "verify: not checked: @ERROR: max connections (2) reached -- try again later"},
				{Status: Failed, Reason: "verify: not checked: @ERROR: max connections (2) reached -- try again later"},
				{Status: Failed, Reason: "verify: not checked: @ERROR: max connections (2) reached -- try again later"},
				{Status: Failed, Reason: "verify: not checked: @ERROR: max connections (2) reached -- try again later"},
				{Status: Failed, Reason: "verify: not checked: @ERROR: max connections (2) reached -- try again later"}}},
		{"killed, no output", nil, nil, "", -1, false,
			[]Check{{Status: Failed, Reason: "verify: not checked: no error output"}, {Status: Failed, Reason: "verify: not checked: no error output"},
				{Status: Failed, Reason: "verify: not checked: no error output"}, {Status: Failed, Reason: "verify: not checked: no error output"},
				{Status: Failed, Reason: "verify: not checked: no error output"}, {Status: Failed, Reason: "verify: not checked: no error output"}}},
		{"interrupted", []string{">fc........|3|0|content"}, nil, "", 20, true,
			[]Check{{Status: NotDone, Reason: "verify: interrupted"}, {Status: NotDone, Reason: "verify: interrupted"},
				{Status: NotDone, Reason: "verify: interrupted"}, {Status: NotDone, Reason: "verify: interrupted"},
				{Status: NotDone, Reason: "verify: interrupted"}, {Status: NotDone, Reason: "verify: interrupted"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAttributor(entries, "/s/", "/d/", "/d")
			for _, l := range tt.stdout {
				a.Stdout([]byte(l))
			}
			raw := tt.raw
			for _, l := range tt.stderr {
				a.Stderr([]byte(l))
				if tt.raw == "" {
					raw += l + "\n"
				}
			}
			got := Checks(a.Result(), tt.code, tt.cancelled, raw, nil)
			if len(got) != len(tt.want) {
				t.Fatalf("%d checks, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("%s: %+v, want %+v", entries[i], got[i], tt.want[i])
				}
			}
		})
	}
}

func TestLastLine(t *testing.T) {
	tests := []struct {
		name   string
		stderr []string
		raw    string
		want   string
	}{
		{"a session failure wins", []string{
			`rsync: [sender] link_stat "/s/x" failed: Permission denied (13)`,
			"@ERROR: max connections (2) reached -- try again later",
			`rsync: [receiver] write error: Broken pipe (32)`,
		}, "", "@ERROR: max connections (2) reached -- try again later"},
		{"the last line but the summary", []string{
			`rsync: [sender] link_stat "/s/x" failed: Permission denied (13)`,
			`rsync: [receiver] write error: Broken pipe (32)`,
			"rsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1394) [sender=3.5.0]",
		}, "", `rsync: [receiver] write error: Broken pipe (32)`},
		{"only the summary", []string{"rsync error: error in rsync protocol data stream (code 12) at io.c(232) [sender=3.5.0]"},
			"rsync error: error in rsync protocol data stream (code 12) at io.c(232) [sender=3.5.0]\n",
			"rsync error: error in rsync protocol data stream (code 12) at io.c(232) [sender=3.5.0]\n"},
		{"nothing", nil, "", "no error output"},
	}
	for _, tt := range tests {
		a := NewAttributor([][]byte{[]byte("x")}, "/s/", "/d/", "/d")
		for _, l := range tt.stderr {
			a.Stderr([]byte(l))
		}
		if got := a.Result().LastLine(tt.raw); got != tt.want {
			t.Errorf("%s: LastLine = %q, want %q", tt.name, got, tt.want)
		}
	}
}
