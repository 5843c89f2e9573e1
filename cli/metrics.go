package cli

import (
	"io"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prsync/prsync/books"
	"github.com/prsync/prsync/internal/cmdline"
)

// metrics keeps a Prometheus text-format file (--metrics-file) up to date for
// node_exporter's textfile collector: written to a temp file and renamed, every interval
// and once more at the end. It is a printer of the books: every value is read from the
// snapshot it was last given.
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

// Update writes the file.
func (m *metrics) Update(s books.Snapshot) { m.write(s) }

// Finish writes the file once more, with the exit code.
func (m *metrics) Finish(s books.Snapshot) { m.write(s) }

// write updates the rate and writes the file, and says once when it cannot.
func (m *metrics) write(s books.Snapshot) {
	m.s = s
	bytes := s.BytesDone()
	if dt := s.Elapsed - m.lastAt; dt > 0 {
		m.rate = float64(bytes-m.lastBytes) / dt
	}
	m.lastBytes, m.lastAt = bytes, s.Elapsed
	if err := prometheus.WriteToTextfile(m.path, m.reg); err != nil && !m.failed {
		m.failed = true
		cmdline.Warnf(m.stderr, "--metrics-file: %v", err)
	}
}
