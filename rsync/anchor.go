package rsync

import (
	"bytes"
	"slices"
	"strings"
)

// AnchorEvery is how many paths of one directory a pulling rsync's list holds between two
// anchors of that directory (see Anchor). Bench scenario 10 (600,000 files, about 750 in a
// directory) took 42.2 s at 64 and 46.0 s at 16 with each directory's ancestors anchored
// too, which the client pays for as more rules to walk (H58).
const AnchorEvery = 64

// AnchorRecent is how many directories before the one a pulling rsync's list is at it
// anchors again, every AnchorEvery paths, if each held AnchorEvery paths or more in a row
// (see Anchor). The client forwards the list ahead of the names the sender lists back, by
// what the connection holds, and checks each name by walking its rules from the newest
// back to the nearest rule that matches it: without these anchors, the newest anchor of a
// directory the list has left. Pulling bench scenario 10's first 150,728 paths
// (directories of 160 to 1,440 of them; bench H87), the walk took 390 to 440 rules a name
// on average from a daemon, in chunks of at most AnchoredListBytes, and 820 over ssh, in
// chunks of up to 10,000 paths. Re-listing the last 4 directories cut it to 43 to 47 from
// the daemon and 280 over ssh, the last 8 to 50 and 46, and 16 to 45 and 42. With 8, the
// pull from a daemon took the time of 4 (3 pairs), 0.88 to 0.97 x that of none, for 3 %
// more entries. They cost at most AnchorRecent entries in AnchorEvery paths, and only
// where directories are large enough for the lag to end in one of them.
const AnchorRecent = 8

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
// listed before the first of them and again after every AnchorEvery of them, the last
// AnchorRecent directories with AnchorEvery such entries or more listed again after every
// AnchorEvery entries, and each such directory once more at the end, the first met last.
// dirs are the directories of the runs (for Attributor.Anchors).
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
// client has sent the whole list, and the recent directories' anchors those that come
// back while it is still sending (AnchorRecent): the same 8,000 files cost 0.02 CPU-s with anchors and
// the check on, and bench scenario 10 took 42.2 s against 52.3 s without (chunks of up to
// 10,000 paths both; 24.0 against 39.1 client CPU-s). The sender lists a directory as it
// already does for the names' implied parent directories (--relative), with the same
// attributes, and the receiver keeps one entry of each name. The check still refuses any
// name outside the chunk's directories, but no longer one inside them that was not asked
// for. See AnchorsApply for the options with which an anchor would copy more than its own
// entry.
func Anchor(entries [][]byte) (list, dirs [][]byte) {
	list = make([][]byte, 0, len(entries)+len(entries)/AnchorEvery*(2+AnchorRecent)+8)
	var recent [][]byte // the last AnchorRecent directories whose runs held AnchorEvery paths or more, the last met last
	since := 0          // paths listed since recent was last listed
	relist := func(cur []byte) {
		if since < AnchorEvery {
			return
		}
		for _, d := range recent {
			if !bytes.Equal(d, cur) {
				list = append(list, d)
			}
		}
		since = 0
	}
	for i := 0; i < len(entries); {
		dir := anchorDir(entries[i])
		j := i + 1
		for j < len(entries) && dir != nil && bytes.Equal(anchorDir(entries[j]), dir) {
			j++
		}
		if dir == nil || j-i < 2 {
			relist(nil)
			list = append(list, entries[i:j]...)
			since += j - i
			i = j
			continue
		}
		dirs = append(dirs, dir)
		for k := i; k < j; k += AnchorEvery {
			list = append(list, dir)
			relist(dir)
			seg := entries[k:min(k+AnchorEvery, j)]
			list = append(list, seg...)
			since += len(seg)
		}
		if j-i >= AnchorEvery {
			recent = slices.DeleteFunc(recent, func(d []byte) bool { return bytes.Equal(d, dir) })
			if len(recent) == AnchorRecent {
				recent = recent[1:]
			}
			recent = append(recent, dir)
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
