package rsync

import (
	"bytes"
	"strings"
)

// AnchorEvery is how many paths of one directory a pulling rsync's list holds between two
// anchors of that directory (see Anchor). Bench scenario 10 (600,000 files, about 750 in a
// directory) took 42.2 s at 64 and 46.0 s at 16 with each directory's ancestors anchored
// too, which the client pays for as more rules to walk (H58).
const AnchorEvery = 64

// AnchoredListBytes is the most bytes of --files-from entries (each with its separator)
// that a chunk of a pull from a daemon with anchors holds, unless --chunk-files is given. The client
// checks each name the sender lists by walking its rules from the newest, so the anchors
// at the end of a list serve only the names that come back after the client has sent the
// whole list; the sender answers as it reads, and the client sends as much as the
// connection holds ahead of it. Pulled from a daemon on 127.0.0.1 (rsync 3.5.0, bench H86),
// a list of up to 360 KB was all sent first: about 10 rule matches a name; from 400 to
// 480 KB on, it was not, and each name walked back to its directory's last anchor, 2,000
// to 5,000 rules, 600 times the matches and about 60 µs a name. Chunks of 2,000 to 3,000
// paths of 80 bytes took 5 user CPU-s for 150,000 files against 6.3 to 10 in the
// defaults' chunks of up to 10,000. Over ssh the client ran less far ahead, and no list of
// 240 to 960 KB was all sent first: each name walked 300 to 2,800 rules whatever the size,
// so a pull over ssh has no such bound (each chunk is one more ssh session) (bench H86).
const AnchoredListBytes = 256 << 10

// Anchor returns the --files-from list of a pulling rsync for entries: the entries in
// their order, with the parent directory that two or more consecutive entries share
// listed before the first of them and again after every AnchorEvery of them, and each
// such directory once more at the end, the first met last. dirs are those directories
// (for Attributor.Anchors).
//
// A pulling client of rsync 3.2.5 and later checks each name the sender lists against
// the names it asked for (unless --trust-sender). Each name of the list becomes include
// rules, "/NAME" and "/NAME/*" (--files-from implies --dirs), put at the head of one
// linked list (exclude.c, add_implied_include), and the client walks that list from its
// head: to find the rule of a name's parent directory as it adds the name, to find a rule
// that matches each name the sender lists back, and (rsync 3.5) to tell whether a
// directory the sender lists was asked for. With only files listed, the rule a name needs
// lies behind the rules of every name added since: 8,000 files of two directories cost the
// client 0.42 CPU-s, against 0.02 with --trust-sender. A directory listed without -r is
// sent as itself, and its rule "/DIR/*" matches every name in it, so an anchor every
// AnchorEvery paths keeps the walks short while the client adds the names of that
// directory, and the anchors at the end serve the names the sender lists back once the
// client has sent the whole list: the same 8,000 files cost 0.02 CPU-s with anchors and
// the check on, and bench scenario 10 took 42.2 s against 52.3 s without (chunks of up to
// 10,000 paths both; 24.0 against 39.1 client CPU-s). The sender lists a directory as it
// already does for the names' implied parent directories (--relative), with the same
// attributes, and the receiver keeps one entry of each name. The check still refuses any
// name outside the chunk's directories, but no longer one inside them that was not asked
// for. See AnchorsApply for the options with which an anchor would copy more than its own
// entry.
func Anchor(entries [][]byte) (list, dirs [][]byte) {
	list = make([][]byte, 0, len(entries)+len(entries)/AnchorEvery*2+8)
	for i := 0; i < len(entries); {
		dir := anchorDir(entries[i])
		j := i + 1
		for j < len(entries) && dir != nil && bytes.Equal(anchorDir(entries[j]), dir) {
			j++
		}
		if dir == nil || j-i < 2 {
			list = append(list, entries[i:j]...)
			i = j
			continue
		}
		dirs = append(dirs, dir)
		for k := i; k < j; k += AnchorEvery {
			list = append(list, dir)
			list = append(list, entries[k:min(k+AnchorEvery, j)]...)
		}
		i = j
	}
	// once more at the end, the first met last: the client forwards the list to the sender
	// ahead of the names the sender lists back, by as many as the sockets' buffers hold,
	// and then the run's last anchors are what lies at the head of the rules
	seen := make(map[string]bool, len(dirs))
	var last [][]byte
	for _, d := range dirs {
		if !seen[string(d)] {
			seen[string(d)] = true
			last = append(last, d)
		}
	}
	for k := len(last) - 1; k >= 0; k-- {
		list = append(list, last[k])
	}
	return list, dirs
}

// anchorDir returns the parent directory of a --files-from entry, as an entry, or nil
// when the entry lands at the destination's top: an anchor there would be the transfer's
// root itself, whose attributes only a listed "." may set.
func anchorDir(e []byte) []byte {
	i := bytes.LastIndexByte(e, '/')
	if i <= 0 {
		return nil
	}
	dir := e[:i]
	land := dir
	if k := bytes.Index(dir, []byte("/./")); k >= 0 {
		land = dir[k+3:]
	} else if bytes.HasSuffix(dir, []byte("/.")) {
		return nil // "SRC/./NAME": NAME lands at the top
	}
	// only a clean relative name: "DIR/" (or "DIR/.") would ask for the directory's contents
	if !clean(land) {
		return nil
	}
	return dir
}

// AnchorsApply reports whether a pulling rsync with these options copies an anchor (see
// Anchor) as its own entry and no more: not with -r (a listed directory would be copied
// whole) or --old-dirs (its direct contents), nor with --no-dirs (rsync would skip it,
// saying so), --no-implied-dirs (the directory's attributes would be set where they are
// not otherwise) or --trust-sender (there is no check to make cheap).
func AnchorsApply(args []string) bool {
	return !anyOption(args, func(name string) bool {
		return name == "--recursive" || name == "--no-dirs" || name == "--no-d" || name == "--old-dirs" ||
			name == "--old-d" || name == "--no-implied-dirs" || name == "--trust-sender"
	}, func(flags string) bool { return strings.ContainsRune(flags, 'r') })
}
