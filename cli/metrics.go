package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/prsync/prsync/books"
	"github.com/prsync/prsync/internal/cmdline"
)

// metrics keeps a Prometheus text-format file (--metrics-file) up to date for
// node_exporter's textfile collector: written to a temp file and renamed, first by Open
// (once replaceable has passed, before anything is copied: a path that cannot be written
// stops the run), then every interval and once more at the end. A write that fails later is said once; the file
// keeps its last figures until a write succeeds, and the last write, if the temp file
// cannot be made, writes the file in place, so that it says the run ended when it can. It
// is a printer of the books: every value is read from the snapshot it was last given.
type metrics struct {
	path   string
	reg    *prometheus.Registry
	stderr io.Writer
	failed bool // a write failed (said once)

	s         books.Snapshot
	rate      float64 // bytes per second over the last interval
	lastBytes int64
	lastAt    float64 // elapsed seconds at the last write
}

func newMetrics(path string, stderr io.Writer) *metrics {
	m := &metrics{path: path, reg: prometheus.NewRegistry(), stderr: stderr}
	s := &m.s
	counter := func(name, help string, labels prometheus.Labels, v func() float64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, v))
	}
	gauge := func(name, help string, labels prometheus.Labels, v func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, v))
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
