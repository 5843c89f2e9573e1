package rsync

import "testing"

// TestStatedLimit: the limit an rsync daemon states when it refuses a session, and 0 for
// every line that states none.
func TestStatedLimit(t *testing.T) {
	tests := []struct {
		line string
		want int
	}{
		{"@ERROR: max connections (3) reached -- try again later", 3},
		{"@ERROR: max connections (128) reached -- try again later\n", 128},
		{"rsync: [sender] @ERROR: max connections (1) reached -- try again later", 1},
		{"@ERROR: max connections (0) reached -- try again later", 0},
		{"@ERROR: max connections (-2) reached", 0},
		{"@ERROR: max connections (x) reached", 0},
		{"@ERROR: max connections (3", 0},
		{"kex_exchange_identification: read: Connection reset by peer", 0},
		{"@ERROR: Unknown module 'bench'", 0},
		{"", 0},
	}
	for _, tt := range tests {
		if got := StatedLimit(tt.line); got != tt.want {
			t.Errorf("StatedLimit(%q) = %d, want %d", tt.line, got, tt.want)
		}
	}
}
