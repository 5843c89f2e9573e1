package rsync

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
)

// Banner is what `rsync --version` says of itself: the version, the protocol, and whether
// it is openrsync (the BSD rewrite that macOS 15.4 and later install as /usr/bin/rsync)
// rather than GNU rsync.
type Banner struct {
	Version   Version
	Protocol  int // 0 when the banner does not say
	OpenRsync bool
}

var protocolRE = regexp.MustCompile(`protocol version\s+(\d+)`)

// ParseBanner reads the output of rsync --version. GNU rsync writes
// "rsync  version 3.4.1  protocol version 32"; openrsync writes
// "openrsync: protocol version 29" and "rsync version 2.6.9 compatible".
func ParseBanner(out []byte) (Banner, bool) {
	v, ok := ParseVersion(out)
	if !ok {
		return Banner{}, false
	}
	b := Banner{Version: v, OpenRsync: bytes.Contains(out, []byte("openrsync"))}
	if m := protocolRE.FindSubmatch(out); m != nil {
		b.Protocol, _ = strconv.Atoi(string(m[1]))
	}
	return b, true
}

// VersionArgs is the version probe's command line: the run's options args, then
// --version. rsync reads every option before it answers --version, so that one it does
// not know fails the probe (exit 1, a syntax or usage error) before any banner.
func VersionArgs(args []string) []string {
	return append(append([]string(nil), args...), "--version")
}

// VersionReply is how an rsync answered the version probe (VersionArgs).
type VersionReply struct {
	Out  []byte // its standard output and error, together
	Code int    // its exit code; -1 when it did not start or was killed
	Err  error  // the error of running it, or nil
}

// Rejected reports a probe that rsync failed with exit 1 and no banner: it rejected the
// options.
func (v VersionReply) Rejected() bool {
	_, found := ParseBanner(v.Out)
	return v.Code == 1 && !found
}

// String names the rsync as its banner does: GNU rsync 3.4.3 (protocol 32), or openrsync
// ("rsync 2.6.9 compatible") (protocol 29).
func (b Banner) String() string {
	name := "GNU rsync " + b.Version.String()
	if b.OpenRsync {
		name = "openrsync (\"rsync " + b.Version.String() + " compatible\")"
	}
	if b.Protocol > 0 {
		name += " (protocol " + strconv.Itoa(b.Protocol) + ")"
	}
	return name
}

// KnownBad is a release of rsync (a range of versions, or openrsync) with a bug or a gap
// that breaks prsync's runs, or some of them.
type KnownBad struct {
	// From and To are the first and last versions with the problem (both included); a
	// zero To means From alone. Unused for OpenRsync.
	From, To Version
	// OpenRsync: the entry is about openrsync, whatever its version.
	OpenRsync bool
	// Trigger is the option (long form) that brings the problem out; "" when every run
	// meets it.
	Trigger string
	// What the problem is, and the fix (the release to move to).
	What, Fix string
	// Source cites where it is reported.
	Source string
}

// knownBad is the table of known-bad rsyncs; its entries cite their sources. Add one only
// with a reference a user can read.
var knownBad = []KnownBad{
	{
		// https://github.com/RsyncProject/rsync/issues/910 ("Security fix in flist.c breaks
		// --delete-missing-args with --files-from"): a missing entry that follows an
		// existing one ends the run with "invalid file mode 00" (exit 2) on the receiver.
		From: Version{3, 4, 3}, Trigger: "--delete-missing-args",
		What:   "rsync 3.4.3 fails --delete-missing-args with --files-from (invalid file mode 00, exit 2)",
		Fix:    "use rsync 3.4.4 or newer",
		Source: "https://github.com/RsyncProject/rsync/issues/910",
	},
	{
		// https://github.com/RsyncProject/rsync/issues/928: over ssh, a relative
		// --link-dest=../snap basis makes 3.4.3 discard updates ("failed verification").
		From: Version{3, 4, 3}, Trigger: "--link-dest",
		What:   "rsync 3.4.3 discards updates against a relative --link-dest basis (failed verification -- update discarded)",
		Fix:    "use rsync 3.4.4 or newer",
		Source: "https://github.com/RsyncProject/rsync/issues/928",
	},
	{
		// https://github.com/RsyncProject/rsync/issues/702 ("3.4.0 -H flag broken"):
		// hashtable errors and aborted transfers with -H; fixed in 3.4.1.
		From: Version{3, 4, 0}, Trigger: "--hard-links",
		What:   "rsync 3.4.0 aborts transfers with -H (Internal hashtable error, invalid path from sender)",
		Fix:    "use rsync 3.4.1 or newer",
		Source: "https://github.com/RsyncProject/rsync/issues/702",
	},
	{
		// https://github.com/RsyncProject/rsync/issues/715 (and PR #864): 3.4.0 to 3.4.2
		// break delta transfers through a directory symlink kept by -K.
		From: Version{3, 4, 0}, To: Version{3, 4, 2}, Trigger: "--keep-dirlinks",
		What:   "rsync 3.4.0 to 3.4.2 break delta transfers through symlinked directories with -K",
		Fix:    "use rsync 3.4.4 or newer",
		Source: "https://github.com/RsyncProject/rsync/issues/715",
	},
	{
		// macOS 15.4 and later link /usr/bin/rsync to openrsync ("openrsync: protocol
		// version 29, rsync version 2.6.9 compatible"): it accepts a subset of rsync's
		// options, no client --out-format, and exits only 0, 1 or 2. See
		// https://derflounder.wordpress.com/2025/04/06/rsync-replaced-with-openrsync-on-macos-sequoia/
		// and openrsync(1).
		OpenRsync: true,
		What:      "openrsync is not GNU rsync: no --out-format for the client, a subset of the options, and exit codes 0, 1 and 2 only, so prsync cannot account for the paths",
		Fix:       "install GNU rsync (brew install rsync) and pass --rsync $(brew --prefix)/bin/rsync",
		Source:    "https://derflounder.wordpress.com/2025/04/06/rsync-replaced-with-openrsync-on-macos-sequoia/",
	},
}

// KnownBadFor returns the entries of the known-bad table that b matches, in the table's
// order.
func KnownBadFor(b Banner) []KnownBad {
	var out []KnownBad
	for _, k := range knownBad {
		if k.OpenRsync {
			if b.OpenRsync {
				out = append(out, k)
			}
			continue
		}
		to := k.To
		if to == (Version{}) {
			to = k.From
		}
		if !b.OpenRsync && b.Version.AtLeast(k.From.Major, k.From.Minor, k.From.Patch) &&
			to.AtLeast(b.Version.Major, b.Version.Minor, b.Version.Patch) {
			out = append(out, k)
		}
	}
	return out
}

// Triggered reports whether the rsync options args bring the entry's problem out.
func (k KnownBad) Triggered(args []string) bool {
	switch k.Trigger {
	case "":
		return true
	case "--hard-links":
		return Preserves(args).HardLinks
	case "--keep-dirlinks":
		return DestDirLinks(args) != DirLinksReplaced
	}
	return HasLong(args, k.Trigger)
}

// HasLong reports whether args hold the long option name, alone or with =VALUE; values of
// other options (as in --exclude --link-dest) are not options.
func HasLong(args []string, name string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		n, _, hasValue := strings.Cut(a, "=")
		switch {
		case a == "--":
			return false
		case n == name:
			return true
		case len(a) > 2 && a[:2] == "--":
			if (quickSafeValue[n] || longValue[n]) && !hasValue {
				i++
			}
		default:
			if f := ShortFlags(a); f != "" && len(f) == len(a)-1 && strings.ContainsRune(shortValue, rune(f[len(f)-1])) {
				i++ // -e ssh: the value is the next argument
			}
		}
	}
	return false
}

// MinVersion is the oldest GNU rsync prsync is built for; an older one runs, warned, in
// the direct transport.
var MinVersion = Version{Major: 3, Minor: 1}

// Problem is what is wrong with an rsync for a run. A fatal one refuses the run, and is
// an error of prsync doctor; another is a warning of both when Applies (the run's options
// meet it), and of prsync doctor alone when not (a known-bad release's bug that the
// options do not bring out).
type Problem struct {
	Fatal, Applies bool
	// What is wrong, with its source; Fix what to do.
	What, Fix string
}

// Judge is the one rule that the run and prsync doctor apply to an rsync, from its banner
// and the run's options args: each entry of the known-bad table it matches, fatal when the
// options meet its trigger (openrsync, which every run meets, is fatal whatever the
// options), else a warning that does not apply; then a GNU rsync older than MinVersion, a
// warning that applies.
func Judge(b Banner, args []string) []Problem {
	var out []Problem
	for _, k := range KnownBadFor(b) {
		if k.Triggered(args) {
			out = append(out, Problem{Fatal: true, Applies: true, What: k.What + " (" + k.Source + ")", Fix: k.Fix})
		} else {
			out = append(out, Problem{What: k.What + ", which this run's options do not use (" + k.Source + ")", Fix: k.Fix})
		}
	}
	if !b.OpenRsync && !b.Version.AtLeast(MinVersion.Major, MinVersion.Minor, MinVersion.Patch) {
		out = append(out, Problem{Applies: true,
			What: "older than " + MinVersion.String() + ", which prsync is built for: it runs in the direct transport, and a copy may fail",
			Fix:  "install rsync " + MinVersion.String() + " or newer"})
	}
	return out
}
