package exec

import "sync"

// What the pool has moved: the bytes its groups wrote, and the files rsync logged.

// ioMeter accumulates what the running groups moved, from periodic readings of what
// their processes wrote. A byte is written more than once on its way (the sender into
// the pipe, the receiver into the file; rsync into ssh, ssh into the socket), so each
// reading counts, per group, the one process that wrote the most since the last one.
type ioMeter struct {
	mu    sync.Mutex
	last  map[int]uint64 // pid -> bytes written at the last reading
	moved map[int]int64  // pgid -> bytes moved, cumulative, while the group lives
	total uint64
	// ended are groups that ended since the last BWGroups, with what they moved in all:
	// the readings miss what a group wrote after the last one, and its rsync's log says
	ended []BWGroup
}

// finish closes the books of a group that ended: it moved at least the file bytes its
// rsync logged; it is reported once more, ended, so the bandwidth limit charges the rest.
func (m *ioMeter) finish(g BWGroup, pgid int, logged int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	moved := m.moved[pgid]
	if logged > moved {
		m.total += uint64(logged - moved)
		moved = logged
	}
	delete(m.moved, pgid)
	g.Moved = moved
	m.ended = append(m.ended, g)
}

// Progress is how much the pool has moved so far, cumulative: what rsync logged (files
// and their bytes, at the end of each file) and, where the system shows it, the bytes its
// processes wrote (IOBytes, which grows while a big file is still on its way). Refused
// counts the sessions the far side refused, and Accepted is what it accepted at the last
// refusal (refusal.FarSide.Refusals).
type Progress struct {
	LoggedFiles, LoggedBytes int64
	IOBytes                  int64
	IOMeasured               bool
	Refused                  int64
	Accepted                 int
}

// MeasureIO reads what the running groups have written since the previous call; call it
// often (ten times a second) for the figures to be close.
func (p *Pool) MeasureIO() {
	if !ioMeasured {
		return
	}
	pg := map[int]bool{}
	for _, pr := range p.Procs() {
		pg[pr.PID] = true
	}
	now := groupWrites(pg)
	m := &p.meter
	m.mu.Lock()
	defer m.mu.Unlock()
	best := map[int]uint64{}
	last := make(map[int]uint64, len(now))
	for pid, w := range now {
		last[pid] = w.bytes
		d := w.bytes // a process seen for the first time: all it wrote is new
		if prev, ok := m.last[pid]; ok {
			d = 0
			if w.bytes >= prev {
				d = w.bytes - prev
			}
		}
		best[w.pgid] = max(best[w.pgid], d)
	}
	if m.moved == nil {
		m.moved = map[int]int64{}
	}
	for g, d := range best {
		m.moved[g] += int64(d)
		m.total += d
	}
	m.last = last
}

// Moved returns the bytes each running group has moved since it started (by the leader's
// PID), as MeasureIO last read them.
func (p *Pool) Moved() map[int]int64 {
	m := &p.meter
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int]int64, len(m.moved))
	for g, b := range m.moved {
		out[g] = b
	}
	return out
}

// Progress returns a snapshot.
func (p *Pool) Progress() Progress {
	p.init()
	p.meter.mu.Lock()
	io := p.meter.total
	p.meter.mu.Unlock()
	refused, accepted := p.Plan.Refusals()
	return Progress{
		LoggedFiles: p.loggedFiles.Load(), LoggedBytes: p.loggedBytes.Load(),
		IOBytes: int64(io), IOMeasured: ioMeasured,
		Refused: refused, Accepted: accepted,
	}
}

// InFlight returns the file bytes that running rsyncs have logged so far.
func (p *Pool) InFlight() int64 { return p.inflight.Load() }
