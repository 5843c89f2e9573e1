package rsync

import "testing"

func TestNoTransfer(t *testing.T) {
	tests := []struct {
		code   int
		stderr string
		want   bool
	}{
		{0, "", false},
		{23, `rsync: [sender] link_stat "/s/x" failed: Permission denied (13)`, false},
		{24, "", false},
		{11, "", false},
		{20, "", false},
		{1, "", true},
		{2, "", true},
		{3, "", true},
		{4, "", true},
		{5, "", true},
		{10, "", true},
		{12, "", true},
		{14, "", true},
		{30, "", true},
		{35, "", true},
		{127, "", true},
		{255, "", true},
		{-1, "", true},
		{23, "@ERROR: max connections (2) reached -- try again later", true},
	}
	for _, tt := range tests {
		a := NewAttributor([][]byte{[]byte("x")}, "/s/", "/d/", "/d")
		if tt.stderr != "" {
			a.Stderr([]byte(tt.stderr))
		}
		if got := NoTransfer(tt.code, a.Result()); got != tt.want {
			t.Errorf("NoTransfer(%d, %q) = %v, want %v", tt.code, tt.stderr, got, tt.want)
		}
	}
}
