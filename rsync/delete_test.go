package rsync

import "testing"

func TestDeleteErrors(t *testing.T) {
	tests := []struct {
		name   string
		remote bool // a pull: the source is remote
		stderr []string
		want   int
	}{
		{"clean", false, nil, 0},
		{"a DEST entry vanished under another shard's pass", false, []string{
			`rsync: [generator] file has vanished: "/data/dst/d0/d1/xd2/inner"`,
		}, 0},
		{"vanished beside a real error", false, []string{
			`rsync: [generator] file has vanished: "/data/dst/d0/x"`,
			`rsync: [generator] delete_file: unlink(d0/y) failed: Operation not permitted (1)`,
		}, 1},
		{"a pull whose every directory is missing from the source", true, []string{
			`rsync: [sender] link_stat "/data/src/d0/gone" failed: No such file or directory (2)`,
			`rsync: [receiver] write error: Broken pipe (32)`,
		}, 0},
		{"a broken pipe while a directory is still there", true, []string{
			`rsync: [receiver] write error: Broken pipe (32)`,
		}, 1},
		{"a broken pipe beside another error", true, []string{
			`rsync: [sender] link_stat "/data/src/d0/gone" failed: No such file or directory (2)`,
			`rsync: [receiver] write error: Broken pipe (32)`,
			`rsync: connection unexpectedly closed (0 bytes received so far) [Receiver]`,
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries := [][]byte{[]byte("d0/gone")}
			src := "/data/src/"
			if tt.remote {
				src = "host:/data/src/"
			}
			a := NewAttributor(entries, src, "/data/dst/", "/data/dst")
			for _, l := range tt.stderr {
				a.Stderr([]byte(l))
			}
			if got := a.Result().DeleteErrors(); len(got) != tt.want {
				t.Errorf("DeleteErrors() = %q, want %d lines", got, tt.want)
			}
		})
	}
}

// TestDeleteFailed: which endings of a deletion pass's rsync fail it. An entry that
// vanished while rsync listed a directory is no failure: another shard's pass over the
// same directory removed it first.
func TestDeleteFailed(t *testing.T) {
	tests := []struct {
		name   string
		code   int
		stderr []string
		want   bool
	}{
		{"clean", 0, nil, false},
		{"a DEST entry vanished under another shard's pass", 24, []string{
			`rsync: [generator] file has vanished: "/data/dst/d0/d1/xd2/inner"`,
		}, false},
		{"vanished in a daemon module", 24, []string{
			`file has vanished: "/d0/xd2/inner" (in m)`,
		}, false},
		{"a listed directory the source lacks", 23, []string{
			`rsync: [sender] link_stat "/data/src/d0/gone" failed: No such file or directory (2)`,
		}, false},
		{"vanished beside a real error", 23, []string{
			`rsync: [generator] file has vanished: "/data/dst/d0/x"`,
			`rsync: [generator] delete_file: unlink(d0/y) failed: Operation not permitted (1)`,
		}, true},
		{"a session failure", 5, []string{
			`@ERROR: max connections (3) reached -- try again later`,
		}, true},
		{"an error rsync names no path for", 12, []string{
			`rsync error: error in rsync protocol data stream (code 12) at io.c(232)`,
		}, true},
		{"an exit other than 23 or 24, with nothing said", 11, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAttributor([][]byte{[]byte("d0"), []byte("d0/gone")}, "/data/src/", "/data/dst/", "/data/dst")
			for _, l := range tt.stderr {
				a.Stderr([]byte(l))
			}
			if got := a.Result().DeleteFailed(tt.code); got != tt.want {
				t.Errorf("DeleteFailed(%d) = %v, want %v", tt.code, got, tt.want)
			}
		})
	}
}
