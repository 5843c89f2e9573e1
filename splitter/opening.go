package splitter

import (
	"context"
	"time"

	"github.com/prsync/prsync/plan"
)

// # Cutting as the planner says
//
// The splitter reads and examines; the planner (package plan) says how big each chunk is and
// when it is cut. At the start of each chunk the splitter asks it (Planner.Next) with what it
// has read. The answer is a budget, or, while the opening is not decided (the first chunk
// waits a moment for the input's end; the paths after a probe wait for its figures), to hold
// the paths read, in no chunk, until a given time or until the planner signals news (Wake):
// the probe started, logged its first line or ended. The splitter then asks again, as it does
// after every block of records it applies and when the input's end has been read, and cuts
// the paths held as the planner says: by budget, or into the parts of a wave. It never waits
// blocked: the input is still read and examined while paths are held, up to the planner's
// HoldCap, beyond which the input waits, so that memory stays bounded.

// addGroup puts records into the current chunk, all in the same one, or holds them.
func (s *Splitter) addGroup(ctx context.Context, g []rec, out chan<- *Chunk) error {
	if s.holding {
		s.hold(g)
		return nil
	}
	placed, st, err := s.place(ctx, g, out, false)
	if err != nil || placed {
		return err
	}
	s.hold(g)
	return s.follow(ctx, out, st)
}

// place puts records into the current chunk, starting one with the budget the planner says;
// it reports false, with the planner's answer, when the planner says not to cut them yet.
// held says they come from the paths held.
func (s *Splitter) place(ctx context.Context, g []rec, out chan<- *Chunk, held bool) (bool, plan.Step, error) {
	var size, list int64
	for _, r := range g {
		size += r.size
		list += int64(len(r.entry)) + 1
	}
	if s.cur != nil && (s.budget.Over(s.cur.Len()+len(g), s.cur.Bytes+size) || s.cur.Src != g[0].src ||
		s.cfg.ListBytes > 0 && s.list+list > s.cfg.ListBytes) {
		if err := s.flush(ctx, out); err != nil {
			return false, plan.Step{}, err
		}
	}
	if s.cur == nil {
		switch {
		case s.force != nil:
			s.budget = *s.force
		case s.next != nil:
			s.budget, s.next = *s.next, nil
		default:
			placing := len(g)
			if held {
				placing = 0 // counted as held
			}
			st := s.nextStep(s.input(placing))
			if st.Do != plan.Cut {
				return false, st, nil
			}
			s.budget = st.Budget
		}
		n := min(s.budget.Files, 4096)
		s.cur = &Chunk{ID: int(s.nextID.Add(1)), Src: g[0].src, Inputs: make([][]byte, 0, n), Entries: make([][]byte, 0, n)}
		s.list = 0
		if s.plan.Timed() && !s.cfg.HardLinks {
			s.cur.Sizes = make([]int64, 0, n)
		}
	}
	s.list += list
	for _, r := range g {
		s.cur.Inputs = append(s.cur.Inputs, s.arena.add(r.input))
		s.cur.Entries = append(s.cur.Entries, s.arena.addString(r.entry))
		s.cur.Bytes += r.size
		if s.cur.Sizes != nil {
			s.cur.Sizes = append(s.cur.Sizes, r.size)
		}
		if s.hooks.Accepted != nil {
			s.hooks.Accepted(r.size)
		}
	}
	if s.budget.Reached(s.cur.Len(), s.cur.Bytes) {
		return true, plan.Step{}, s.flush(ctx, out)
	}
	return true, plan.Step{}, nil
}

// input is what the splitter has read and placed, for the planner; placing is the paths
// being placed that are neither applied before nor held.
func (s *Splitter) input(placing int) plan.Input {
	read := s.read.Load()
	return plan.Input{Read: read, EOF: s.eof.Load(), Held: s.heldFiles, Left: read - s.applied + int64(s.heldFiles+placing)}
}

// ask asks the planner again about the paths held, and cuts them if it says so.
func (s *Splitter) ask(ctx context.Context, out chan<- *Chunk) error {
	if !s.holding {
		return nil
	}
	return s.follow(ctx, out, s.nextStep(s.input(0)))
}

// nextStep asks the planner what to do with the paths read.
func (s *Splitter) nextStep(in plan.Input) plan.Step {
	if s.asked != nil {
		s.asked(in)
	}
	return s.plan.Next(time.Now(), in)
}

// follow does what the planner said about the paths held: hold them until a time, cut them
// by a budget, or cut them into the parts of a wave.
func (s *Splitter) follow(ctx context.Context, out chan<- *Chunk, st plan.Step) error {
	switch st.Do {
	case plan.Hold:
		s.holding, s.until, s.unread = true, st.Until, st.Unread
		return nil
	case plan.Wave:
		s.holding, s.until, s.unread = false, time.Time{}, false
		s.force = &st.Budget
		err := s.drain(ctx, out)
		s.force = nil
		if err != nil || !st.Flush {
			return err
		}
		return s.flush(ctx, out) // the wave's last part starts with the others
	}
	s.holding, s.until, s.unread = false, time.Time{}, false
	s.next = &st.Budget
	return s.drain(ctx, out)
}

// drain puts the paths held into chunks, in order, until the planner says to hold again.
func (s *Splitter) drain(ctx context.Context, out chan<- *Chunk) error {
	for len(s.held) > 0 {
		g := s.held[0]
		placed, st, err := s.place(ctx, g, out, true)
		if err != nil {
			return err // what is held went to Hooks.Unsent (flush)
		}
		if !placed {
			return s.follow(ctx, out, st) // g stays the first held
		}
		s.held[0] = nil
		s.held = s.held[1:]
		s.heldFiles -= len(g)
	}
	s.held, s.heldArena = nil, arena{}
	return nil
}

// hold keeps a group of paths in no chunk, copied out of the input's block.
func (s *Splitter) hold(g []rec) {
	h := make([]rec, len(g))
	for i, r := range g {
		h[i] = r
		h[i].input = s.heldArena.add(r.input)
	}
	s.held = append(s.held, h)
	s.heldFiles += len(g)
}

// unsentHold hands the paths held to Hooks.Unsent when ctx ends: they were read and
// examined, so they count as not done, like a chunk's.
func (s *Splitter) unsentHold() {
	if len(s.held) > 0 && s.hooks.Unsent != nil {
		var ins [][]byte
		for _, g := range s.held {
			for _, r := range g {
				if s.hooks.Accepted != nil {
					s.hooks.Accepted(r.size) // held, never counted yet
				}
				ins = append(ins, r.input)
			}
		}
		s.hooks.Unsent(ins)
	}
	s.held, s.heldFiles, s.heldArena = nil, 0, arena{}
}
