package splitter

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prsync/prsync/rsync"
)

// TestCRLF: a record is a CRLF list's line when it ends in CR and only the name without
// the CR exists, taken from --root, the working directory, or absolute as given.
func TestCRLF(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a/f1", "a/cr\r", "a/both", "a/both\r", "root/r1"} {
		writeTestFile(t, filepath.Join(dir, p))
	}
	tests := []struct {
		name string
		cfg  Config
		rec  string
		want bool
	}{
		{"relative", Config{Sep: '\n', Cwd: dir}, "a/f1\r", true},
		{"absolute", Config{Sep: '\n', Cwd: "/"}, dir + "/a/f1\r", true},
		{"under --root", Config{Sep: '\n', Cwd: "/", Root: dir + "/root"}, "r1\r", true},
		{"a directory", Config{Sep: '\n', Cwd: dir}, "a\r", true},
		{"--sizes", Config{Sep: '\n', Cwd: dir, Sizes: true}, "2\ta/f1\r", true},
		{"no CR", Config{Sep: '\n', Cwd: dir}, "a/f1", false},
		{"a name that ends in CR", Config{Sep: '\n', Cwd: dir}, "a/cr\r", false},
		{"both names exist", Config{Sep: '\n', Cwd: dir}, "a/both\r", false},
		{"neither exists", Config{Sep: '\n', Cwd: dir}, "a/gone\r", false},
		{"a lone CR", Config{Sep: '\n', Cwd: dir}, "\r", false},
		{"NUL-separated: a CR is a byte of the name", Config{Sep: 0, Cwd: dir}, "a/f1\r", false},
		{"a remote source is not looked at", Config{Sep: '\n', Cwd: dir, RemoteSrc: "host:" + dir}, "a/f1\r", false},
		{"--sizes, no tab", Config{Sep: '\n', Cwd: dir, Sizes: true}, "a/f1\r", false},
		{"relative to --root, not the working directory", Config{Sep: '\n', Cwd: dir, Root: dir + "/root"}, "a/f1\r", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.CRLF([]byte(tt.rec)); got != tt.want {
				t.Errorf("CRLF(%q) = %v, want %v", tt.rec, got, tt.want)
			}
		})
	}
}

// TestSplitterCRLF: a record of a CRLF list read mid-list is failed with the reason
// CRLF, never vanished and never sent to rsync; a name that really ends in CR is sent;
// every record is either settled or in a chunk once.
func TestSplitterCRLF(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a/f1", "a/f2", "a/cr\r"} {
		writeTestFile(t, filepath.Join(dir, p))
	}
	in := "a/f1\na/f2\r\na/cr\r\na/gone\r\n"
	for _, sizes := range []bool{false, true} {
		input := in
		if sizes {
			input = "1\ta/f1\n1\ta/f2\r\n1\ta/cr\r\n1\ta/gone\r\n"
		}
		var reasons []string
		s := New(Config{Sep: '\n', Cwd: dir, Sizes: sizes, ChunkFiles: 100}, Hooks{Settled: func(in []byte, status rsync.Status, reason string) {
			reasons = append(reasons, string(status)+" "+reason)
		}})
		out := make(chan *Chunk, 100)
		if err := s.Run(context.Background(), strings.NewReader(input), out); err != nil {
			t.Fatal(err)
		}
		close(out)
		var cs []*Chunk
		for c := range out {
			cs = append(cs, c)
		}
		var sent []string
		for _, c := range cs {
			for _, e := range c.Entries {
				sent = append(sent, string(e))
			}
		}
		slices.Sort(sent)
		wantSent := []string{"a/cr\r", "a/f1"}
		if sizes {
			wantSent = append(wantSent, "a/gone\r") // --sizes: not lstat'ed, rsync finds it gone
		}
		slices.Sort(wantSent)
		if !slices.Equal(sent, wantSent) {
			t.Errorf("sizes %v: sent %q, want %q", sizes, sent, wantSent)
		}
		wantSettled := []string{"failed " + CRLF}
		if !sizes {
			wantSettled = append(wantSettled, "vanished lstat: no such file or directory") // neither name exists
		}
		if !slices.Equal(reasons, wantSettled) {
			t.Errorf("sizes %v: settled %q, want %q", sizes, reasons, wantSettled)
		}
	}
}
