package cli

import (
	"context"
	"sync"

	"github.com/prsync/prsync/bw"
	"github.com/prsync/prsync/exec"
)

// bwLimit is the run's total bandwidth limit (--bwlimit, prsync ctl bwlimit): the bw
// controller keeps the rsyncs' total to it by pausing and continuing groups, and every
// new rsync gets rsync's own --bwlimit at the whole limit, so one alone uses all of it.
// Where the system does not show what each group writes (outside Linux), each new rsync
// gets an equal share of the limit instead, which the tail of a run leaves unused.
type bwLimit struct {
	c    *bw.Controller
	pool *exec.Pool

	mu   sync.Mutex
	spec string // as set, canonical; "off" for none
}

// newBWLimit prepares the limit from --bwlimit ("" for none).
func newBWLimit(spec string, pool *exec.Pool) (*bwLimit, error) {
	s, err := bw.ParseSchedule(orOff(spec))
	if err != nil {
		return nil, err
	}
	b := &bwLimit{pool: pool, spec: specOf(s)}
	b.c = &bw.Controller{Schedule: s}
	b.c.Target = bwTarget{pool: pool, limited: func() bool { _, unlimited := b.c.Limit(); return !unlimited }}
	pool.BWArg = b.rsyncArg
	return b, nil
}

func orOff(s string) string {
	if s == "" {
		return "off"
	}
	return s
}

func specOf(s bw.Schedule) string {
	if s.IsZero() {
		return "off"
	}
	return s.String()
}

// rsyncArg is the --bwlimit of a new rsync, and its rate in bytes per second.
func (b *bwLimit) rsyncArg() (string, float64) {
	rate, unlimited := b.c.Limit()
	if unlimited {
		return "", 0
	}
	if !exec.IOMeasured() {
		rate = max(rate/float64(b.pool.Limit()), bw.MinRate)
	} else {
		// a shade under the limit: rsync's own limiter runs a little over its rate, and a
		// lone rsync must not drain the bucket into the pauses that keep the total
		rate = max(rate*capShare, bw.MinRate)
	}
	return bw.RsyncArg(rate), float64(rateOfArg(rate))
}

// capShare is each rsync's own --bwlimit, as a share of the total limit.
const capShare = 0.95

// rateOfArg is the rate rsync runs at for RsyncArg(rate): whole KiB per second, up.
func rateOfArg(rate float64) int64 {
	k := int64(rate+1023) / 1024
	return k * 1024
}

func (b *bwLimit) set(spec string) (old, new string, err error) {
	s, err := bw.ParseSchedule(spec)
	if err != nil {
		return "", "", err
	}
	b.mu.Lock()
	old, b.spec = b.spec, specOf(s)
	new = b.spec
	b.mu.Unlock()
	b.c.SetSchedule(s)
	return old, new, nil
}

func (b *bwLimit) describe() (set, now string) {
	b.mu.Lock()
	set = b.spec
	b.mu.Unlock()
	rate, unlimited := b.c.Limit()
	if unlimited {
		return set, "off"
	}
	return set, bw.FormatRate(rate)
}

func (b *bwLimit) limit() float64 {
	rate, unlimited := b.c.Limit()
	if unlimited {
		return 0
	}
	return rate
}

// run holds the limit until ctx ends; changes of the limit in force go to report.
func (b *bwLimit) run(ctx context.Context, report func(bw.Change)) {
	if !exec.IOMeasured() {
		return // the shares given to each new rsync are all there is
	}
	b.c.OnChange = report
	b.c.Run(ctx)
}

// bwTarget is the pool as the bandwidth limit sees it.
type bwTarget struct {
	pool    *exec.Pool
	limited func() bool
}

func (t bwTarget) Groups() []bw.GroupIO {
	gs := t.pool.BWGroups(t.limited()) // without a limit, spare the reading of /proc
	out := make([]bw.GroupIO, len(gs))
	for i, g := range gs {
		out[i] = bw.GroupIO{ID: g.Chunk, Started: g.Started, Bytes: g.Moved, Cap: g.Cap, PausedByOthers: g.Held}
	}
	return out
}

func (t bwTarget) PauseBW(id int) error  { return t.pool.PauseBW(id) }
func (t bwTarget) ResumeBW(id int) error { return t.pool.ResumeBW(id) }
