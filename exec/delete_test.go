package exec

import (
	"strings"
	"testing"

	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// TestDeleteFailure: which endings of a deletion rsync fail the pass. An entry that
// vanished while rsync listed a directory is no failure: another shard's pass over the
// same directory removed it first.
func TestDeleteFailure(t *testing.T) {
	const dst = "/data/dst"
	tests := []struct {
		name   string
		code   int
		stderr []string
		want   string // a substring of the failure, or "" for none
	}{
		{"clean", 0, nil, ""},
		{"a DEST entry vanished under another shard's pass", 24, []string{
			`rsync: [generator] file has vanished: "/data/dst/d0/d1/xd2/inner"`,
		}, ""},
		{"vanished in a daemon module", 24, []string{
			`file has vanished: "/d0/xd2/inner" (in m)`,
		}, ""},
		{"a listed directory the source lacks", 23, []string{
			`rsync: [sender] link_stat "/data/src/d0/gone" failed: No such file or directory (2)`,
		}, ""},
		{"vanished beside a real error", 23, []string{
			`rsync: [generator] file has vanished: "/data/dst/d0/x"`,
			`rsync: [generator] delete_file: unlink(d0/y) failed: Operation not permitted (1)`,
		}, "code 23"},
		{"a session failure", 5, []string{
			`@ERROR: max connections (3) reached -- try again later`,
		}, "code 5"},
		{"an error rsync names no path for", 12, []string{
			`rsync error: error in rsync protocol data stream (code 12) at io.c(232)`,
		}, "code 12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries := [][]byte{[]byte("d0"), []byte("d0/gone")}
			a := rsync.NewAttributor(entries, "/data/src/", dst+"/", dst)
			for _, l := range tt.stderr {
				a.Stderr([]byte(l))
			}
			res := result{code: tt.code, r: a.Result()}
			if len(tt.stderr) > 0 {
				res.stderr = strings.Join(tt.stderr, "\n") + "\n"
			}
			p := &Pool{Dest: dst}
			got, _ := p.deleteFailure(res, &splitter.Chunk{Entries: entries})
			switch {
			case tt.want == "" && got != "":
				t.Errorf("failure %q, want none", got)
			case tt.want != "" && !strings.Contains(got, tt.want):
				t.Errorf("failure %q, want one with %q", got, tt.want)
			}
		})
	}
}
