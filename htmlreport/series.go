package htmlreport

// maxBuckets bounds every series: a six-hour run at one progress event a second keeps at
// most this many points per line, whatever the run's length.
const maxBuckets = 2000

// firstWidth is the width of a series' buckets until the run outgrows maxBuckets of them.
const firstWidth = 0.01

// bucket is what a series kept of the samples in one stretch of time.
type bucket struct {
	n             int
	sum, min, max float64 // of the values
	tsum          float64 // of the times, for the mean time
	last, lastT   float64 // the latest sample's value and time
}

func (b *bucket) add(t, v float64) {
	if b.n == 0 || v < b.min {
		b.min = v
	}
	if b.n == 0 || v > b.max {
		b.max = v
	}
	if b.n == 0 || t >= b.lastT {
		b.last, b.lastT = v, t
	}
	b.n++
	b.sum += v
	b.tsum += t
}

// merge folds the later bucket c into b.
func (b *bucket) merge(c bucket) {
	switch {
	case c.n == 0:
		// b stays, though a span series may still add c's sum
		b.sum += c.sum
		return
	case b.n == 0:
		c.sum += b.sum
		*b = c
		return
	}
	b.min, b.max = min(b.min, c.min), max(b.max, c.max)
	if c.lastT >= b.lastT {
		b.last, b.lastT = c.last, c.lastT
	}
	b.n += c.n
	b.sum += c.sum
	b.tsum += c.tsum
}

// series is a time series in at most maxBuckets buckets of equal width from time 0: when
// a sample falls past the last bucket, pairs of buckets merge and the width doubles. Its
// memory is bounded, and it needs no length of the run in advance.
type series struct {
	width   float64
	buckets []bucket
}

func newSeries() *series { return &series{width: firstWidth} }

// index returns the bucket of time t, growing and merging the buckets to hold it.
func (s *series) index(t float64) int {
	if t < 0 || t != t {
		t = 0
	}
	i := int(t / s.width)
	for i >= maxBuckets {
		s.halve()
		i = int(t / s.width)
	}
	if i >= len(s.buckets) {
		s.buckets = append(s.buckets, make([]bucket, i+1-len(s.buckets))...)
	}
	return i
}

func (s *series) halve() {
	n := (len(s.buckets) + 1) / 2
	for i := range n {
		b := s.buckets[2*i]
		if 2*i+1 < len(s.buckets) {
			b.merge(s.buckets[2*i+1])
		}
		s.buckets[i] = b
	}
	clear(s.buckets[n:])
	s.buckets = s.buckets[:n]
	s.width *= 2
}

// add records the value v at time t (seconds since the start).
func (s *series) add(t, v float64) { s.buckets[s.index(t)].add(t, v) }

// addSpan adds weight times the time of [t0, t1] that falls in each bucket to the bucket's
// sum: paused rsync-seconds, for a series whose points are sums per bucket.
func (s *series) addSpan(t0, t1, weight float64) {
	if !(t1 > t0) {
		return
	}
	if t0 < 0 {
		t0 = 0
	}
	s.index(t1) // grow first: the width is then fixed for the loop
	for i := s.index(t0); i < len(s.buckets); i++ {
		lo, hi := max(t0, float64(i)*s.width), min(t1, float64(i+1)*s.width)
		if hi <= lo {
			if float64(i)*s.width >= t1 {
				break
			}
			continue
		}
		s.buckets[i].sum += (hi - lo) * weight
	}
}

// point is one point of a line: its time, value and the range of the values behind it.
type point struct{ t, v, lo, hi float64 }

// means returns a point per bucket with samples: the mean value at the mean time, with
// the bucket's min and max.
func (s *series) means() []point {
	var out []point
	for _, b := range s.buckets {
		if b.n > 0 {
			out = append(out, point{t: b.tsum / float64(b.n), v: b.sum / float64(b.n), lo: b.min, hi: b.max})
		}
	}
	return out
}

// rates reads the series as a running total (bytes or files done) and returns its rate
// of change per second between the latest samples of successive buckets, from 0 at time 0.
// A total that falls (a retried chunk's bytes taken back) gives 0, not a negative rate.
func (s *series) rates() []point {
	var out []point
	prevV, prevT := 0.0, 0.0
	for _, b := range s.buckets {
		if b.n == 0 || b.lastT <= prevT {
			if b.n > 0 {
				prevV = b.last
			}
			continue
		}
		r := max(0, (b.last-prevV)/(b.lastT-prevT))
		out = append(out, point{t: b.lastT, v: r, lo: r, hi: r})
		prevV, prevT = b.last, b.lastT
	}
	return out
}

// perSecond returns, for each bucket up to time end, its sum divided by its width: the
// mean number of rsyncs paused over the bucket, for a series filled by addSpan.
func (s *series) perSecond(end float64) []point {
	if len(s.buckets) == 0 {
		return nil
	}
	s.index(end)
	var out []point
	for i, b := range s.buckets {
		lo := float64(i) * s.width
		if lo > end {
			break
		}
		v := b.sum / s.width
		out = append(out, point{t: lo + s.width/2, v: v, lo: v, hi: v})
	}
	return out
}
