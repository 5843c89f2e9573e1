package cli

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/prsync/prsync/internal/cmdline"
)

// TestValidateHasNoSideEffects: Validate creates, opens, writes and sets nothing, and Close
// after it releases nothing and does not fail.
func TestValidateHasNoSideEffects(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "new", "dest")
	failed := filepath.Join(dir, "failed.list")
	args := []string{"--failed", failed, "--no-control", "--rsync", "true", dest}
	var f Flags
	parser, err := newParser(&f, io.Discard, io.Discard, cmdline.Exit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmdline.Parse(parser, args); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	r := &runner{f: f, stdin: bytes.NewReader(nil), stdout: io.Discard, stderr: &stderr, argv: args}
	before := *r
	if err := r.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if !reflect.DeepEqual(*r, before) {
		t.Errorf("Validate set something: the runner was %+v, is %+v (derive sets what the flags decide)", before, *r)
	}
	for _, p := range []string{dest, filepath.Dir(dest), failed} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after Validate: %v, want it absent", p, err)
		}
	}
	if stderr.Len() > 0 || r.input != nil || r.failed != nil || r.p != nil {
		t.Errorf("Validate wrote %q or opened something", stderr.String())
	}
	r.Close()
	r.Close()
}
