package tests

// The --metrics-file when its directory stops taking writes mid-run: one warning naming
// the path, and the file says the run ended once it can be written again. Proven with the
// real rsync, by walking DEST.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestMetricsFileMidRun breaks the metrics file's directory while prsync copies, in two
// ways: the directory is removed (renamed away) and made again, or, for root, a tmpfs
// mounted there is remounted read-only and then read-write. Writes fail for several
// intervals, then the run ends: exactly one warning names the path as given, the run
// exits 0 with DEST complete, and the file says prsync_up 0 and prsync_exit_code 0.
func TestMetricsFileMidRun(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	for _, how := range []string{"removed", "read-only remount"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel() // each its own trees and metrics directory
			w := newWork(t)
			src, dst, dir := w.Src, w.Dst, filepath.Join(w.Dir, "prom")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			var breakDir, mendDir func()
			switch how {
			case "removed":
				breakDir = func() {
					if err := os.Rename(dir, dir+".away"); err != nil {
						t.Fatal(err)
					}
				}
				mendDir = func() {
					if err := os.Mkdir(dir, 0o755); err != nil {
						t.Fatal(err)
					}
				}
			default:
				m := mountTmpfs(t, dir, "size=1m")
				breakDir = func() { m.Remount("remount,ro") }
				mendDir = func() { m.Remount("remount,rw") }
			}
			names := spreadFiles(t, src, 40, 3, 100)
			mf := filepath.Join(dir, "prsync.prom")
			pr, pw := io.Pipe()
			p := start(t, startOpts{stdin: pr}, "-0", "--root", src, "--chunk-files", "5", "--chunk-wait", "50ms",
				"--throttle-interval", "100ms", "--metrics-file", mf, dst)
			defer pw.Close()
			pw.Write(nul(names[:20]...))
			p.mustWaitFor("chunk_end", time.Minute, is("chunk_end"))
			if b, err := os.ReadFile(mf); err != nil || !strings.Contains(string(b), fmt.Sprintf("\nprsync_up{dest=%q} 1\n", dst)) {
				t.Fatalf("the metrics file mid-run: %v\n%s", err, b)
			}
			breakDir()
			warning := "prsync: warning: --metrics-file " + mf + ": "
			p.waitStderr("warning", regexp.MustCompile("^"+regexp.QuoteMeta(warning)), time.Minute)
			time.Sleep(500 * time.Millisecond) // five intervals more that cannot write
			pw.Write(nul(names[20:]...))
			time.Sleep(300 * time.Millisecond)
			mendDir()
			pw.Close()
			r := p.wait(5 * time.Minute)
			r.Exit(t, 0)
			r.Identity(t, 40)
			if n := strings.Count(r.Stderr, "prsync: warning: "); n != 1 || strings.Count(r.Stderr, warning) != 1 {
				t.Errorf("%d warnings, want one naming %s:\n%s", n, mf, r.Stderr)
			}
			if strings.Contains(r.Stderr, "prsync.prom0") || strings.Contains(r.Stderr, "prsync.prom1") {
				t.Errorf("the warning names a temp file:\n%s", r.Stderr)
			}
			b, err := os.ReadFile(mf)
			if err != nil {
				t.Fatal(err)
			}
			l := fmt.Sprintf("dest=%q", dst)
			for _, line := range []string{"prsync_up{" + l + "} 0", "prsync_exit_code{" + l + "} 0", `prsync_files_total{` + l + `,status="transferred"} 40`} {
				if !strings.Contains(string(b), "\n"+line+"\n") {
					t.Errorf("no line %q in the metrics file:\n%s", line, b)
				}
			}
			sameTree(t, src, dst)
		})
	}
}
