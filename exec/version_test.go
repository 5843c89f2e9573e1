package exec

import (
	osexec "os/exec"
	"path/filepath"
	"testing"

	"github.com/prsync/prsync/rsync"
)

// TestVersion: the version probe of the real rsync, with options it takes and one it does
// not, and of a program that is not there.
func TestVersion(t *testing.T) {
	path, err := osexec.LookPath("rsync")
	if err != nil {
		t.Skip("no rsync")
	}
	v := Version(t.Context(), path, []string{"--archive", "--hard-links"})
	if _, ok := rsync.ParseBanner(v.Out); !ok || v.Err != nil || v.Code != 0 || v.Rejected() {
		t.Errorf("rsync --archive --hard-links --version: %+v, banner %v", v, ok)
	}
	if v := Version(t.Context(), path, []string{"--no-such-option"}); !v.Rejected() || v.Code != 1 || v.Err == nil {
		t.Errorf("rsync --no-such-option --version: %+v, want it rejected", v)
	}
	if v := Version(t.Context(), filepath.Join(t.TempDir(), "rsync"), nil); v.Rejected() || v.Err == nil || v.Code != -1 {
		t.Errorf("a missing rsync: %+v", v)
	}
}
