package tune

import "math"

// ringSize is how many windows a ring keeps: 24 s of 2 s windows, long
// enough to average the noise, short enough to follow the workload.
const ringSize = 12

// ring keeps the last windows measured at one limit: the log of their rate
// and the share of the rate due to files.
type ring struct {
	x, share [ringSize]float64 // oldest first
	n        int
}

// push adds a window, dropping the oldest if the ring is full.
func (r *ring) push(x, share float64) {
	if r.n == ringSize {
		copy(r.x[:], r.x[1:])
		copy(r.share[:], r.share[1:])
		r.n--
	}
	r.x[r.n], r.share[r.n] = x, share
	r.n++
}

func (r *ring) reset() { r.n = 0 }

// shift adds d to every log rate.
func (r *ring) shift(d float64) {
	for i := range r.n {
		r.x[i] += d
	}
}

// mean returns the mean log rate and share of windows [from, to), oldest
// first; from < to.
func (r *ring) mean(from, to int) (x, share float64) {
	for i := from; i < to; i++ {
		x += r.x[i]
		share += r.share[i]
	}
	k := float64(to - from)
	return x / k, share / k
}

// keepNewer keeps, of the last k windows, the newest and the run before it
// that is closer to their mean than to the mean of the older windows: the
// windows after a change. It needs more than k windows.
func (r *ring) keepNewer(k int) {
	rx, _ := r.mean(r.n-k, r.n)
	ox, _ := r.mean(0, r.n-k)
	keep := 1
	for keep < k && math.Abs(r.x[r.n-1-keep]-rx) < math.Abs(r.x[r.n-1-keep]-ox) {
		keep++
	}
	copy(r.x[:], r.x[r.n-keep:r.n])
	copy(r.share[:], r.share[r.n-keep:r.n])
	r.n = keep
}
