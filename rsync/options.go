package rsync

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// OptionError is an rsync option that prsync manages itself.
type OptionError struct {
	Option string
	Hint   string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("rsync option %s is managed by prsync", e.Option)
}

// refused are rsync options that prsync manages itself, with the hint for each.
var refused = []struct{ prefix, hint string }{
	{"--files-from", "prsync feeds each rsync its own list; give paths on stdin or with --from"},
	{"--from0", "prsync always passes --from0; use prsync's -0 for NUL-separated input"},
	{"--delete", "rsync's --delete cannot be right on a stream of files; use prsync's own --delete (before --), which deletes in the directories the paths touch once the copy has succeeded"},
	{"--del", "rsync's --del cannot be right on a stream of files; use prsync's own --delete (before --), which deletes in the directories the paths touch once the copy has succeeded"},
	{"--out-format", "prsync uses --out-format for its accounting; read the JSON events instead"},
	{"--log-format", "prsync uses --out-format for its accounting; read the JSON events instead"},
	{"--timeout", "a paused local rsync with --timeout dies when resumed; use --contimeout, or --no-throttle with a --timeout"},
	{"--no-relative", "prsync relies on --relative paths to lay out DEST; use --root to strip a prefix"},
	{"--no-R", "prsync relies on --relative paths to lay out DEST; use --root to strip a prefix"},
	{"--quiet", quietHint},
}

const quietHint = "-q hides the out-format lines prsync reads to account for each path; leave it out (rsync's output is never shown: prsync's is the events)"

// CheckOptions refuses the rsync options that prsync manages. timeoutOK allows --timeout
// (nothing will be paused).
func CheckOptions(args []string, timeoutOK bool) error {
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		for _, r := range refused {
			if name == r.prefix || (strings.HasPrefix(name, r.prefix) && (r.prefix == "--delete" || r.prefix == "--del")) {
				if r.prefix == "--timeout" && timeoutOK {
					continue
				}
				return &OptionError{Option: name, Hint: r.hint}
			}
		}
		if len(a) > 1 && a[0] == '-' && a[1] != '-' && shortHas(a[1:], '0') {
			return &OptionError{Option: a + " (-0, --from0)", Hint: "prsync always passes --from0; use prsync's -0 for NUL-separated input"}
		}
		if len(a) > 1 && a[0] == '-' && a[1] != '-' && shortHas(a[1:], 'q') {
			return &OptionError{Option: a + " (-q, --quiet)", Hint: quietHint}
		}
	}
	return nil
}

// shortHas reports whether a cluster of short rsync flags holds -flag. The cluster ends at
// a flag that takes a value (-e, -B, -T, -f, -M) or at anything but a letter: the rest is
// that value, as in -B1024, -e0 or -f'- *.q'.
func shortHas(s string, flag rune) bool {
	for _, c := range s {
		if c == flag {
			return true
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') || strings.ContainsRune("eBTfM", c) {
			return false
		}
	}
	return false
}

// NoDelay is the socket option prsync gives an rsync that talks to a daemon over TCP
// (rsync:// or host::module). rsync sets none of its own (SO_KEEPALIVE on the daemon's side
// only), and with Nagle's algorithm on, each small write of a session's handshake waits for
// the other side's delayed acknowledgement: a push of one file to a daemon on 127.0.0.1 took
// 90 ms, and 6 ms with the option (issue 23). rsync batches its own writes, so the bulk of a
// transfer is unchanged. It sets the client's socket only: a pull also waits on the daemon's
// writes, which only the daemon's "socket options" can change.
const NoDelay = "--sockopts=TCP_NODELAY"

// DaemonSocketOptions returns the options prsync adds for a daemon's TCP connection: NoDelay,
// unless the options after -- set --sockopts themselves (an empty one turns it off).
func DaemonSocketOptions(args []string) []string {
	for _, a := range args {
		if a == "--sockopts" || strings.HasPrefix(a, "--sockopts=") {
			return nil
		}
	}
	return []string{NoDelay}
}

// WholeFile is the option that makes an rsync copy changed files whole, as rsync does by
// itself when both paths are local: main.c turns --whole-file on for a local copy that did
// not choose, and leaves the delta algorithm on for a remote one. A local copy that prsync
// runs in pull form over a pipe looks remote to rsync, so without it the receiver reads
// every changed file's old version in DEST to send its block checksums, and the sender
// checksums the new one against them: on a network filesystem, the old file crosses the
// network (issue 23: an incremental copy to an sshfs mount spent a fifth of the machine
// in I/O wait, and took 1.06 times as long).
const WholeFile = "--whole-file"

// LocalWholeFile returns the options that give a local copy in pull form rsync's own
// local default: WholeFile, unless the options choose (-W, --whole-file, --no-whole-file,
// --no-W) or need the delta algorithm (--append, --append-verify) or a batch file
// (--write-batch, --only-write-batch, --read-batch), where rsync's local copy does not
// turn it on either.
func LocalWholeFile(args []string) []string {
	if anyOption(args, func(name string) bool {
		return name == "--whole-file" || name == "--no-whole-file" || name == "--no-W" ||
			name == "--append" || name == "--append-verify" || name == "--write-batch" ||
			name == "--only-write-batch" || name == "--read-batch"
	}, func(flags string) bool { return strings.ContainsRune(flags, 'W') }) {
		return nil
	}
	return []string{WholeFile}
}

// anyOption reports whether an rsync option of args, before a "--", is one that long
// holds for (its name, up to an "="), or a cluster of short options that short holds for
// (its letters, as ShortFlags gives them). Values are not options: in --exclude -W,
// -e 'ssh -W' and -T W the W is skipped.
func anyOption(args []string, long func(name string) bool, short func(flags string) bool) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(a, "=")
		switch {
		case a == "--":
			return false
		case long(name):
			return true
		case (quickSafeValue[name] || longValue[name]) && !hasValue:
			i++ // the value is the next argument, not an option: --exclude -W
		default:
			f := ShortFlags(a)
			if short(f) {
				return true
			}
			if f != "" && len(f) == len(a)-1 && strings.ContainsRune(shortValue, rune(f[len(f)-1])) {
				i++ // -e CMD, -aT DIR: the value is the next argument
			}
		}
	}
	return false
}

// HardLinks reports whether the rsync options preserve hard links.
func HardLinks(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--hard-links" {
			return true
		}
		if len(a) < 2 || a[0] != '-' || a[1] == '-' {
			continue
		}
		for _, c := range a[1:] {
			if c == 'H' {
				return true
			}
			if strings.ContainsRune(shortWithValue, c) {
				if len(a) == 2 {
					i++ // -T DIR: the value is the next argument
				}
				break // the rest of the cluster is the value, as in -T/tmp/H
			}
		}
	}
	return false
}

// TrustsSender reports whether the rsync options turn off a pulling client's check of the
// names the sender lists (--trust-sender, rsync 3.2.5 and later). With the check on, each
// name given by --files-from is an implied include rule that every listed name is matched
// against in turn: a chunk's cost grows with the square of its paths.
func TrustsSender(args []string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--trust-sender" {
			return true
		}
	}
	return false
}

// shortWithValue are rsync's short options that take a value.
const shortWithValue = "BeTfM@"

// Version is an rsync version.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v is major.minor.patch or newer.
func (v Version) AtLeast(major, minor, patch int) bool {
	return v.Major*10000+v.Minor*100+v.Patch >= major*10000+minor*100+patch
}

var versionRE = regexp.MustCompile(`version\s+v?(\d+)\.(\d+)\.(\d+)`)

// ParseVersion reads the version from the output of rsync --version.
func ParseVersion(out []byte) (Version, bool) {
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return Version{}, false
	}
	var v Version
	v.Major, _ = strconv.Atoi(string(m[1]))
	v.Minor, _ = strconv.Atoi(string(m[2]))
	v.Patch, _ = strconv.Atoi(string(m[3]))
	return v, true
}

// quickSafe are rsync options that leave rsync's quick-check decision (and so prsync's own
// up-to-date check) unchanged. Any other option after -- turns prsync's check off.
var quickSafe = map[string]bool{
	"-v": true, "--verbose": true, "-q": true, "--quiet": true, "--stats": true,
	"-h": true, "--human-readable": true, "--progress": true, "-P": true, "--partial": true,
	"--mkpath": true, "-z": true, "--compress": true, "--no-compress": true, "--numeric-ids": true,
	"--no-motd": true, "-8": true, "--8-bit-output": true, "-W": true, "--whole-file": true,
	"--no-whole-file": true, "--inplace": true, "--sparse": true, "-S": true, "--preallocate": true,
	"--fsync": true, "--delay-updates": true, "-s": true, "--protect-args": true, "--secluded-args": true,
	"--old-args": true, "-x": true, "--one-file-system": true, "--ignore-missing-args": true,
	"-a": true, "--archive": true, "-r": true, "--recursive": true, "-l": true, "--links": true,
	"-p": true, "--perms": true, "-t": true, "--times": true, "-g": true, "--group": true,
	"-o": true, "--owner": true, "-D": true, "--devices": true, "--specials": true,
}

// quickSafeValue are options that take a value and leave the decision unchanged.
var quickSafeValue = map[string]bool{
	"--bwlimit": true, "--info": true, "--debug": true, "--partial-dir": true, "--temp-dir": true,
	"-T": true, "--compress-level": true, "--compress-choice": true, "--zc": true, "--zl": true,
	"--contimeout": true, "--timeout": true, "--port": true, "--sockopts": true, "--block-size": true,
	"-B": true, "--rsh": true, "-e": true, "--rsync-path": true, "--log-file": true,
	"--log-file-format": true, "--outbuf": true, "--skip-compress": true, "--address": true,
	"--password-file": true, "--max-alloc": true,
}

// QuickCheckSafe reports whether prsync's own up-to-date check decides exactly as rsync
// would with these options (prsync's --archive plus the options after --).
func QuickCheckSafe(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if quickSafe[a] {
			continue
		}
		name, _, hasValue := strings.Cut(a, "=")
		if quickSafeValue[name] {
			if !hasValue {
				i++ // the value is the next argument
			}
			continue
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && quickSafeValue[a[:2]] {
			continue // -T/tmp, -B1024, -essh
		}
		return false
	}
	return true
}

// statConfirmSafe are options, beyond the quick-check-safe ones, under which a copied path
// still lands with the source's type, size, mtime and link target, so that an lstat of
// DEST confirms it.
var statConfirmSafe = map[string]bool{
	"-H": true, "--hard-links": true, "-A": true, "--acls": true, "-X": true, "--xattrs": true,
	"--no-implied-dirs": true, "--numeric-ids": true, "-c": true, "--checksum": true,
	"-I": true, "--ignore-times": true, "--size-only": true, "--insecure-links": true,
	"--super": true, "--fake-super": true, "--open-noatime": true, "--executability": true,
	"-E": true, "--atimes": true, "-U": true, "--crtimes": true, "-N": true,
}

// StatConfirmable reports whether, with these options (prsync's --archive plus the
// options after --), a path that landed in a local DEST can be confirmed by an lstat: it
// has the source's type, size and mtime (regular files) or link target (symlinks). Other
// options (--no-times, -L, --link-dest, --backup, --chmod, filters, ...) need a dry-run
// pass of rsync itself.
func StatConfirmable(archive bool, args []string) bool {
	if !archive {
		return false
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if quickSafe[a] || statConfirmSafe[a] {
			continue
		}
		name, _, hasValue := strings.Cut(a, "=")
		if quickSafeValue[name] {
			if !hasValue {
				i++
			}
			continue
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && quickSafeValue[a[:2]] {
			continue
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.Trim(a[1:], "avqhPzHAXW8xSIcEUNtrlpgoD") == "" {
			continue // a cluster of safe short flags, as in -avH
		}
		return false
	}
	return true
}

// TimesKept reports whether rsync keeps the source's mtimes with these options (prsync's
// own and the ones after --, in order): --archive or -t (alone or in a cluster such as
// -rlt) turn it on, --no-times and --no-t off, the last one winning. Without mtimes, rsync's
// quick check cannot tell a copy from a stale file, and a dry run that is to prove a copy
// must compare checksums.
func TimesKept(args []string) bool {
	kept := false
	for _, a := range args {
		switch {
		case a == "--":
			return kept
		case a == "--archive" || a == "--times":
			kept = true
		case a == "--no-times" || a == "--no-t":
			kept = false
		case len(a) > 1 && a[0] == '-' && a[1] != '-' && !strings.Contains(a, "="):
			if strings.ContainsAny(a[1:], "at") {
				kept = true
			}
		}
	}
	return kept
}

// skipOptions are rsync options with which rsync leaves some listed paths out and still
// exits 0: filter rules and the size and existence limits.
var skipOptions = []string{"--exclude", "--exclude-from", "--filter", "--cvs-exclude",
	"--max-size", "--min-size", "--existing", "--ignore-non-existing"}

// SkipOption returns the first rsync option in args with which rsync may leave a listed
// path out and still exit 0 (--exclude, --filter, -F, -C, --max-size, --existing …), or "".
func SkipOption(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(a, "=")
		switch {
		case a == "--":
			return ""
		case quickSafeValue[name] && !hasValue:
			i++ // the value is the next argument
		case strings.HasPrefix(a, "--"):
			for _, o := range skipOptions {
				if name == o {
					return name
				}
			}
		default:
			for _, c := range ShortFlags(a) {
				if c == 'f' || c == 'F' || c == 'C' {
					return "-" + string(c)
				}
			}
		}
	}
	return ""
}

// LongValue returns the value of the first long option name in args (--name=V or --name
// V) before --, or "".
func LongValue(args []string, name string) string {
	for i, a := range args {
		switch {
		case a == "--":
			return ""
		case strings.HasPrefix(a, name+"="):
			return a[len(name)+1:]
		case a == name && i+1 < len(args):
			return args[i+1]
		}
	}
	return ""
}

// shortValue are the short options of rsync that take a value.
const shortValue = "BTefM@"

// ShortFlags returns the option letters of a cluster of short options ("-avz"), up to and
// including the first one that takes a value (the rest of the cluster is that value), or
// "" when a is not such a cluster.
func ShortFlags(a string) string {
	if len(a) < 2 || a[0] != '-' || a[1] == '-' {
		return ""
	}
	if i := strings.IndexAny(a[1:], shortValue); i >= 0 {
		return a[1 : i+2]
	}
	return a[1:]
}

// DirLinks says which symlinks in a local DEST rsync's receiver goes through where the
// source has a directory.
type DirLinks int

const (
	// DirLinksReplaced: none. rsync deletes such a symlink and makes a real directory in
	// its place, so nothing below it is in DEST until rsync has run.
	DirLinksReplaced DirLinks = iota
	// DirLinksInTree: -K (--keep-dirlinks). rsync 3.5.0 keeps a symlink that resolves to
	// a directory beneath DEST (relative, staying in) and writes through it; below one
	// that leads out of DEST (absolute, or up past DEST's root) it fails each path with
	// "Too many levels of symbolic links" (code 23). Older rsyncs go through any, which
	// a look that goes through fewer never claims too much of.
	DirLinksInTree
	// DirLinksAny: -K with --insecure-links. rsync goes through any symlink to a
	// directory, in DEST or out of it.
	DirLinksAny
)

// longValue are rsync's long options that take a value, which may be the next argument.
var longValue = map[string]bool{
	"--filter": true, "--exclude": true, "--exclude-from": true, "--include": true,
	"--include-from": true, "--files-from": true, "--chmod": true, "--chown": true,
	"--usermap": true, "--groupmap": true, "--backup-dir": true, "--suffix": true,
	"--compare-dest": true, "--copy-dest": true, "--link-dest": true, "--max-size": true,
	"--min-size": true, "--max-delete": true, "--modify-window": true, "--checksum-choice": true,
	"--cc": true, "--checksum-seed": true, "--iconv": true, "--protocol": true,
	"--stop-after": true, "--stop-at": true, "--write-batch": true, "--only-write-batch": true,
	"--read-batch": true, "--early-input": true, "--remote-option": true, "--stderr": true,
	"--out-format": true, "--log-format": true,
}

// DestDirLinks returns which symlinks in a local DEST rsync goes through with these
// options (prsync's and the ones after --): -K or --keep-dirlinks, alone or in a cluster
// such as -aK, and --insecure-links with it. Values are not options: -e 'ssh -K' and
// --exclude -K keep DEST's symlinks out of it.
func DestDirLinks(args []string) DirLinks {
	keep, insecure := false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(a, "=")
		switch {
		case a == "--":
			i = len(args)
		case a == "--keep-dirlinks":
			keep = true
		case a == "--insecure-links":
			insecure = true
		case strings.HasPrefix(a, "--"):
			if (quickSafeValue[name] || longValue[name]) && !hasValue {
				i++ // the value is the next argument
			}
		default:
			f := ShortFlags(a)
			keep = keep || strings.ContainsRune(f, 'K')
			if f != "" && strings.ContainsRune(shortValue, rune(f[len(f)-1])) && len(f) == len(a)-1 {
				i++ // -e ssh: the value is the next argument
			}
		}
	}
	switch {
	case keep && insecure:
		return DirLinksAny
	case keep:
		return DirLinksInTree
	}
	return DirLinksReplaced
}
