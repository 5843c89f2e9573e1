package splitter

import (
	"context"
	"time"

	"github.com/prsync/prsync/chunksize"
)

// # The opening of a list still streaming
//
// A list whose end has not been read when the first chunk has waited endWait for it (a find
// over a cold tree: 250 ms gave a few hundred of its 10,000 paths) is probed as a short list
// is (chunksize/opening.go): its first chunk is a probe of chunksize.ProbeFiles paths. The
// paths read after the probe are held, not cut, while the input keeps being read, until
// Opening answers from what the probe showed; they are the first wave. Then:
//
//   - if the input has ended meanwhile, the paths held are all that is left, and they are cut
//     as the rest of a short list is: into the parts Opening said, which share the list;
//   - otherwise they are cut into the parts Opening said (each within ChunkFiles and
//     ChunkBytes), and the paths after them by the Sizer's budget, which has learnt from the
//     probe once it ended (Estimator.byRate): no run of 32-path chunks before the first ends.
//     Opening may answer before the probe has ended (its work so far already gives every
//     slot a part, or it failed); until the budget is timed, the chunks after the wave then
//     hold at least a part's paths (waveFloor). They wait for the slots the wave took, so
//     smaller ones start no sooner: against a daemon with max connections = 3 (bench
//     scenario 6), a find that was still streaming when a wave of 8 × 933 was cut left 8
//     chunks of 32 paths after it, each a session of its own.
//
// Before, 16 or 17 chunks of 32 paths started before the first ended, and a copy of 5,000
// small files that one rsync -a made in 1 to 2 s ran 27 to 45 chunks (bench/RESULTS.md,
// scenarios 5 to 7). Opening bounds the wait itself (by the chunk target) and answers for
// every slot when the probe failed, was refused or paused. At most waveCap paths are held:
// beyond them the input waits, as it did before, so memory stays bounded.

// openingPoll is how often Opening is asked while the paths after the probe wait for it.
const openingPoll = 5 * time.Millisecond

// streamingProbe, for the first chunk, makes it a probe when the list is still streaming once
// awaitEnd has returned: its end was not read within endWait, nor more paths than a short
// list holds, and the conditions of a short list's probe hold otherwise (a Sizer whose
// budget is not timed yet, more than minProbeList paths read so far).
func (s *Splitter) streamingProbe(ctx context.Context) bool {
	if s.eof.Load() || s.cfg.Slots == nil || s.budget.Timed || ctx.Err() != nil {
		return false
	}
	read := int(s.read.Load())
	left := read - int(s.applied) + 1 // the record being applied is not counted
	if left <= minProbeList || read >= max(s.cfg.Slots(), 1)*s.cfg.ChunkFiles {
		return false
	}
	s.probing, s.streaming = true, true
	s.budget.Files = min(chunksize.ProbeFiles, s.cfg.ChunkFiles)
	return true
}

// waveCap is the most paths held after the probe: as many as a short list holds.
func (s *Splitter) waveCap() int { return max(s.cfg.Slots(), 1) * s.cfg.ChunkFiles }

func (s *Splitter) waveFull() bool { return s.waveFiles >= s.waveCap() }

// hold keeps a group of paths read after the probe, copied out of the input's block.
func (s *Splitter) hold(g []rec) {
	h := make([]rec, len(g))
	for i, r := range g {
		h[i] = r
		h[i].input = s.waveArena.add(r.input)
	}
	s.wave = append(s.wave, h)
	s.waveFiles += len(g)
}

// openWave asks Opening how to cut the paths held after the probe and, once it answers,
// cuts them (release). ended says the input has ended: then it waits for the answer.
func (s *Splitter) openWave(ctx context.Context, out chan<- *Chunk, ended bool) error {
	n := 1
	switch {
	case s.waveFiles > 0 && ended:
		var ok bool
		if n, ok = s.awaitOpening(ctx, s.waveFiles); !ok {
			s.unsent()
			return ctx.Err()
		}
	case s.waveFiles > 0:
		var known bool
		if n, known = s.cfg.Opening(s.probe, s.waveFiles); !known {
			return nil
		}
	case !ended:
		return nil // nothing held yet: the wait starts with the first path after the probe
	}
	return s.release(ctx, out, max(n, 1), ended)
}

// awaitOpening asks Opening about rest paths after the probe every openingPoll until it
// answers; false when ctx ends first.
func (s *Splitter) awaitOpening(ctx context.Context, rest int) (int, bool) {
	t := time.NewTicker(openingPoll)
	defer t.Stop()
	for {
		if n, known := s.cfg.Opening(s.probe, rest); known {
			return max(n, 1), true
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-t.C:
		}
	}
}

// release cuts the paths held after the probe into n parts of equal paths (each within
// ChunkFiles and ChunkBytes). When the input has ended (ended), they are its last paths and
// the tail is cut as for a short list; otherwise the last part is sent at once, and the paths
// after it go by the Sizer's budget.
func (s *Splitter) release(ctx context.Context, out chan<- *Chunk, n int, ended bool) error {
	files := s.waveFiles
	s.probe, s.probing, s.streaming, s.waving = nil, false, false, false
	s.opened, s.tailFiles = true, s.partFiles(files, n)
	for len(s.wave) > 0 {
		g := s.wave[0]
		s.wave[0] = nil
		s.wave = s.wave[1:]
		s.waveFiles -= len(g)
		if err := s.addGroup(ctx, g, out); err != nil {
			return err // what is left of the wave went to Hooks.Unsent with the chunk
		}
	}
	s.wave, s.waveArena = nil, arena{}
	if ended {
		return nil
	}
	if err := s.flush(ctx, out); err != nil {
		return err
	}
	s.waveFloor = s.tailFiles
	s.opened, s.tailFiles = false, 0
	return nil
}

// partFiles returns the paths of each of n parts of rest paths after the probe: more parts
// when n would hold more than ChunkFiles, so that the parts stay about equal.
func (s *Splitter) partFiles(rest, n int) int {
	n = max(n, (rest+s.cfg.ChunkFiles-1)/s.cfg.ChunkFiles, 1)
	return max((rest+n-1)/n, minTailFiles)
}

// unsentWave hands the paths held after the probe to Hooks.Unsent when ctx ends: they were
// read and examined, so they count as not done, like a chunk's.
func (s *Splitter) unsentWave() {
	if len(s.wave) > 0 && s.hooks.Unsent != nil {
		var ins [][]byte
		for _, g := range s.wave {
			for _, r := range g {
				if s.hooks.Accepted != nil {
					s.hooks.Accepted(r.size) // held, never counted yet
				}
				ins = append(ins, r.input)
			}
		}
		s.hooks.Unsent(ins)
	}
	s.wave, s.waveFiles, s.waveArena = nil, 0, arena{}
}
