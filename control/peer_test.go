//go:build unix

package control

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prsync/prsync/internal/cmdline"
)

// Another user is turned away by the uid check itself: in this test only, the modes of
// the directory and of the socket let them reach it.
func TestOtherUIDRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run prsync ctl as another user (nobody, uid 65534)")
	}
	const nobody = 65534
	base, err := os.MkdirTemp("", "ctlr")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	must(t, os.Chmod(base, 0o755))
	bin := filepath.Join(base, "ctl.test") // where nobody may run it
	copyFile(t, bin)

	log := &syncBuffer{}
	h := newFake()
	s, err := listen(filepath.Join(base, "1.sock"), h, cmdline.Warner(log), 0, time.Second) // prsync runs as root
	must(t, err)
	defer s.Close()
	must(t, os.Chmod(s.Path(), 0o666))
	hn := newFake()
	sn, err := listen(filepath.Join(base, "2.sock"), hn, nil, nobody, time.Second) // as if it ran as nobody
	must(t, err)
	defer sn.Close()
	must(t, os.Chmod(sn.Path(), 0o666))

	run := func(args ...string) (code int, stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{helperEnv + "=1", "PATH=/usr/bin:/bin"}
		cmd.Dir = base
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			code = ee.ExitCode()
		case err != nil:
			t.Fatalf("run prsync ctl as nobody: %v", err)
		}
		return code, o.String(), e.String()
	}

	code, stdout, stderr := run("--socket", s.Path(), "jobs", "4")
	want := fmt.Sprintf("prsync: error: uid 65534 may not control prsync %d, which runs as uid 0\n"+
		"prsync: hint: only uid 0, or root, may control it\n", os.Getpid())
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("nobody: exit %d, stdout %q, stderr %q; want 1 and %q", code, stdout, stderr, want)
	}
	if calls := h.Calls(); len(calls) != 0 {
		t.Errorf("the handler ran for nobody: %q", calls)
	}
	if got := log.String(); !strings.HasPrefix(got, "prsync: warning: control socket: refused uid 65534 (pid ") {
		t.Errorf("log %q: want the refusal", got)
	}

	// the same client is served by a prsync of its own uid
	code, stdout, stderr = run("--socket", sn.Path(), "jobs", "4")
	if code != 0 || stdout != "jobs: 8 -> 4\n" || stderr != "" {
		t.Errorf("nobody to its own prsync: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// with the socket's own mode, another user cannot even connect
	must(t, os.Chmod(s.Path(), 0o600))
	code, _, stderr = run("--socket", s.Path(), "status")
	if code != 2 || !strings.Contains(stderr, "permission denied") || !strings.Contains(stderr, "prsync: hint: only the user who started prsync, or root, may control it") {
		t.Errorf("nobody, socket 0600: exit %d, stderr %q; want 2 and permission denied", code, stderr)
	}
	if calls := h.Calls(); len(calls) != 0 {
		t.Errorf("the handler ran for nobody: %q", calls)
	}
}

// copyFile copies the test binary to path, mode 0755.
func copyFile(t *testing.T, path string) {
	t.Helper()
	self, err := os.Executable()
	must(t, err)
	in, err := os.Open(self)
	must(t, err)
	defer in.Close()
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	must(t, err)
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	must(t, out.Close())
}
