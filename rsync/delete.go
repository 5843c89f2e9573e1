package rsync

import "strings"

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
