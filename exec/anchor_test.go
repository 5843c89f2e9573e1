package exec

import (
	"testing"

	"github.com/prsync/prsync/rsync"
)

// A pull lists its chunks' directories (Pool.Anchors) in a copy and the dry runs that
// confirm or verify it, never in a deletion pass or a listing.
func TestPassAnchored(t *testing.T) {
	tests := []struct {
		name string
		ps   pass
		want bool
	}{
		{"a copy", pass{}, true},
		{"a confirmation", pass{extra: []string{"--dry-run"}}, true},
		{"a verification", pass{extra: []string{"--checksum", "--dry-run"}}, true},
		{"a deletion pass", pass{extra: rsync.DeleteOnly()}, false},
		{"its dry run", pass{extra: append(rsync.DeleteOnly(), "--dry-run")}, false},
		{"a listing of the source", pass{extra: []string{"--list-only"}, dest: "/dev/null"}, false},
		{"a pass over DEST", pass{extra: []string{"--dry-run"}, src: "/dst"}, false},
	}
	for _, tt := range tests {
		if got := tt.ps.anchored(); got != tt.want {
			t.Errorf("%s: anchored %v, want %v", tt.name, got, tt.want)
		}
	}
}
