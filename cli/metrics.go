package cli

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics keeps a Prometheus text-format file (--metrics-file) up to date for
// node_exporter's textfile collector: written to a temp file and renamed, every interval
// and once more at the end. The reporter owns it: every value is read from the books.
type metrics struct {
	path string
	reg  *prometheus.Registry
	rep  *reporter

	up, exitCode  float64
	rate          float64 // bytes per second over the last interval
	lastBytes     int64
	lastAt        float64 // elapsed seconds at the last write
	bwLimit       func() float64
	suspendedSecs func() float64
}

func newMetrics(path string, rep *reporter) *metrics {
	m := &metrics{path: path, reg: prometheus.NewRegistry(), rep: rep, up: 1, exitCode: -1}
	c := &rep.c
	counter := func(name, help string, labels prometheus.Labels, v func() float64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, v))
	}
	gauge := func(name, help string, labels prometheus.Labels, v func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, v))
	}
	for status, v := range map[string]*int64{"transferred": &c.Transferred, "up_to_date": &c.UpToDate,
		"failed": &c.Failed, "vanished": &c.Vanished, "not_done": &c.NotDone} {
		counter("prsync_files_total", "Input paths settled, by outcome.", prometheus.Labels{"status": status},
			func() float64 { return float64(*v) })
	}
	counter("prsync_files_read_total", "Input paths read (after --shard).", nil, func() float64 { return float64(c.Files) })
	counter("prsync_bytes_read_total", "Bytes of the regular files read.", nil, func() float64 { return float64(c.Bytes) })
	counter("prsync_bytes_transferred_total", "File bytes proven transferred.", nil, func() float64 { return float64(c.BytesTransferred) })
	gauge("prsync_rate_bytes_per_second", "File bytes transferred per second over the last interval.", nil, func() float64 { return m.rate })
	gauge("prsync_files_queued", "Paths read and waiting for an rsync.", nil, func() float64 { return float64(c.Queued) })
	for state, running := range map[string]bool{"running": true, "paused": false} {
		gauge("prsync_rsyncs", "rsync process groups, running or paused (throttle, bandwidth limit, Ctrl-Z, live control).",
			prometheus.Labels{"state": state}, func() float64 {
				r, p := rep.pool.Counts()
				if running {
					return float64(r)
				}
				return float64(p)
			})
	}
	gauge("prsync_jobs_limit", "The number of rsyncs allowed at once.", nil, func() float64 { return float64(rep.pool.Limit()) })
	gauge("prsync_bwlimit_bytes_per_second", "The total bandwidth limit in force; 0 when there is none.", nil,
		func() float64 { return m.bwLimit() })
	counter("prsync_suspended_seconds_total", "Group-seconds rsyncs spent paused by the CPU throttle.", nil,
		func() float64 { return m.suspendedSecs() })
	gauge("prsync_input_done", "1 once the input has been read to its end.", nil, func() float64 {
		if rep.inDone() {
			return 1
		}
		return 0
	})
	gauge("prsync_up", "1 while prsync runs, 0 after it has ended.", nil, func() float64 { return m.up })
	gauge("prsync_exit_code", "prsync's exit code once it has ended; -1 while it runs.", nil, func() float64 { return m.exitCode })
	m.bwLimit = func() float64 { return 0 }
	m.suspendedSecs = func() float64 { return 0 }
	return m
}

// write updates the rate and writes the file.
func (m *metrics) write(elapsed float64) error {
	bytes := m.rep.c.BytesTransferred + m.rep.pool.InFlight()
	if dt := elapsed - m.lastAt; dt > 0 {
		m.rate = float64(bytes-m.lastBytes) / dt
	}
	m.lastBytes, m.lastAt = bytes, elapsed
	return prometheus.WriteToTextfile(m.path, m.reg)
}
