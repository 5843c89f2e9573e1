package cli

import (
	"bytes"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prsync/prsync/books"
)

// TestMetrics: the metrics file prints the snapshot it is given, with the rate over the
// interval since the last one, and once the run has ended its exit code.
func TestMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prsync.prom")
	var stderr bytes.Buffer
	m := newMetrics(path, &stderr)
	s := books.Snapshot{
		Counts: books.Counts{Files: 10, Bytes: 5000, Transferred: 4, BytesTransferred: 2000, UpToDate: 2,
			Failed: 1, Vanished: 1, NotDone: 1, Queued: 1},
		Live: books.Live{Elapsed: 2, InFlight: 1000, Running: 3, Suspended: 1, Jobs: 4, BWRate: 20e6, SecondsSuspended: 1.5},
	}
	m.Update(s)
	want := `# HELP prsync_bwlimit_bytes_per_second The total bandwidth limit in force; 0 when there is none.
# TYPE prsync_bwlimit_bytes_per_second gauge
prsync_bwlimit_bytes_per_second 2e+07
# HELP prsync_bytes_read_total Bytes of the regular files read.
# TYPE prsync_bytes_read_total counter
prsync_bytes_read_total 5000
# HELP prsync_bytes_transferred_total File bytes proven transferred.
# TYPE prsync_bytes_transferred_total counter
prsync_bytes_transferred_total 2000
# HELP prsync_exit_code prsync's exit code once it has ended; -1 while it runs.
# TYPE prsync_exit_code gauge
prsync_exit_code -1
# HELP prsync_files_queued Paths read and waiting for an rsync.
# TYPE prsync_files_queued gauge
prsync_files_queued 1
# HELP prsync_files_read_total Input paths read (after --shard).
# TYPE prsync_files_read_total counter
prsync_files_read_total 10
# HELP prsync_files_total Input paths settled, by outcome.
# TYPE prsync_files_total counter
prsync_files_total{status="failed"} 1
prsync_files_total{status="not_done"} 1
prsync_files_total{status="transferred"} 4
prsync_files_total{status="up_to_date"} 2
prsync_files_total{status="vanished"} 1
# HELP prsync_input_done 1 once the input has been read to its end.
# TYPE prsync_input_done gauge
prsync_input_done 0
# HELP prsync_jobs_limit The number of rsyncs allowed at once.
# TYPE prsync_jobs_limit gauge
prsync_jobs_limit 4
# HELP prsync_rate_bytes_per_second File bytes transferred per second over the last interval.
# TYPE prsync_rate_bytes_per_second gauge
prsync_rate_bytes_per_second 1500
# HELP prsync_rsyncs rsync process groups, running or paused (throttle, bandwidth limit, Ctrl-Z, live control).
# TYPE prsync_rsyncs gauge
prsync_rsyncs{state="paused"} 1
prsync_rsyncs{state="running"} 3
# HELP prsync_suspended_seconds_total Group-seconds rsyncs spent paused by the CPU throttle.
# TYPE prsync_suspended_seconds_total counter
prsync_suspended_seconds_total 1.5
# HELP prsync_up 1 while prsync runs, 0 after it has ended.
# TYPE prsync_up gauge
prsync_up 1
`
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Errorf("while it runs:\n%s\nwant\n%s", got, want)
	}

	s.Transferred, s.BytesTransferred, s.InFlight, s.Running, s.Suspended = 5, 4000, 0, 0, 0
	s.Elapsed, s.InputDone, s.End = 4, true, &books.End{ExitCode: 23}
	m.Finish(s)
	got, _ := os.ReadFile(path)
	for _, line := range []string{"prsync_up 0", "prsync_exit_code 23", "prsync_input_done 1", "prsync_rate_bytes_per_second 500",
		`prsync_files_total{status="transferred"} 5`, `prsync_rsyncs{state="running"} 0`, "prsync_bytes_transferred_total 4000"} {
		if !strings.Contains(string(got), "\n"+line+"\n") {
			t.Errorf("at the end, no line %q in\n%s", line, got)
		}
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr %q", stderr.String())
	}
}

// TestMetricsWriteFails: a file that cannot be written is said once, on stderr, with the
// path the user gave and not the temp file's.
func TestMetricsWriteFails(t *testing.T) {
	var stderr bytes.Buffer
	dir := filepath.Join(t.TempDir(), "no", "such", "dir")
	path := filepath.Join(dir, "prsync.prom")
	m := newMetrics(path, &stderr)
	if err := m.open(); err == nil || err.Error() != "cannot create a file in "+dir+": no such file or directory" {
		t.Errorf("open: %v", err)
	}
	m.Update(books.Snapshot{})
	m.Update(books.Snapshot{})
	m.Finish(books.Snapshot{End: &books.End{}})
	want := "prsync: warning: --metrics-file " + path + ": cannot create a file in " + dir + ": no such file or directory; it keeps the figures of its last write until a write succeeds\n"
	if stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}

// TestMetricsWriteRecovers: a directory that goes away mid-run is said once; once it is
// back, the file is written again and its last write says the run ended.
func TestMetricsWriteRecovers(t *testing.T) {
	var stderr bytes.Buffer
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "prsync.prom")
	m := newMetrics(path, &stderr)
	if err := m.open(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	m.Update(books.Snapshot{Live: books.Live{Elapsed: 1}})
	m.Update(books.Snapshot{Live: books.Live{Elapsed: 2}})
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.Finish(books.Snapshot{Live: books.Live{Elapsed: 3}, End: &books.End{ExitCode: 23}})
	if n := strings.Count(stderr.String(), "prsync: warning: --metrics-file "+path+": "); n != 1 {
		t.Errorf("stderr %q, want one warning", stderr.String())
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"prsync_up 0", "prsync_exit_code 23"} {
		if !strings.Contains(string(got), "\n"+line+"\n") {
			t.Errorf("no line %q in\n%s", line, got)
		}
	}
}

// TestMetricsLastWriteInPlace: when the temp file cannot be renamed over the path (here
// the path is a mount point, for root; or a directory that takes no new file, for
// others), the last write writes the path itself, so that it says the run ended.
func TestMetricsLastWriteInPlace(t *testing.T) {
	var stderr bytes.Buffer
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "prsync.prom")
	m := newMetrics(path, &stderr)
	if err := m.open(); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if out, err := osexec.Command("mount", "--bind", path, path).CombinedOutput(); err != nil {
			t.Skipf("mount --bind: %v: %s", err, out)
		}
		defer osexec.Command("umount", path).Run()
	} else {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o755)
	}
	m.Update(books.Snapshot{Live: books.Live{Elapsed: 1}})
	m.Finish(books.Snapshot{Live: books.Live{Elapsed: 2}, End: &books.End{ExitCode: 0}})
	if n := strings.Count(stderr.String(), "prsync: warning: --metrics-file "+path+": "); n != 1 {
		t.Errorf("stderr %q, want one warning", stderr.String())
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "\nprsync_up 0\n") {
		t.Errorf("the last write did not land:\n%s", got)
	}
}
