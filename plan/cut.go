package plan

import (
	"math"
	"time"

	"github.com/prsync/prsync/chunksize"
)

// # How big, and when
//
// A chunk aims at Config.Target of rsync work, by the cost model (package chunksize), within
// --chunk-files and --chunk-bytes; until a chunk has ended, chunks hold 32 paths. Without a
// target, chunks are cut at --chunk-files paths or --chunk-bytes bytes exactly.
//
// # The tail
//
// Once the input's end has been read, the paths left are known. When the budget would leave
// slots without a chunk, they are shared: every slot a part, but no part shorter than the
// cost model's MinPart as predicted, nor with fewer than minPartFiles paths, nor, whatever
// the model predicts, with more than tailPartFiles while a slot would go without (tailParts); while
// nothing is known yet, no part smaller than a part of a wave that took the slots. Before,
// the 905 paths left after a wave of 8 were cut into 8 parts of 114, a session each,
// against a daemon that took 3 (bench scenario 6). The same rule cuts a chunk that waits to
// start once the input has ended, when fewer chunks wait than slots are free (TailCuts): no
// slot idles while one rsync copies a long last chunk. It is the one rule of the tail: the
// opening's parts of a short list are its first use.

// Budget is what a chunk may hold (chunksize.Budget).
type Budget = chunksize.Budget

// Input is what the splitter has read and placed when it asks.
type Input struct {
	Read int64 // records read from the input so far
	EOF  bool  // the input's end has been read: Read is all there is
	// Left is the records read that are in no chunk yet: the one being placed, the paths
	// held, and the records not examined yet (some of which will not go to rsync)
	Left int64
	Held int // paths held: read and examined, in no chunk yet
}

// Do is what the splitter does with the paths it has read.
type Do int

const (
	// Cut: start a chunk with the Budget.
	Cut Do = iota
	// Hold the paths read, in no chunk, until Until (zero: until an event) or until Wake
	// signals, then ask again.
	Hold
	// Wave: cut the paths held into chunks of the Budget, and, with Flush, send the last
	// one at once; then ask as for any chunk.
	Wave
)

// Step is the answer to Next.
type Step struct {
	Do     Do
	Budget Budget
	Until  time.Time
	Flush  bool
	// Unread, with Hold, says to place no more records meanwhile: the first chunk waits for
	// the input's end as the reader reads ahead (Input.Read and EOF), not for paths
	// examined and held
	Unread bool
}

// cutting is the state of the tail; under Planner.mu.
type cutting struct {
	// tail is the paths of each part the last paths are cut into, once known (0 before);
	// opened says the opening cut them, and its parts hold for every chunk to the end
	tail   int
	opened bool
	// waveFloor is the paths of a part of a wave cut while the input streamed: until the
	// budget is timed, the chunks after it hold at least that many
	waveFloor int
	// the paths and bytes cut so far: what a path left holds, on average
	files, bytes int64
}

// Next answers the splitter, about to start a chunk or holding paths: the budget of the
// chunk to cut, to hold the paths a while, or to cut the paths held into a wave.
func (p *Planner) Next(now time.Time, in Input) Step {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.open.phase {
	case phaseStart:
		return p.start(now, in)
	case phaseProbe:
		return Step{Budget: Budget{Files: min(ProbeFiles, p.cfg.Files), Bytes: p.cfg.Bytes}}
	case phaseWait:
		return p.wait(now, in)
	}
	return Step{Budget: p.budget(in)}
}

// Cut notes a chunk the splitter cut, before it is handed on: the probe, when the opening
// cut one, ends the probe's phase.
func (p *Planner) Cut(id, files int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut.files += int64(files)
	p.cut.bytes += bytes
	if p.open.phase == phaseProbe {
		p.open.phase, p.open.probeID, p.open.probeFiles = phaseWait, id, files
	}
}

// budget returns the budget of the next chunk once the opening is over; the caller holds
// p.mu.
func (p *Planner) budget(in Input) Budget {
	if p.est == nil {
		return chunksize.Fixed(p.cfg.Files, p.cfg.Bytes)
	}
	c := &p.cut
	b := p.est.Budget()
	if !b.Timed && b.Files < c.waveFloor {
		b.Files = min(c.waveFloor, p.cfg.Files)
	}
	if c.tail == 0 && in.EOF {
		left := int(in.Left)
		if slots := p.jobs.limit; left < slots*b.Files || !b.Timed {
			n := p.tailParts(left, c.meanBytes()*int64(left), 1, slots)
			c.tail = max((left+n-1)/n, minPartFiles)
			if !b.Timed {
				// nothing known yet, but a wave took the slots: parts of a wave part's paths
				c.tail = max(c.tail, c.waveFloor)
			}
		}
	}
	switch {
	case c.tail == 0:
	case c.opened:
		b = chunksize.Fixed(min(c.tail, p.cfg.Files), p.cfg.Bytes)
	case b.Timed:
		b.Files = min(b.Files, c.tail)
	default:
		b.Files = min(c.tail, p.cfg.Files) // nothing known yet: the list's length is
	}
	return b
}

// meanBytes returns the bytes of a path cut so far, on average (0 before any).
func (c *cutting) meanBytes() int64 {
	if c.files == 0 {
		return 0
	}
	return c.bytes / c.files
}

// tailParts says into how many parts to cut files paths and bytes bytes once the input has
// ended, when queued chunks wait (they among them) and slots rsyncs may run at once: enough
// that every slot gets a chunk, but no part shorter than MinPart (as predicted) or with
// fewer than minPartFiles paths. 1 means leave them whole. The caller holds p.mu.
func (p *Planner) tailParts(files int, bytes int64, queued, slots int) int {
	want := slots - queued + 1
	if want < 2 || files < 2*minPartFiles {
		return 1
	}
	n := min(want, files/minPartFiles)
	f := p.est.Fit()
	if m := p.pol.MinPart.Seconds(); f.N > 0 && m > f.Start {
		// each part pays the start cost and a share of the work: start + work/n >= MinPart
		work := f.Predict(files, bytes) - f.Start
		n = min(n, int(work/(m-f.Start)))
		// but the model is fitted on the chunks that ended, and a cold cache's later
		// directories can cost several times what it predicts: no part holds more than
		// tailPartFiles paths while a slot would go without (bench H74: 14,058 paths put at
		// under 1 s went into 3 parts for 8 slots, and ran 3 s each)
		n = max(n, min(want, (files+tailPartFiles-1)/tailPartFiles))
	}
	return max(n, 1)
}

// tailPartFiles is the most paths a part of the tail holds while a slot would go without
// one, whatever the cost model predicts: --chunk-files 2000's chunks, whose tail no
// misprediction stretches.
const tailPartFiles = 2000

// Work is a chunk as the tail sees it: its paths and bytes, and the seconds its rsync has
// run (0: it waits).
type Work struct {
	Files int
	Bytes int64
	Ran   float64
}

// TailCuts says where to cut a chunk that waits to start once the input has ended, when
// queued chunks wait (it among them), free slots are free and others is the rest of the work
// (the other chunks waiting, and the rsyncs running): the index where each part after the
// first starts, in parts of about equal predicted cost; nil leaves it whole. sizes are the
// sizes of its paths (nil: it cannot be cut, as with -H).
//
// It is cut for the free slots (tailParts), and, once what a path costs is known, into parts
// about the share of each slot in all the work left, when it is more than 1.5 times that:
// the last chunks end together. Before, the three chunks of 2 s that waited while three
// slots were free started whole, and ended 1.5 s after the other five slots had run out of
// work (the simulated copy of TestPolicyTail).
func (p *Planner) TailCuts(sizes []int64, bytes int64, queued, free int, others []Work) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.est == nil || sizes == nil {
		return nil
	}
	n := 1
	if queued < free {
		n = p.tailParts(len(sizes), bytes, queued, free)
	}
	if f := p.est.Fit(); f.N > 0 {
		d := f.Predict(len(sizes), bytes)
		left := d
		for _, o := range others {
			left += max(f.Predict(o.Files, o.Bytes)-o.Ran, 0)
		}
		share := max(left/float64(max(p.jobs.limit, 1)), p.pol.MinPart.Seconds())
		if d > 1.5*share {
			// parts of about the share, each with its start; the work of each at least
			// twice a start (a start that costs more than the share, as under a contention
			// for the CPUs, cuts nothing) and MinPart less a start, no fewer paths than
			// minPartFiles, and no more parts than slots
			work := d - f.Start
			k := int(math.Round(work / max(share-f.Start, 1e-9)))
			k = min(k, int(work/max(2*f.Start, p.pol.MinPart.Seconds()-f.Start)), len(sizes)/minPartFiles, p.jobs.limit)
			n = max(n, k)
		}
	}
	return p.est.Cuts(sizes, n)
}

// HoldCap returns the most paths the splitter holds while the opening waits: as many as a
// short list holds, slots × --chunk-files. Beyond them the input waits, so that memory
// stays bounded.
func (p *Planner) HoldCap() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jobs.limit * p.cfg.Files
}
