package rsync

import (
	"cmp"
	"fmt"
	"time"
)

// Verdict is what confirming one path after a failed rsync found.
type Verdict struct {
	Landed bool // the destination holds it as the source has it, or as rsync wrote it
	// Gone: it did not land, and the source no longer has it: it vanished before its copy
	Gone   bool
	Reason string // why not, when it did not land
	Advice Advice // what the rsync message in Reason advises, if it holds one
}

// Outcome is the settled outcome of one path.
type Outcome struct {
	Status Status
	Reason string
	Bytes  int64  // file bytes transferred, for a transferred regular file
	Hint   string // advice for a failed path, from the messages behind Reason, or ""
	// Listed is the regular file as rsync's sender listed it when it transferred it: the
	// source's size and mtime that DEST was given. Zero when no line said (up to date).
	Listed Stamp
	// Change is rsync's itemized change (%i) of a transferred path, such as ">f+++++++++",
	// as its out-format line gave it; "" when no line named it.
	Change string
}

// Stamp is a regular file's size and mtime as an out-format line gave them (%l and %M).
// MTime is "" when the line did not carry one: then nothing is known.
type Stamp struct {
	Size  int64
	MTime string
}

// Known reports whether the stamp was read from a line.
func (s Stamp) Known() bool { return s.MTime != "" }

// MTimeLayout is the layout of %M: rsync's timestring, in local time, whole seconds.
const MTimeLayout = "2006/01/02-15:04:05"

// Matches reports whether a regular file of size bytes, last modified at mtime, is the
// one the stamp describes: the same size, and the same mtime as %M gives it.
func (s Stamp) Matches(size int64, mtime time.Time) bool {
	return s.Known() && s.Size == size && mtime.Local().Format(MTimeLayout) == s.MTime
}

// Stamp is the regular file the path's out-format line listed, or the zero Stamp.
func (ps PathState) Stamp() Stamp {
	if !ps.Logged || !ps.File {
		return Stamp{}
	}
	return Stamp{Size: ps.Size, MTime: ps.MTime}
}

// Settlement is what rsync's output and exit prove about the paths of a chunk, before
// the paths left unproven are confirmed. The caller runs the confirming pass over
// Unproven (a local DEST's lstat, a dry run) and hands its verdicts to Fold.
type Settlement struct {
	// Unproven are the indexes of the paths that need a verdict, in order.
	Unproven []int
	// Interrupted is the reason of a path that a cancel left not done: why it was
	// cancelled; "interrupted" when empty.
	Interrupted string

	out       []Outcome
	r         *Result
	code      int
	cancelled bool
}

// Settle is the first step of settling every path of a chunk from what rsync said and how
// it exited. A path is transferred or up to date only when it is proven: rsync exited 0
// and said nothing against it, or a confirming pass (over Unproven: every path that rsync
// did not fail itself, after any non-zero exit or a cancel) finds that it landed.
// Everything else is failed (or vanished, when rsync said so), with the most specific
// reason at hand; after a cancel, a path not proven is not done. An out-format line
// proves nothing: in push form rsync's sender logs a file before its receiver writes it.
//
// leftOut says that rsync ran with an option that may leave listed paths out and still
// exit 0 (SkipOption), and with -ii, so that it named every path it considered: then exit
// 0 proves only the paths it named, and the others are unproven too.
func Settle(r *Result, code int, cancelled, leftOut bool) *Settlement {
	s := &Settlement{out: make([]Outcome, len(r.Paths)), r: r, code: code, cancelled: cancelled}
	for i, ps := range r.Paths {
		switch {
		case cancelled:
			s.Unproven = append(s.Unproven, i)
		case ps.Kind == KindFailed:
			s.out[i] = Outcome{Status: Failed, Reason: ps.Reason, Hint: ps.Advice.String()}
		case ps.Kind == KindVanished:
			s.out[i] = Outcome{Status: Vanished, Reason: ps.Reason}
		case code == 0 && (!leftOut || ps.Logged || ps.Seen):
			s.out[i] = proven(ps)
		default:
			s.Unproven = append(s.Unproven, i)
		}
	}
	return s
}

// Fold is the second step: it takes the verdicts of the confirming pass, one for each
// of Unproven in order (none when Unproven is empty), and returns every path's outcome.
// The second result is an error rsync reported that no path carries (it exited non-zero,
// named no path, and every path was confirmed): the caller must not call that run a
// success.
func (s *Settlement) Fold(vs []Verdict) ([]Outcome, string) {
	out, r, code, cancelled := s.out, s.r, s.code, s.cancelled
	if len(s.Unproven) == 0 {
		return out, ""
	}
	fallback, advice := "", NoAdvice
	if code != 0 {
		fallback, advice = r.failReason(code), AdviceOf(r.failLine())
	}
	bad := 0
	for k, i := range s.Unproven {
		v := vs[k]
		switch {
		case v.Landed:
			out[i] = proven(r.Paths[i])
		case cancelled:
			out[i] = Outcome{Status: NotDone, Reason: cmp.Or(s.Interrupted, "interrupted")}
		case v.Gone:
			out[i] = Outcome{Status: Vanished, Reason: v.Reason}
		default:
			bad++
			out[i] = Outcome{Status: Failed, Reason: join(fallback, v.Reason), Hint: advice.or(v.Advice).String()}
		}
	}
	if cancelled || bad > 0 {
		return out, ""
	}
	for _, o := range out {
		if o.Status == Failed || o.Status == Vanished {
			return out, ""
		}
	}
	return out, fallback
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// proven is the outcome of a path that rsync's exit, or a confirmation, proved.
func proven(ps PathState) Outcome {
	if ps.Logged {
		o := Outcome{Status: Transferred, Change: ps.Change}
		if ps.File {
			o.Bytes = ps.Size
			o.Listed = ps.Stamp()
		}
		return o
	}
	return Outcome{Status: UpToDate}
}

// failReason is the reason for a path rsync did not name, after a non-zero exit: the
// first error line that named no path, or the exit code.
func (r *Result) failReason(code int) string {
	if l := r.failLine(); l != "" {
		return fmt.Sprintf("rsync exit %d: %s", code, l)
	}
	return fmt.Sprintf("rsync exit %d", code)
}

// failLine is the line of failReason: the first error line that named no path, or the
// last line unless it said a path of the chunk vanished (that is its reason alone), or "".
func (r *Result) failLine() string {
	switch {
	case len(r.Unattributed) > 0:
		return r.Unattributed[0]
	case r.lastVanished:
		return ""
	}
	return r.Last
}

// Differences reads the output of a verification pass (the same rsync with --dry-run
// over the paths to confirm) into a Verdict per path: a path landed when the pass
// neither logged a change for it nor named it in an error, and it exited 0, or 23 or 24
// for errors that each named a path of its own (a source deleted since the copy): then
// it compared every other path, and ran to its end.
func Differences(r *Result, code int) []Verdict {
	vs := make([]Verdict, len(r.Paths))
	compared := code == 0 || (code == 23 || code == 24) && len(r.Unattributed) == 0 && r.Session == NoSession && len(r.Stop) == 0
	for i, ps := range r.Paths {
		switch {
		case ps.Kind != KindOther:
			vs[i] = Verdict{Reason: "not in DEST after rsync: " + ps.Reason, Advice: ps.Advice}
		case ps.Logged:
			vs[i] = Verdict{Reason: fmt.Sprintf("DEST still differs after rsync (%s)", ps.Change)}
		case !compared:
			vs[i] = Verdict{Reason: "could not be confirmed: " + r.failReason(code), Advice: AdviceOf(r.failLine())}
		default:
			vs[i] = Verdict{Landed: true}
		}
	}
	return vs
}

// Check is what the checksum pass found for one path that had settled as transferred or
// up to date: it is still OK, or it takes Status for Reason.
type Check struct {
	OK     bool
	Status Status
	Reason string
	Hint   string // advice for a failed path
}

// Checks reads the output of a checksum pass (the same rsync with --checksum --dry-run
// over the paths to check) into a Check per path: a path rsync would still transfer or
// create differs. code is the pass's exit, cancelled says prsync stopped it, and stderr is
// its standard error as written (see LastLine). listed holds, for each path, the stamp it
// was transferred with (Outcome.Listed; the zero Stamp when not known), to name the
// culprit of a difference: the source, when its size or mtime (as this pass lists them)
// are not those it was copied with; else DEST.
func Checks(r *Result, code int, cancelled bool, stderr string, listed []Stamp) []Check {
	out := make([]Check, len(r.Paths))
	// an error that names no path leaves every path not named unchecked
	unchecked := ""
	switch {
	case cancelled:
		unchecked = "interrupted"
	case code != 0 && (len(r.Unattributed) > 0 || r.Session != NoSession || (code != 23 && code != 24)):
		unchecked = r.LastLine(stderr)
	}
	for i, ps := range r.Paths {
		switch {
		case cancelled:
			out[i] = Check{Status: NotDone, Reason: "verify: interrupted"}
		case ps.Kind == KindVanished:
			out[i] = Check{Status: Vanished, Reason: "verify: " + ps.Reason}
		case ps.Kind == KindFailed:
			out[i] = Check{Status: Failed, Reason: "verify: not checked: " + ps.Reason, Hint: ps.Advice.String()}
		case ps.Logged && differs(ps.Change):
			var was Stamp
			if i < len(listed) {
				was = listed[i]
			}
			out[i] = contentCheck(ps, was)
		case unchecked != "":
			out[i] = Check{Status: Failed, Reason: "verify: not checked: " + unchecked, Hint: AdviceOf(unchecked).String()}
		default:
			out[i] = Check{OK: true}
		}
	}
	return out
}

// contentCheck names a difference the checksum pass found in a path, and its culprit.
// ps is the pass's line for it (%l and %M: the source as it is now), was the stamp it
// was copied with. rsync compares mtimes in whole seconds (--modify-window 0), as %M
// gives them: a source rewritten within the second, to the same size, looks unchanged.
func contentCheck(ps PathState, was Stamp) Check {
	ch := ps.Change
	switch {
	case len(ch) >= 3 && ch[2] == '+':
		return Check{Status: Failed, Reason: "verify: missing from DEST (" + ch + ")"}
	case ps.File && was.Known() && ps.MTime != "" && (ps.Size != was.Size || ps.MTime != was.MTime):
		return Check{Status: Failed, Reason: fmt.Sprintf("verify: source changed since it was copied (%s): copied at size %d, mtime %s; now size %d, mtime %s",
			ch, was.Size, was.MTime, ps.Size, ps.MTime), Hint: SourceChanged.String()}
	case !stampDiffers(ch):
		// DEST and the source agree in size and mtime: only the content tells them apart
		return Check{Status: Failed, Reason: "verify: content differs (" + ch + ")", Hint: ContentDiffers.String()}
	case ps.File && was.Known() && ps.MTime != "":
		return Check{Status: Failed, Reason: "verify: content differs, DEST changed since it was copied (" + ch + ")", Hint: DestChanged.String()}
	}
	// size or mtime differ, and there is no record of what was copied (found up to date)
	return Check{Status: Failed, Reason: "verify: content differs (" + ch + ")", Hint: StampDiffers.String()}
}

// stampDiffers reports whether an itemized change says the size or the mtime of the
// source and DEST differ (%i's 's' and 't').
func stampDiffers(change string) bool {
	return len(change) >= 5 && (change[3] == 's' || change[4] == 't')
}

// differs reports whether an itemized change of a checksum dry run means DEST's copy is
// not the source's: rsync would transfer it, create it or link it (an attribute alone,
// such as a directory's mtime, is no difference of content).
func differs(change string) bool {
	return change != "" && (change[0] == '<' || change[0] == '>' || change[0] == 'c' || change[0] == 'h')
}
