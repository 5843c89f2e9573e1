package rsync

import "strings"

// DeleteOnly returns the options that make rsync delete, in each listed directory, what
// DEST has and the source lacks, and change nothing else: --dirs lists each directory's
// entries without recursing, --existing creates nothing, --ignore-existing updates nothing.
func DeleteOnly() []string { return []string{"--dirs", "--delete", "--existing", "--ignore-existing"} }

// DeleteFailed reports a deletion pass's rsync (DeleteOnly) that did not complete, from its
// exit code and what its output said: a session failure, an error line that DeleteErrors
// keeps, or an exit other than 0, 23 and 24. Those two alone are no failure of the pass: a
// listed directory that the source lacks (23) is one that its parent's pass removes from
// DEST, and an entry that vanished (24) is one the source lacks or DEST no longer has. A
// path of the pass that failed (KindFailed) is a failure of its own, which the caller
// names.
func (r *Result) DeleteFailed(code int) bool {
	if code == 0 {
		return false
	}
	return len(r.DeleteErrors()) > 0 || r.Session != NoSession || !SessionRan(code)
}

// DeleteErrors returns the error lines of a deletion pass (an rsync that transfers nothing
// and only deletes what the source lacks) that name no path and say more than that an
// entry vanished while rsync listed a directory: a source entry that vanished is one the
// source lacks, and a DEST entry that vanished is already gone (another shard's pass over
// the same directory removed it first; rsync then exits 24). It returns none for a pull
// whose every directory is missing from the source: the sender, with nothing to send,
// exits first, and the receiver's last write to it fails with a broken pipe.
func (r *Result) DeleteErrors() []string {
	lines := notVanished(r.Unattributed)
	if senderGone(r, lines) {
		return nil
	}
	return lines
}

// notVanished drops the lines that say an entry vanished.
func notVanished(lines []string) []string {
	var out []string
	for _, l := range lines {
		if ParseMessage([]byte(l)).Kind != KindVanished {
			out = append(out, l)
		}
	}
	return out
}

// senderGone reports a pass whose every path vanished from the source and whose other
// error lines, the unattributed ones less the vanishes, are all the receiver's broken pipe.
func senderGone(r *Result, lines []string) bool {
	for _, ps := range r.Paths {
		if ps.Kind != KindVanished {
			return false
		}
	}
	for _, l := range lines {
		if !strings.Contains(l, "write error: Broken pipe (32)") {
			return false
		}
	}
	return true
}
