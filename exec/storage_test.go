package exec

import (
	"strings"
	"testing"
)

func TestDirRuns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries string // space-separated
		want    string
	}{
		{"one directory", "a/1 a/2 a/3", "a/1"},
		{"runs", "a/1 a/2 b/1 b/2 a/3", "a/1 b/1 a/3"},
		{"the top", "1 2 a/1 3", "1 a/1 3"},
		{"nested", "a/b/1 a/b/2 a/1 a/b/3", "a/b/1 a/1 a/b/3"},
		{"a directory entry starts its own run", "a/b/ a/b/1 a/b/2", "a/b/ a/b/1"},
		{"dot and dot-dot", "a/1 a/. a/.. a/2 a/3", "a/1 a/. a/.. a/2"},
		{"an anchor", "x/./a/1 x/./a/2 x/./b/1", "x/./a/1 x/./b/1"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in [][]byte
			for _, e := range strings.Fields(tc.entries) {
				in = append(in, []byte(e))
			}
			var got []string
			for _, e := range dirRuns(in) {
				got = append(got, string(e))
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("dirRuns(%q) = %q, want %q", tc.entries, g, tc.want)
			}
		})
	}
}
