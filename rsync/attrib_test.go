package rsync

import (
	"strings"
	"testing"
)

func TestParseMessage(t *testing.T) {
	tests := []struct {
		line    string
		side    string
		name    string
		module  string
		errno   int
		kind    Kind
		session Session
	}{
		{`rsync: [sender] link_stat "/src/x" failed: No such file or directory (2)`, "sender", "/src/x", "", 2, KindVanished, 0},
		{`file has vanished: "/src/a\#012b"`, "", "/src/a\nb", "", 0, KindVanished, 0},
		{`rsync: [sender] send_files failed to open "/src/locked": Permission denied (13)`, "sender", "/src/locked", "", 13, KindFailed, 0},
		{`rsync: [receiver] write failed on "/dst/ten": No space left on device (28)`, "receiver", "/dst/ten", "", 28, KindFailed, 0},
		{`rsync: [sender] link_stat "/src/q"uote" failed: Permission denied (13)`, "sender", `/src/q"uote`, "", 13, KindFailed, 0},
		{`rsync: [receiver] mkstemp ".f6.NMSHrn" (in m) failed: Permission denied (13)`, "receiver", ".f6.NMSHrn", "m", 13, KindFailed, 0},
		{`rsync: [receiver] rename "/d/.f.AbCdEf" -> "f": Operation not permitted (1)`, "receiver", "f", "", 1, KindFailed, 0},
		{`cannot delete non-empty directory: a b/c`, "", "a b/c", "", 0, KindFailed, 0},
		{`@ERROR: max connections (2) reached -- try again later`, "", "", "", 0, KindOther, MaxConnections},
		{`@ERROR: Unknown module 'nomod'`, "", "", "", 0, KindOther, UnknownModule},
		{`kex_exchange_identification: read: Connection reset by peer`, "", "", "", 0, KindOther, SSHRefused},
		{`rsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1394) [sender=3.5.0]`, "", "", "", 0, KindOther, 0},
	}
	for _, tt := range tests {
		m := ParseMessage([]byte(tt.line))
		if m.Side != tt.side || string(m.Name) != tt.name || m.Module != tt.module || m.Errno != tt.errno || m.Kind != tt.kind || m.Session != tt.session {
			t.Errorf("ParseMessage(%q) = %+v", tt.line, m)
		}
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		code      int
		cancelled bool
		stderr    string
		want      Class
	}{
		{0, false, "", OK},
		{23, false, "", Partial},
		{24, false, "", Partial},
		{20, true, "", Cancelled},
		{-1, true, "", Cancelled},
		{20, false, "", Transient},
		{-1, false, "", Transient},
		{10, false, "", Transient},
		{12, false, "", Transient},
		{30, false, "", Transient},
		{35, false, "", Transient},
		{255, false, "", Transient},
		{1, false, "", Fatal},
		{3, false, "", Fatal},
		{5, false, "", Fatal},
		{5, false, "@ERROR: max connections (2) reached -- try again later", Refused},
		{5, false, "@ERROR: Unknown module 'x'", Fatal},
		{255, false, "kex_exchange_identification: Connection closed by remote host", Refused},
		{1, false, "ERROR: module is read only", Fatal},
		{11, false, `rsync: [receiver] write failed on "/d/x": No space left on device (28)`, Fatal},
		{23, false, `rsync: [receiver] write failed on "/d/x": No space left on device (28)`, Fatal},
		{11, false, `rsync: [receiver] mkdir "/d/x" failed: File exists (17)`, Transient},
		{11, false, `rsync: [Receiver] mkdir "a" (in mod) failed: File exists (17)`, Transient},
		{23, false, `rsync: [generator] delete_file: unlink(x/t) failed: Is a directory (21)`, Transient},
		{23, false, `rsync: [generator] delete_file: unlink(d) failed: Operation not permitted (1)`, Partial},
		{23, false, `rsync: [generator] delete_file: rmdir(d) failed: Directory not empty (39)`, Partial},
		{11, false, "", ChunkFailed},
		{2, false, "", ChunkFailed},
		{14, false, "", ChunkFailed},
	}
	for _, tt := range tests {
		a := NewAttributor(nil, "/s/", "/d", "/d")
		if tt.stderr != "" {
			a.Stderr([]byte(tt.stderr))
		}
		if got := Classify(tt.code, tt.cancelled, a.Result()); got != tt.want {
			t.Errorf("Classify(%d, %v, %q) = %v, want %v", tt.code, tt.cancelled, tt.stderr, got, tt.want)
		}
	}
}

func TestHints(t *testing.T) {
	tests := []struct {
		code   int
		stderr string
		want   string
	}{
		{1, "ERROR: module is read only", "read only"},
		{5, "@ERROR: Unknown module 'x'", "no such module"},
		{5, "@ERROR: auth failed on module m", "refused the login"},
		{5, "@ERROR: max connections (2) reached -- try again later", "max connections"},
		{1, "rsync: the --compress option may not be used with this server", "refuses an option"},
		{23, `rsync: [receiver] mkstemp ".f6.NMSHrn" (in m) failed: Permission denied (13)`, "uid = nobody"},
		{23, `rsync: [receiver] mkstemp "/d/.f.AAAAAA" failed: Operation not permitted (1)`, "immutable"},
		{1, "", "options"},
	}
	for _, tt := range tests {
		a := NewAttributor([][]byte{[]byte("f6")}, "/s/", "rsync://h/m/", "")
		if tt.stderr != "" {
			a.Stderr([]byte(tt.stderr))
		}
		if got := Hint(tt.code, a.Result(), "rsync://h/m/"); !strings.Contains(got, tt.want) {
			t.Errorf("Hint(%d, %q) = %q, want it to say %q", tt.code, tt.stderr, got, tt.want)
		}
	}
}
