package rsync

import "strings"

// Advice is a hint for failed paths that share a cause, told from a parsed message (or,
// for ContentDiffers to StampDiffers, from the verification pass). The advices are ranked: where a
// path's reason joins two messages, the first in this list wins.
type Advice uint8

// The advices, in rank order.
const (
	NoAdvice Advice = iota
	// ContentDiffers: the checksum pass found other content behind the same size and mtime.
	ContentDiffers
	// SourceChanged: the checksum pass lists the source with another size or mtime than
	// it was copied with.
	SourceChanged
	// DestChanged: the source is as it was copied, DEST's size or mtime is not.
	DestChanged
	// StampDiffers: the source's and DEST's size or mtime differ, and nothing says what
	// was copied (the path was up to date).
	StampDiffers
	// ReadOnlyFS: EROFS.
	ReadOnlyFS
	// ImmutableEntry: delete_file could not remove an entry (EPERM).
	ImmutableEntry
	// DeletionSkipped: an I/O error on the sender, so the receiver deleted nothing.
	DeletionSkipped
	// ImmutableDir: mkstemp or rename in DEST failed with EPERM.
	ImmutableDir
	// DaemonUID: the receiving side of a daemon module got EACCES (it runs as nobody).
	DaemonUID
	// DestNotWritable: the receiving side got EACCES.
	DestNotWritable
	// SourceNotReadable: the sender got EACCES.
	SourceNotReadable
	// DaemonExcluded: the daemon's filter refused the path.
	DaemonExcluded
	// TypeClash: DEST has a directory where the source has a file, or the other way round.
	TypeClash
	// SourceDirMissing: the sender could not enter a source directory.
	SourceDirMissing
	// NoXattrs: an xattr call got EOPNOTSUPP.
	NoXattrs
	// NoACLs: an ACL call got EOPNOTSUPP.
	NoACLs
	// SourceNotRemoved: --remove-source-files could not remove the source.
	SourceNotRemoved
	// UntrustedLink: rsync refuses a symlink owned by another user.
	UntrustedLink
	// FarSideHasIt: rsync called a path vanished that a listing of the far side shows.
	FarSideHasIt
	// NoRoom: writing the file failed with ENOSPC or EDQUOT.
	NoRoom
	// TooLarge: writing the file failed with EFBIG.
	TooLarge
)

var advice = [...]string{
	NoAdvice:          "",
	ContentDiffers:    "DEST holds other content with the source's size and mtime, which rsync's quick check cannot see: copy those paths again with the --failed list and `-- --checksum`",
	SourceChanged:     "the source changed after rsync copied it (its size or mtime is not what was copied): copy those paths again with the --failed list once nothing writes to them",
	DestChanged:       "DEST's copy changed after rsync wrote it (the source's size and mtime are as copied, DEST's are not): something else writes into DEST; copy those paths again with the --failed list",
	StampDiffers:      "the source's and DEST's size or mtime differ, and this run holds no record of what was copied (the path was up to date): one of them changed after the quick check; copy those paths again with the --failed list",
	ReadOnlyFS:        "the destination file system is mounted read-only",
	ImmutableEntry:    "DEST does not let rsync remove an entry: an immutable or append-only file or directory (lsattr shows it)",
	DeletionSkipped:   "rsync could not read all of a source directory, and so deleted nothing there: fix the source error it reported, then run again",
	ImmutableDir:      "the destination refuses new files there: an immutable or append-only directory or file (lsattr shows it), or a file system that does not allow it",
	DaemonUID:         "the rsync daemon cannot write into its module: it runs as `uid = nobody` unless rsyncd.conf says otherwise; set uid and gid for the module, or make its path writable for that user",
	DestNotWritable:   "the destination directory is not writable for the user rsync runs as",
	SourceNotReadable: "the source is not readable for the user prsync runs as",
	DaemonExcluded:    "the rsync daemon excludes these paths (exclude or filter in rsyncd.conf)",
	TypeClash:         "DEST has a directory where the source has a file (or the other way round): move it away, then re-run with the --failed list",
	SourceDirMissing:  "the source directory is missing or cannot be entered",
	NoXattrs:          "the destination file system does not support extended attributes (-X)",
	NoACLs:            "the destination file system does not support ACLs (-A)",
	SourceNotRemoved:  "the copy landed, but --remove-source-files could not remove the source",
	UntrustedLink:     "rsync refuses a symlink in the path owned by another user; run as its owner, or pass -- --insecure-links deliberately",
	FarSideHasIt:      "the far side lists the paths rsync called vanished, so its sender opened them elsewhere than where it lists them: rsync 3.5.0's daemon does this when --root names a SUBDIR of a module with `use chroot = no` (or with `/./` in its path); set `use chroot = yes` for the module, with no `/./` in its path, or make the SUBDIR a module of its own (`path` in rsyncd.conf), or give the module's top as --root and the paths with the SUBDIR in front (they then land under DEST/SUBDIR); see docs/rsync-messages.md",
	NoRoom:            "the destination is full (or its quota is): free space, then re-run with the --failed list",
	TooLarge:          "the destination file system cannot hold a file this large: copy it to another file system",
}

// String returns the hint, or "" for NoAdvice.
func (a Advice) String() string { return advice[a] }

// or returns the advice of a and b that ranks first.
func (a Advice) or(b Advice) Advice {
	if a == NoAdvice || (b != NoAdvice && b < a) {
		return b
	}
	return a
}

// The errnos the advice reads.
const (
	eperm      = 1
	eacces     = 13
	erofs      = 30
	eopnotsupp = 95 // Linux's number
	efbig      = 27
	enospc     = 28
	edquot     = 122 // Linux's number
)

// Advice returns the advice for a message. The side is read as rsync writes it: a
// "[Receiver]" is the receiver before it forks, setting DEST up, and its failures get the
// advice of rsync's exit code instead.
func (m Message) Advice() Advice {
	receiving := m.Side == "receiver" || m.Side == "generator"
	switch {
	case m.Errno == erofs:
		return ReadOnlyFS
	case m.Op == "delete" && m.Errno == eperm:
		return ImmutableEntry
	case m.Op == "skip deletion":
		return DeletionSkipped
	case m.Errno == eperm && (m.Op == "mkstemp" || m.Op == "rename"):
		return ImmutableDir
	case m.Errno == eacces && receiving && m.Module != "":
		return DaemonUID
	case m.Errno == eacces && receiving:
		return DestNotWritable
	case m.Errno == eacces && m.Side == "sender":
		return SourceNotReadable
	case m.Op == "daemon exclude":
		return DaemonExcluded
	case m.Op == "make way":
		return TypeClash
	case m.Op == "change_dir" && m.Side == "sender":
		return SourceDirMissing
	case m.Errno == eopnotsupp && (strings.Contains(m.Op, "xattr") || strings.Contains(m.Op, "xal_")):
		return NoXattrs
	case m.Errno == eopnotsupp && strings.Contains(m.Op, "acl"):
		return NoACLs
	case m.Op == "remove source":
		return SourceNotRemoved
	case m.Op == "untrusted link":
		return UntrustedLink
	case m.NoSpace || m.Errno == edquot:
		return NoRoom
	case m.Errno == efbig && m.Op == "write":
		return TooLarge
	}
	return NoAdvice
}

// AdviceOf returns the advice for one line of rsync's output (ParseMessage, then Advice).
func AdviceOf(line string) Advice {
	if line == "" {
		return NoAdvice
	}
	return ParseMessage([]byte(line)).Advice()
}
