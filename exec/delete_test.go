package exec

import (
	"strings"
	"testing"

	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// TestDeleteFailure: what a deletion rsync's failure says (which endings fail the pass is
// rsync.Result.DeleteFailed's, tested in rsync): the directory that failed, or rsync's
// exit code and its line.
func TestDeleteFailure(t *testing.T) {
	const dst = "/data/dst"
	tests := []struct {
		name   string
		code   int
		stderr []string
		want   string // a substring of the failure, or "" for none
	}{
		{"clean", 0, nil, ""},
		{"a listed directory the source lacks", 23, []string{
			`rsync: [sender] link_stat "/data/src/d0/gone" failed: No such file or directory (2)`,
		}, ""},
		{"a listed directory that failed", 23, []string{
			`rsync: [sender] opendir "/data/src/d0" failed: Permission denied (13)`,
		}, "directory d0: "},
		{"a session failure", 5, []string{
			`@ERROR: max connections (3) reached -- try again later`,
		}, "rsync exited with code 5: @ERROR: max connections"},
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
