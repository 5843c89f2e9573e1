package cli

import (
	"bytes"
	"errors"
	"maps"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prsync/prsync/books"
	"github.com/prsync/prsync/internal/cmdline"
)

// TestMetrics: the metrics file prints the snapshot it is given, with the rate over the
// interval since the last one, and once the run has ended its exit code.
func TestMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prsync.prom")
	var stderr bytes.Buffer
	m := newMetrics(path, prometheus.Labels{"dest": "/mnt/backup"}, 500*time.Millisecond, &stderr)
	m.now = func() time.Time { return time.Unix(1796468246, 250e6) }
	s := books.Snapshot{
		Counts: books.Counts{Files: 10, Bytes: 5000, Transferred: 4, BytesTransferred: 2000, UpToDate: 2,
			Failed: 1, Vanished: 1, NotDone: 1, Queued: 1},
		Live: books.Live{Elapsed: 2, InFlight: 1000, Running: 3, Suspended: 1, Jobs: 4, BWRate: 20e6, SecondsSuspended: 1.5},
	}
	m.Update(s)
	want := `# HELP prsync_bwlimit_bytes_per_second The total bandwidth limit in force; 0 when there is none.
# TYPE prsync_bwlimit_bytes_per_second gauge
prsync_bwlimit_bytes_per_second{dest="/mnt/backup"} 2e+07
# HELP prsync_bytes_read_total Bytes of the regular files read.
# TYPE prsync_bytes_read_total counter
prsync_bytes_read_total{dest="/mnt/backup"} 5000
# HELP prsync_bytes_transferred_total File bytes proven transferred.
# TYPE prsync_bytes_transferred_total counter
prsync_bytes_transferred_total{dest="/mnt/backup"} 2000
# HELP prsync_exit_code prsync's exit code once it has ended; -1 while it runs.
# TYPE prsync_exit_code gauge
prsync_exit_code{dest="/mnt/backup"} -1
# HELP prsync_files_queued Paths read and waiting for an rsync.
# TYPE prsync_files_queued gauge
prsync_files_queued{dest="/mnt/backup"} 1
# HELP prsync_files_read_total Input paths read (after --shard).
# TYPE prsync_files_read_total counter
prsync_files_read_total{dest="/mnt/backup"} 10
# HELP prsync_files_total Input paths settled, by outcome.
# TYPE prsync_files_total counter
prsync_files_total{dest="/mnt/backup",status="failed"} 1
prsync_files_total{dest="/mnt/backup",status="not_done"} 1
prsync_files_total{dest="/mnt/backup",status="transferred"} 4
prsync_files_total{dest="/mnt/backup",status="up_to_date"} 2
prsync_files_total{dest="/mnt/backup",status="vanished"} 1
# HELP prsync_input_done 1 once the input has been read to its end.
# TYPE prsync_input_done gauge
prsync_input_done{dest="/mnt/backup"} 0
# HELP prsync_jobs_limit The number of rsyncs allowed at once.
# TYPE prsync_jobs_limit gauge
prsync_jobs_limit{dest="/mnt/backup"} 4
# HELP prsync_last_update_timestamp_seconds When prsync last wrote this file, in seconds since the Unix epoch.
# TYPE prsync_last_update_timestamp_seconds gauge
prsync_last_update_timestamp_seconds{dest="/mnt/backup"} 1.79646824625e+09
# HELP prsync_max_duration_reached 1 once the --max-duration time window has ended: no rsync starts any more.
# TYPE prsync_max_duration_reached gauge
prsync_max_duration_reached{dest="/mnt/backup"} 0
# HELP prsync_rate_bytes_per_second File bytes transferred per second over the last interval.
# TYPE prsync_rate_bytes_per_second gauge
prsync_rate_bytes_per_second{dest="/mnt/backup"} 1500
# HELP prsync_rsyncs rsync process groups, running or paused (throttle, bandwidth limit, Ctrl-Z, live control).
# TYPE prsync_rsyncs gauge
prsync_rsyncs{dest="/mnt/backup",state="paused"} 1
prsync_rsyncs{dest="/mnt/backup",state="running"} 3
# HELP prsync_suspended_seconds_total Group-seconds rsyncs spent paused by the CPU throttle.
# TYPE prsync_suspended_seconds_total counter
prsync_suspended_seconds_total{dest="/mnt/backup"} 1.5
# HELP prsync_up 1 while prsync runs, 0 after it has ended.
# TYPE prsync_up gauge
prsync_up{dest="/mnt/backup"} 1
# HELP prsync_update_interval_seconds How often prsync writes this file while it runs (--throttle-interval).
# TYPE prsync_update_interval_seconds gauge
prsync_update_interval_seconds{dest="/mnt/backup"} 0.5
`
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Errorf("while it runs:\n%s\nwant\n%s", got, want)
	}

	s.Transferred, s.BytesTransferred, s.InFlight, s.Running, s.Suspended = 5, 4000, 0, 0, 0
	s.Elapsed, s.InputDone, s.End = 4, true, &books.End{ExitCode: 124, MaxDurationReached: true}
	m.now = func() time.Time { return time.Unix(1796468248, 0) }
	m.Finish(s)
	got, _ := os.ReadFile(path)
	for _, line := range []string{`prsync_up{dest="/mnt/backup"} 0`, `prsync_exit_code{dest="/mnt/backup"} 124`, `prsync_max_duration_reached{dest="/mnt/backup"} 1`,
		`prsync_input_done{dest="/mnt/backup"} 1`, `prsync_rate_bytes_per_second{dest="/mnt/backup"} 500`,
		`prsync_files_total{dest="/mnt/backup",status="transferred"} 5`, `prsync_rsyncs{dest="/mnt/backup",state="running"} 0`,
		`prsync_bytes_transferred_total{dest="/mnt/backup"} 4000`, `prsync_last_update_timestamp_seconds{dest="/mnt/backup"} 1.796468248e+09`} {
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
	m := newMetrics(path, nil, time.Second, &stderr)
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
	m := newMetrics(path, nil, time.Second, &stderr)
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
	m := newMetrics(path, nil, time.Second, &stderr)
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

// TestMetricsLabels: the labels of the metrics file's series: dest (absolute when local)
// when no --metrics-label is given, the ones given instead, shard with --shard either way;
// and a label Prometheus or node_exporter would not take, or one prsync sets itself, is a
// usage error naming it.
func TestMetricsLabels(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		given         []string
		dest          string
		shard, shards int
		want          prometheus.Labels
		err           string // the error's message; "" for none
	}{
		{nil, "/mnt/backup", 0, 1, prometheus.Labels{"dest": "/mnt/backup"}, ""},
		{nil, "/mnt/backup/", 0, 1, prometheus.Labels{"dest": "/mnt/backup"}, ""},
		{nil, "dst", 0, 1, prometheus.Labels{"dest": filepath.Join(cwd, "dst")}, ""},
		{nil, "rsync://nas/backup/", 0, 1, prometheus.Labels{"dest": "rsync://nas/backup"}, ""},
		{nil, "nas:/srv/b", 0, 1, prometheus.Labels{"dest": "nas:/srv/b"}, ""},
		{nil, "/mnt/\xffb", 0, 1, prometheus.Labels{"dest": "/mnt/\uFFFDb"}, ""},
		{nil, "/mnt/backup", 2, 4, prometheus.Labels{"dest": "/mnt/backup", "shard": "2/4"}, ""},
		{[]string{"job=nightly"}, "/mnt/backup", 0, 1, prometheus.Labels{"job": "nightly"}, ""},
		{[]string{"job=nightly", "site=a=b, c"}, "/mnt/b", 1, 2, prometheus.Labels{"job": "nightly", "site": "a=b, c", "shard": "1/2"}, ""},
		{[]string{"dest=home"}, "/mnt/backup", 0, 1, prometheus.Labels{"dest": "home"}, ""},
		{[]string{"_x1=é"}, "/d", 0, 1, prometheus.Labels{"_x1": "é"}, ""},
		{[]string{"job"}, "/d", 0, 1, nil, `--metrics-label "job": want NAME=VALUE`},
		{[]string{"1job=x"}, "/d", 0, 1, nil, `--metrics-label "1job=x": "1job" is not a Prometheus label name`},
		{[]string{"a-b=x"}, "/d", 0, 1, nil, `--metrics-label "a-b=x": "a-b" is not a Prometheus label name`},
		{[]string{"=x"}, "/d", 0, 1, nil, `--metrics-label "=x": "" is not a Prometheus label name`},
		{[]string{"__name__=x"}, "/d", 0, 1, nil, `--metrics-label "__name__=x": names that start with __ are Prometheus' own`},
		{[]string{"status=x"}, "/d", 0, 1, nil, `--metrics-label "status=x": prsync sets the label status itself`},
		{[]string{"state=x"}, "/d", 0, 1, nil, `--metrics-label "state=x": prsync sets the label state itself`},
		{[]string{"shard=x"}, "/d", 0, 1, nil, `--metrics-label "shard=x": prsync sets the label shard itself`},
		{[]string{"job="}, "/d", 0, 1, nil, `--metrics-label "job=": want a value: to Prometheus an empty label is no label`},
		{[]string{"job=\xff"}, "/d", 0, 1, nil, `--metrics-label "job=\xff": the value is not valid UTF-8`},
		{[]string{"job=a", "job=b"}, "/d", 0, 1, nil, `--metrics-label job is given twice`},
	}
	for _, tt := range tests {
		got, err := metricsLabels(tt.given, tt.dest, tt.shard, tt.shards)
		switch {
		case tt.err != "":
			var ce *cmdline.Error
			if !errors.As(err, &ce) || ce.Code != ExitUsage || ce.Msg != tt.err || ce.Hint == "" && !strings.Contains(tt.err, "UTF-8") {
				t.Errorf("%q: error %#v, want %q (exit 1, with a hint)", tt.given, err, tt.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.given, err)
		case !maps.Equal(got, tt.want):
			t.Errorf("%q, %s, %d/%d: labels %v, want %v", tt.given, tt.dest, tt.shard, tt.shards, got, tt.want)
		}
	}
}
