package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/prsync/prsync/books"
	"github.com/prsync/prsync/internal/cmdline"
	"github.com/prsync/prsync/rsync"
)

// metrics keeps a Prometheus text-format file (--metrics-file) up to date for
// node_exporter's textfile collector: written to a temp file and renamed, first by Open
// (once replaceable has passed, before anything is copied: a path that cannot be written
// stops the run), then every interval and once more at the end. A write that fails later is said once; the file
// keeps its last figures until a write succeeds, and the last write, if the temp file
// cannot be made, writes the file in place, so that it says the run ended when it can. It
// is a printer of the books: every value is read from the snapshot it was last given.
//
// Every series carries the run's labels (metricsLabels), so that the files of several
// runs in one textfile directory never hold the same series, and the time of the write
// (prsync_last_update_timestamp_seconds), so that a run that died without its last write
// (SIGKILL) shows as one that stopped updating.
type metrics struct {
	books.Quiet // a printer of the snapshots alone

	path   string
	reg    *prometheus.Registry
	stderr io.Writer
	failed bool             // a write failed (said once)
	now    func() time.Time // the clock of prsync_last_update_timestamp_seconds
	at     time.Time        // the time of the write under way

	s         books.Snapshot
	rate      float64 // bytes per second over the last interval
	lastBytes int64
	lastAt    float64 // elapsed seconds at the last write
}

// newMetrics returns the metrics file at path, whose series carry labels (metricsLabels)
// and which is written every interval.
func newMetrics(path string, labels prometheus.Labels, interval time.Duration, stderr io.Writer) *metrics {
	m := &metrics{path: path, reg: prometheus.NewRegistry(), stderr: stderr, now: time.Now}
	s := &m.s
	with := func(more prometheus.Labels) prometheus.Labels {
		all := prometheus.Labels{}
		for k, v := range labels {
			all[k] = v
		}
		for k, v := range more {
			all[k] = v
		}
		return all
	}
	counter := func(name, help string, more prometheus.Labels, v func() float64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: with(more)}, v))
	}
	gauge := func(name, help string, more prometheus.Labels, v func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: with(more)}, v))
	}
	for status, v := range map[string]*int64{"transferred": &s.Transferred, "up_to_date": &s.UpToDate,
		"failed": &s.Failed, "vanished": &s.Vanished, "not_done": &s.NotDone} {
		counter("prsync_files_total", "Input paths settled, by outcome.", prometheus.Labels{"status": status},
			func() float64 { return float64(*v) })
	}
	counter("prsync_files_read_total", "Input paths read (after --shard).", nil, func() float64 { return float64(s.Files) })
	counter("prsync_bytes_read_total", "Bytes of the regular files read.", nil, func() float64 { return float64(s.Bytes) })
	counter("prsync_bytes_transferred_total", "File bytes proven transferred.", nil, func() float64 { return float64(s.BytesTransferred) })
	gauge("prsync_rate_bytes_per_second", "File bytes transferred per second over the last interval.", nil, func() float64 { return m.rate })
	gauge("prsync_files_queued", "Paths read and waiting for an rsync.", nil, func() float64 { return float64(s.Queued) })
	for state, v := range map[string]*int{"running": &s.Running, "paused": &s.Suspended} {
		gauge("prsync_rsyncs", "rsync process groups, running or paused (throttle, bandwidth limit, Ctrl-Z, live control).",
			prometheus.Labels{"state": state}, func() float64 { return float64(*v) })
	}
	gauge("prsync_jobs_limit", "The number of rsyncs allowed at once.", nil, func() float64 { return float64(s.Jobs) })
	gauge("prsync_bwlimit_bytes_per_second", "The total bandwidth limit in force; 0 when there is none.", nil,
		func() float64 { return s.BWRate })
	counter("prsync_suspended_seconds_total", "Group-seconds rsyncs spent paused by the CPU throttle.", nil,
		func() float64 { return s.SecondsSuspended })
	gauge("prsync_input_done", "1 once the input has been read to its end.", nil, func() float64 {
		if s.InputDone {
			return 1
		}
		return 0
	})
	gauge("prsync_up", "1 while prsync runs, 0 after it has ended.", nil, func() float64 {
		if s.End != nil {
			return 0
		}
		return 1
	})
	gauge("prsync_exit_code", "prsync's exit code once it has ended; -1 while it runs.", nil, func() float64 {
		if s.End != nil {
			return float64(s.End.ExitCode)
		}
		return -1
	})
	gauge("prsync_max_duration_reached", "1 once the --max-duration time window has ended: no rsync starts any more.", nil, func() float64 {
		if s.MaxDurationReached || s.End != nil && s.End.MaxDurationReached {
			return 1
		}
		return 0
	})
	gauge("prsync_last_update_timestamp_seconds", "When prsync last wrote this file, in seconds since the Unix epoch.", nil,
		func() float64 { return float64(m.at.Unix()) + float64(m.at.Nanosecond())/1e9 })
	gauge("prsync_update_interval_seconds", "How often prsync writes this file while it runs (--throttle-interval).", nil,
		func() float64 { return interval.Seconds() })
	return m
}

// open writes the file with the figures of a run that has just begun (prsync_up 1,
// nothing settled yet), and says why it cannot.
func (m *metrics) open() error { return m.writeFile(false) }

// Update writes the file.
func (m *metrics) Update(s books.Snapshot) { m.write(s, false) }

// Finish writes the file once more, with the exit code.
func (m *metrics) Finish(s books.Snapshot) { m.write(s, true) }

// write updates the rate and writes the file, and says once when it cannot.
func (m *metrics) write(s books.Snapshot, last bool) {
	m.s = s
	bytes := s.BytesDone()
	if dt := s.Elapsed - m.lastAt; dt > 0 {
		m.rate = float64(bytes-m.lastBytes) / dt
	}
	m.lastBytes, m.lastAt = bytes, s.Elapsed
	if err := m.writeFile(last); err != nil && !m.failed {
		m.failed = true
		cmdline.Warnf(m.stderr, "--metrics-file %s: %v; it keeps the figures of its last write until a write succeeds", m.path, err)
	}
}

// writeFile writes the figures to a temp file beside the path and renames it over the
// path, so that a reader never sees half a file; with inPlace, when that fails (a
// directory that takes no new file, a path that is a mount point), it writes the path
// itself. Its errors name the step, not the temp file, which the user never named.
func (m *metrics) writeFile(inPlace bool) error {
	var buf bytes.Buffer
	m.at = m.now()
	mfs, err := m.reg.Gather()
	if err != nil {
		return err
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			return err
		}
	}
	err = m.replace(buf.Bytes())
	if err != nil && inPlace && os.WriteFile(m.path, buf.Bytes(), 0o644) == nil {
		return nil
	}
	return err
}

// replace writes b to a temp file beside the path and renames it over the path.
func (m *metrics) replace(b []byte) error {
	dir := filepath.Dir(m.path)
	tmp, err := os.CreateTemp(dir, filepath.Base(m.path))
	if err != nil {
		return fmt.Errorf("cannot create a file in %s: %w", dir, bare(err))
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if err2 := tmp.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err != nil {
		return fmt.Errorf("cannot write a file in %s: %w", dir, bare(err))
	}
	if err := os.Rename(tmp.Name(), m.path); err != nil {
		return fmt.Errorf("cannot replace it: %w", bare(err))
	}
	return nil
}

// bare returns the cause of an error that names a file (the temp file's name means
// nothing to the user).
func bare(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}

// The labels of the metrics file.
//
// node_exporter's textfile collector serves the series of every *.prom file of its
// directory as one set, and of two series with the same name and labels it serves one and
// logs an error for the other ("collected before with the same name and label values"): two
// cron jobs writing their --metrics-file into one directory must give their series
// different labels. Each series carries, besides the status or state label of its own:
//
//   - the --metrics-label NAME=VALUE pairs given, or, when none is given, dest: DEST (its
//     absolute path when local, as given when remote). It stays the same from one run of a
//     cron job to the next and differs between two jobs into two DESTs. A DEST that changes
//     every run (a dated directory) would make new series every run: --metrics-label
//     job=nightly replaces it.
//   - shard: K/N, with --shard, also with --metrics-label: the instances of one array job
//     run the same command line, and must not collide either.

// labelName is a Prometheus label name as node_exporter 1.5 and the text format read it.
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// ownLabels are the labels prsync sets itself, which --metrics-label may not name.
var ownLabels = []string{"status", "state", "shard"}

// metricsLabels returns the labels of every series of the metrics file, from the
// --metrics-label pairs given, DEST (local: its absolute path) and the shard (shards > 1).
func metricsLabels(given []string, dest string, shard, shards int) (prometheus.Labels, error) {
	labels := prometheus.Labels{}
	const hint = "write --metrics-label NAME=VALUE, with a name of letters, digits and _ that does not start with a digit, for example --metrics-label job=nightly"
	for _, kv := range given {
		name, value, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return nil, usage(fmt.Sprintf("--metrics-label %q: want NAME=VALUE", kv), hint)
		case !labelName.MatchString(name):
			return nil, usage(fmt.Sprintf("--metrics-label %q: %q is not a Prometheus label name", kv, name), hint)
		case strings.HasPrefix(name, "__"):
			return nil, usage(fmt.Sprintf("--metrics-label %q: names that start with __ are Prometheus' own", kv), hint)
		case slices.Contains(ownLabels, name):
			return nil, usage(fmt.Sprintf("--metrics-label %q: prsync sets the label %s itself", kv, name),
				"pick another name; prsync's own labels are "+strings.Join(ownLabels, ", "))
		case value == "":
			return nil, usage(fmt.Sprintf("--metrics-label %q: want a value: to Prometheus an empty label is no label", kv), hint)
		case !utf8.ValidString(value):
			return nil, usage(fmt.Sprintf("--metrics-label %q: the value is not valid UTF-8", kv), "")
		}
		if _, dup := labels[name]; dup {
			return nil, usage(fmt.Sprintf("--metrics-label %s is given twice", name), "give each label once")
		}
		labels[name] = value
	}
	if len(labels) == 0 {
		if !rsync.IsRemote(dest) {
			if abs, err := filepath.Abs(dest); err == nil {
				dest = abs
			}
		} else {
			dest = trimSlashes(dest)
		}
		labels["dest"] = strings.ToValidUTF8(dest, "\uFFFD")
	}
	if shards > 1 {
		labels["shard"] = strconv.Itoa(shard) + "/" + strconv.Itoa(shards)
	}
	return labels, nil
}
