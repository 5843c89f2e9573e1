package plan

import (
	"math"
	"time"

	"github.com/prsync/prsync/refusal"
	"github.com/prsync/prsync/tune"
)

// The simulator runs copies under a fake clock, each a Planner driven as the splitter and
// the pool drive it, on a simulated machine and far side:
//
//   - the splitter reads a list (at once, or streaming at a rate), holds paths while the
//     planner says to, and cuts chunks by its budgets, waves and idle wait;
//   - the pool starts chunks while the planner's MayStart allows, in Pick's order, a refused
//     chunk first, climbs a lowered limit while work waits, cuts the last chunk for idle
//     slots (TailCuts), and tells the planner every start, first line, end and refusal;
//   - an rsync pays a start, then each path costs its latency (round trips), its CPU (slowed
//     when the copies' rsyncs and other load want more CPUs than there are) and its bytes
//     (at most a per-stream cap, and a share of the link);
//   - a far side takes at most max sessions at once (over every copy sharing it), refuses the
//     others after a handshake, and frees a session's slot a moment after it ended;
//   - with -j auto, a sampler tells the planner every tick what moved and the CPU used.
//
// Time goes in steps of dt; every copy sees the same clock.

const dt = time.Millisecond

// workload is what a path costs an rsync.
type workload struct {
	cpu      float64           // CPU seconds a path
	lat      float64           // seconds a path waits, whatever else runs (round trips)
	size     func(i int) int64 // bytes of path i; nil: 0
	capBps   float64           // bytes/s of one stream at most; 0: none
	linkBps  float64           // bytes/s of all streams together; 0: none
	start    float64           // seconds of an rsync's start (fork, connect, file list)
	startCPU float64           // CPU seconds of a start
}

// machine is what the copies share: CPUs, other load on them, and an optional far side.
type machine struct {
	cpus  float64
	other float64 // CPUs busy with other work
	far   *farSide
}

// farSide is a daemon with max connections: sessions beyond max are refused after the
// handshake, and a session's slot is free only lag after it ended.
type farSide struct {
	max       func(t time.Duration) int
	handshake time.Duration
	lag       time.Duration
	held      int             // sessions holding a slot
	freeAt    []time.Duration // ends whose slots are not free yet
}

func (f *farSide) tick(t time.Duration) {
	keep := f.freeAt[:0]
	for _, e := range f.freeAt {
		if t >= e {
			f.held--
		} else {
			keep = append(keep, e)
		}
	}
	f.freeAt = keep
}

// chunk is a chunk cut by a simulated splitter.
type chunk struct {
	id    int
	sizes []int64
	bytes int64
	root  bool
	tries int // attempts so far
	free  int // refusals that did not count as retries
	ready time.Duration
}

// rsync is a simulated rsync on a chunk.
type rsync struct {
	c         *chunk
	started   time.Duration
	startLeft float64 // seconds of start left
	path      int     // the path it is on
	pathDone  float64 // share of it done
	first     time.Duration
	cpu       float64 // CPU seconds spent
	refuseAt  time.Duration
	refused   bool
	spoke     bool
}

// copySim is one copy: its planner, its splitter's and its pool's state, and what was seen.
type copySim struct {
	p    *Planner
	w    workload
	m    *machine
	auto bool

	// the input: n paths, all there at once (rate 0) or rate paths a second
	n     int
	rate  float64
	root  bool // the list begins with its root, ".", cut last as a chunk of its own
	wait  time.Duration
	begin time.Duration

	// the splitter
	read, next int // paths read; the next to place
	holding    bool
	until      time.Duration
	held       int
	cur        *chunk
	budget     Budget
	force      *Budget
	pending    *Budget
	lastPath   time.Duration
	ids        int
	cutDone    bool // every path is in a chunk
	rootSent   bool
	// the chunks that ended, in the order they did: their paths, their start and how long
	// their rsync ran; and when each rsync started, in order
	chunkFiles  []int
	chunkSecs   []float64
	chunkFrom   []time.Duration
	chunkRoot   []bool
	chunkStarts []time.Duration

	// the pool
	waiting  []*chunk
	requeued []*chunk
	backoff  []*chunk
	running  []*rsync
	busy     int // chunks started and not settled (retries included)
	nextTick time.Duration
	files    float64
	bytes    float64
	own      float64 // CPU seconds of the window being sampled
	ended    time.Duration
	done     bool
	failed   int

	// what was seen, per step of 100 ms: the limit, the rsyncs running, and the far side's
	// free slots
	limits  []int
	runs    []int
	free    []int
	refused int
}

// newCopy returns a copy of n paths under p.
func newCopy(p *Planner, w workload, m *machine, n int) *copySim {
	return &copySim{p: p, w: w, m: m, n: n, auto: p.cfg.Auto != nil, wait: p.cfg.Wait, ended: -1}
}

func (c *copySim) now(t time.Duration) time.Time { return t0.Add(t) }

func (c *copySim) size(i int) int64 {
	if c.w.size == nil {
		return 0
	}
	return c.w.size(i)
}

// input returns what the splitter tells the planner.
func (c *copySim) input(placing int) Input {
	return Input{Read: int64(c.read), EOF: c.read == c.n, Left: int64(c.read - c.next + placing), Held: c.held}
}

// readUpTo reads the paths the input holds by t.
func (c *copySim) readUpTo(t time.Duration) {
	r := c.n
	if c.rate > 0 {
		r = min(c.n, int(c.rate*(t-c.begin).Seconds()))
	}
	if r > c.read {
		c.read, c.lastPath = r, t
	}
}

// split runs the simulated splitter at t.
func (c *copySim) split(t time.Duration) {
	if c.cutDone {
		return
	}
	read, eof := c.read, c.read == c.n
	c.readUpTo(t)
	if c.holding {
		c.held = c.read - c.next
		// ask again as the splitter does: at the time the planner said, on its news, when
		// paths came or the input's end was read
		news := false
		select {
		case <-c.p.Wake():
			news = true
		default:
		}
		if news || c.read > read || c.read == c.n && !eof || c.until > 0 && t >= c.until {
			c.follow(t, c.p.Next(c.now(t), c.input(0)))
		}
	}
	for !c.holding && c.next < c.read {
		if !c.place(t) {
			break
		}
	}
	if c.holding {
		c.held = c.read - c.next
	}
	if c.cur != nil && !c.holding && (c.read == c.n && c.next == c.n || c.wait > 0 && t-c.lastPath >= c.wait) {
		c.flush(t)
	}
	if c.read == c.n && c.next == c.n && !c.holding {
		if c.cur != nil {
			c.flush(t)
		}
		if c.root && !c.rootSent {
			c.rootSent = true
			c.ids++
			c.waiting = append(c.waiting, &chunk{id: c.ids, root: true, sizes: []int64{0}})
		}
		c.cutDone = true
	}
}

// place puts path c.next into a chunk; false when the planner says to hold.
func (c *copySim) place(t time.Duration) bool {
	s := c.size(c.next)
	if c.cur != nil && c.budget.Over(len(c.cur.sizes)+1, c.cur.bytes+s) {
		c.flush(t)
	}
	if c.cur == nil {
		switch {
		case c.force != nil:
			c.budget = *c.force
		case c.pending != nil:
			c.budget, c.pending = *c.pending, nil
		default:
			st := c.p.Next(c.now(t), c.input(1))
			if st.Do != Cut {
				c.holding = true
				c.follow(t, st)
				return !c.holding
			}
			c.budget = st.Budget
		}
		c.ids++
		c.cur = &chunk{id: c.ids}
	}
	c.cur.sizes = append(c.cur.sizes, s)
	c.cur.bytes += s
	c.next++
	if c.budget.Reached(len(c.cur.sizes), c.cur.bytes) {
		c.flush(t)
	}
	return true
}

// follow does what the planner said about the paths held.
func (c *copySim) follow(t time.Duration, st Step) {
	switch st.Do {
	case Hold:
		c.holding = true
		c.until = 0
		if !st.Until.IsZero() {
			c.until = st.Until.Sub(t0)
		}
		return
	case Wave:
		c.holding, c.held = false, 0
		c.force = &st.Budget
		for c.next < c.read {
			c.place(t)
		}
		c.force = nil
		if st.Flush && c.cur != nil {
			c.flush(t)
		}
		return
	}
	c.holding, c.held = false, 0
	c.pending = &st.Budget
}

func (c *copySim) flush(t time.Duration) {
	c.p.Cut(c.cur.id, len(c.cur.sizes), c.cur.bytes)
	c.cur.ready = t
	c.waiting = append(c.waiting, c.cur)
	c.cur = nil
}

// pool runs the simulated pool at t.
func (c *copySim) pool(t time.Duration) {
	now := c.now(t)
	// refused chunks come back, first
	keep := c.backoff[:0]
	for _, ch := range c.backoff {
		if t >= ch.ready {
			c.requeued = append(c.requeued, ch)
		} else {
			keep = append(keep, ch)
		}
	}
	c.backoff = keep
	active := len(c.running)
	if len(c.waiting)+len(c.requeued) > 0 && active >= c.p.Limit() {
		c.p.Climb(now)
	}
	// as the pool: a chunk starts when it comes if a slot is free; what waits once the input
	// has ended is cut for the slots left
	c.start(t)
	if c.cutDone {
		c.cutTail(t)
		c.start(t)
	}
}

// start starts chunks while the planner allows, a refused one first, in Pick's order.
func (c *copySim) start(t time.Duration) {
	now := c.now(t)
	for c.p.MayStart(now, len(c.running)) {
		var ch *chunk
		switch {
		case len(c.requeued) > 0:
			ch, c.requeued = c.requeued[0], c.requeued[1:]
		default:
			ws := make([]Waiting, len(c.waiting))
			for i, w := range c.waiting {
				ws[i] = Waiting{ID: w.id, Bytes: w.bytes, Root: w.root}
			}
			i := Pick(ws, c.busy, c.cutDone)
			if i < 0 {
				return
			}
			ch = c.waiting[i]
			c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
			c.busy++
		}
		c.startRsync(t, ch)
	}
}

// cutTail cuts the biggest waiting chunk as the planner says, as the pool does.
func (c *copySim) cutTail(t time.Duration) {
	for {
		n := 0
		b := -1
		for i, w := range c.waiting {
			if !w.root {
				n++
				if b < 0 || w.bytes > c.waiting[b].bytes || w.bytes == c.waiting[b].bytes && len(w.sizes) > len(c.waiting[b].sizes) {
					b = i
				}
			}
		}
		if b < 0 {
			return
		}
		free := max(0, c.p.Limit()-len(c.running)-len(c.requeued)-len(c.backoff))
		var others []Work
		for i, w := range c.waiting {
			if i != b && !w.root {
				others = append(others, Work{Files: len(w.sizes), Bytes: w.bytes})
			}
		}
		for _, r := range c.running {
			others = append(others, Work{Files: len(r.c.sizes), Bytes: r.c.bytes, Ran: (t - r.started).Seconds()})
		}
		w := c.waiting[b]
		cuts := c.p.TailCuts(w.sizes, w.bytes, n, free, others)
		if len(cuts) == 0 {
			return
		}
		var parts []*chunk
		lo := 0
		for k := 0; k <= len(cuts); k++ {
			hi := len(w.sizes)
			if k < len(cuts) {
				hi = cuts[k]
			}
			c.ids++
			p := &chunk{id: c.ids, sizes: w.sizes[lo:hi], ready: w.ready}
			for _, s := range p.sizes {
				p.bytes += s
			}
			parts = append(parts, p)
			lo = hi
		}
		c.waiting = append(c.waiting[:b], append(parts, c.waiting[b+1:]...)...)
	}
}

func (c *copySim) startRsync(t time.Duration, ch *chunk) {
	ch.tries++
	r := &rsync{c: ch, started: t, startLeft: c.w.start}
	if ch.root {
		r.startLeft = c.w.start
	}
	c.p.Started(c.now(t), ch.id, ch.tries)
	if f := c.m.far; f != nil {
		if f.held >= f.max(t) {
			r.refused, r.refuseAt = true, t+f.handshake
		} else {
			f.held++
		}
	}
	c.chunkStarts = append(c.chunkStarts, t)
	c.running = append(c.running, r)
}

// step advances the copy's rsyncs by dt at t, with cpuSlow the factor a path's CPU takes
// longer by and streams the streams sharing the link.
func (c *copySim) step(t time.Duration, cpuSlow float64, streams int) {
	now := c.now(t)
	sec := dt.Seconds()
	all := c.running
	keep := c.running[:0]
	for i, r := range all {
		if r.refused {
			if t >= r.refuseAt {
				// the slots held now: those kept, and those not stepped yet
				c.refusedEnd(t, r, len(keep)+len(all)-i, append(append([]*rsync(nil), keep...), all[i+1:]...))
				continue
			}
			keep = append(keep, r)
			continue
		}
		if r.startLeft > 0 {
			r.startLeft -= sec
			if c.w.start > 0 {
				r.cpu += c.w.startCPU * sec / c.w.start
				c.own += c.w.startCPU * sec / c.w.start
			}
			keep = append(keep, r)
			continue
		}
		bw := math.Inf(1)
		if c.w.capBps > 0 {
			bw = c.w.capBps
		}
		if c.w.linkBps > 0 {
			bw = min(bw, c.w.linkBps/float64(max(streams, 1)))
		}
		left := sec
		for left > 0 && r.path < len(r.c.sizes) {
			b := float64(r.c.sizes[r.path])
			if r.c.root {
				b = 0
			}
			cost := c.w.lat + c.w.cpu*cpuSlow + b/bw
			if cost <= 0 {
				cost = 1e-9
			}
			need := (1 - r.pathDone) * cost
			use := min(left, need)
			r.pathDone += use / cost
			r.cpu += c.w.cpu * use / cost
			c.own += c.w.cpu * use / cost
			left -= use
			if r.pathDone >= 1-1e-9 {
				r.path++
				r.pathDone = 0
				c.files++
				c.bytes += b
				if !r.spoke {
					r.spoke, r.first = true, t
					c.p.Accepted()
				}
				if c.p.Watch(r.c.id) {
					c.p.Logged(now, r.c.id, r.path)
				}
			}
		}
		if r.path >= len(r.c.sizes) {
			c.end(t, r)
			continue
		}
		keep = append(keep, r)
	}
	c.running = keep
}

// refusedEnd ends a refused session: the planner learns, and the chunk waits to retry.
func (c *copySim) refusedEnd(t time.Duration, r *rsync, active int, others []*rsync) {
	now := c.now(t)
	c.refused++
	accepted := 0
	for _, o := range others {
		if !o.refused && c.p.Admitted(c.now(o.started), o.spoke, now) {
			accepted++
		}
	}
	d, _, _ := c.p.Refused(now, refusal.Session{Started: c.now(r.started), Active: active, Accepted: accepted, Stated: c.m.far.max(t)}, t-r.started)
	c.p.SessionEnded(now, false, accepted)
	c.p.Ended(now, End{ID: r.c.id, Attempt: r.c.tries, Files: len(r.c.sizes), Bytes: r.c.bytes, Seconds: (t - r.started).Seconds()})
	delay, ok := d.Retry(r.c.free, time.Second)
	if ok {
		r.c.free++
	} else {
		delay = time.Second << min(max(r.c.tries-r.c.free-1, 0), 5)
		if r.c.tries-r.c.free > 2 {
			c.failed++ // --retries 2 used up: the chunk's paths fail (here, it goes on)
		}
	}
	r.c.ready = t + delay
	c.backoff = append(c.backoff, r.c)
}

// end ends an rsync that copied its chunk.
func (c *copySim) end(t time.Duration, r *rsync) {
	now := c.now(t)
	if f := c.m.far; f != nil {
		f.freeAt = append(f.freeAt, t+f.lag)
	}
	accepted, others := 0, 0 // running, this one among them or not; the others
	for _, o := range c.running {
		if !o.refused && c.p.Admitted(c.now(o.started), o.spoke, now) {
			accepted++
			if o != r {
				others++
			}
		}
	}
	c.p.Peak(accepted, now)
	c.p.SessionEnded(now, true, others)
	first := 0.0
	if r.spoke {
		first = max((r.first - r.started).Seconds(), 1e-6)
	}
	secs := (t - r.started).Seconds()
	c.p.Ended(now, End{ID: r.c.id, Attempt: r.c.tries, Files: len(r.c.sizes), Bytes: r.c.bytes, Seconds: secs, First: first, CPU: r.cpu, OK: true, Settled: true})
	c.chunkFiles = append(c.chunkFiles, len(r.c.sizes))
	c.chunkSecs = append(c.chunkSecs, secs)
	c.chunkFrom = append(c.chunkFrom, r.started)
	c.chunkRoot = append(c.chunkRoot, r.c.root)
	c.busy--
}

// sample tells -j auto's planner what moved and the CPU used, every tick.
func (c *copySim) sample(t time.Duration, busy float64) {
	if !c.auto || t < c.nextTick {
		return
	}
	tick := c.p.cfg.Tick
	c.nextTick = t + tick
	own := c.own / tick.Seconds()
	c.own = 0
	c.p.Sampled(c.now(t), Sample{Running: len(c.running), Bytes: c.bytes, Files: c.files,
		Drained: c.cutDone && len(c.waiting)+len(c.requeued)+len(c.backoff) == 0,
		CPUs:    c.m.cpus, Busy: min(busy, c.m.cpus), Own: own}, true)
}

// finished reports whether every chunk has ended.
func (c *copySim) finished() bool {
	return c.cutDone && len(c.waiting)+len(c.requeued)+len(c.backoff)+len(c.running) == 0
}

// world runs copies together on m until they all end or limit passes; it returns the time
// each ended (-1: not by then).
type world struct {
	m      *machine
	copies []*copySim
}

func (w *world) run(limit time.Duration) {
	for t := time.Duration(0); t < limit; t += dt {
		if w.m.far != nil {
			w.m.far.tick(t)
		}
		all := true
		// the copies take turns at going first, as processes racing for a slot do
		first := int(t/dt) % len(w.copies)
		for k := range w.copies {
			c := w.copies[(first+k)%len(w.copies)]
			all = all && c.done
			if c.done || t < c.begin {
				continue
			}
			c.split(t)
			c.pool(t)
		}
		if all {
			return
		}
		// the CPUs the rsyncs want, uncontended, and the streams on the link
		want, streams := w.m.other, 0
		for _, c := range w.copies {
			for _, r := range c.running {
				if r.refused {
					continue
				}
				streams++
				if r.startLeft > 0 {
					if c.w.start > 0 {
						want += c.w.startCPU / c.w.start
					}
					continue
				}
				cost := c.w.lat + c.w.cpu
				if cost > 0 {
					want += c.w.cpu / cost
				}
			}
		}
		slow := max(1, want/w.m.cpus)
		for _, c := range w.copies {
			if c.done || t < c.begin {
				continue
			}
			c.step(t, slow, streams)
			c.sample(t, min(want, w.m.cpus))
			if t%(100*time.Millisecond) == 0 {
				c.limits = append(c.limits, c.p.Limit())
				c.runs = append(c.runs, len(c.running))
				if f := w.m.far; f != nil {
					c.free = append(c.free, f.max(t)-f.held)
				}
			}
			if c.finished() {
				c.done, c.ended = true, t
			}
		}
	}
}

// autoPlanner returns the planner of a copy with -j auto on a machine of cpus CPUs.
func autoPlanner(cpus int, start int) *Planner {
	pol := tune.DefaultPolicy(cpus)
	pol.Start = start
	tn, err := tune.New(pol)
	if err != nil {
		panic(err)
	}
	return New(Config{Target: 2 * time.Second, Files: 2000, Bytes: 128 << 20, Wait: time.Second,
		Jobs: start, MaxJobs: pol.Max, Auto: tn, CPUs: float64(cpus)})
}

// pinnedPlanner returns the planner of a copy with -j n.
func pinnedPlanner(cpus, n int) *Planner {
	return New(Config{Target: 2 * time.Second, Files: 2000, Bytes: 128 << 20, Wait: time.Second,
		Jobs: n, MaxJobs: max(32, n), CPUs: float64(cpus)})
}
