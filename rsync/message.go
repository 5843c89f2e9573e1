package rsync

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// Kind is what an rsync stderr line says about the path it names.
type Kind int

// The kinds of Message.
const (
	// KindOther is a line that says nothing prsync can use about a path.
	KindOther Kind = iota
	// KindFailed: the path was not copied (or not completely: attributes, links).
	KindFailed
	// KindVanished: the source path is gone (missing at the start, or deleted during the copy).
	KindVanished
)

// Scope says which paths of a chunk a Message concerns.
type Scope int

// The scopes of Message.
const (
	// ThePath: the named path (or its temp file) only.
	ThePath Scope = iota
	// Below: every path below the named directory (rsync could not make or enter it).
	Below
)

// Message is one rsync stderr line, parsed.
type Message struct {
	// Side is "sender", "receiver", "generator", as rsync writes it ("Receiver" is the
	// receiver before it forks), or "" when rsync does not say.
	Side string
	// Op is the operation, such as "link_stat", "mkstemp", "rename", "vanished"; for a
	// line that names no path it knows, the function of "function: ...", or "".
	Op     string
	Name   []byte // the path it names, decoded; nil when it names none
	Module string // the daemon module of "(in MODULE)", or ""
	Errno  int    // the errno in "(N)" at the end, or 0
	Kind   Kind
	Scope  Scope
	// Session is set for a line that refuses or breaks the whole session.
	Session Session
	// NoSpace: ENOSPC (the destination is full).
	NoSpace bool
	// Stops: rsync exits right after this message, which names the one path it could not
	// go on with (see stopping).
	Stops bool
	// MkdirRace: another rsync created the same directory first (--mkpath to a daemon).
	MkdirRace bool
	// ReplaceRace: rsync found a non-directory where the source has a directory (a
	// symlink in DEST, say), and another rsync replaced it with a directory before this
	// one could: "delete_file: unlink(x/t) failed: Is a directory (21)".
	ReplaceRace bool
}

// Session is a failure of the whole rsync session, told apart by rsync's text (several
// share an exit code: a full daemon and an unknown module both exit 5).
type Session int

// The sessions failures rsync and ssh report.
const (
	NoSession Session = iota
	// MaxConnections: "@ERROR: max connections (N) reached -- try again later" (exit 5).
	MaxConnections
	// SSHRefused: sshd dropped the connection before the key exchange, as its
	// MaxStartups does under many concurrent logins (exit 255).
	SSHRefused
	// UnknownModule: "@ERROR: Unknown module 'x'" (exit 5).
	UnknownModule
	// AuthFailed: "@ERROR: auth failed on module m" (exit 5).
	AuthFailed
	// AccessDenied: "@ERROR: access denied to m from HOST" (hosts allow/deny; exit 5).
	AccessDenied
	// ReadOnly: "ERROR: module is read only" (exit 1, like a bad option).
	ReadOnly
	// RefusedOption: the daemon refuses an option ("refuse options"; exit 1).
	RefusedOption
	// ConnectFailed: the host or daemon cannot be reached (exit 10, or 255 over ssh).
	ConnectFailed
	// HostUnknown: the host name does not resolve (often a local name with a colon).
	HostUnknown
	// SSHAuth: ssh could not log in (exit 255).
	SSHAuth
	// WriteOnly: "ERROR: module is write only" (a pull from a write-only module; exit 1).
	WriteOnly
	// ModulePath: "@ERROR: chdir failed": the daemon cannot enter the module's path (exit 5).
	ModulePath
	// PreXfer: the module's "pre-xfer exec" refused the transfer (exit 4).
	PreXfer
)

// Transient reports whether a session failure is worth retrying: the far side is full
// now, or could not be reached.
func (s Session) Transient() bool {
	return s == MaxConnections || s == SSHRefused || s == ConnectFailed
}

// Refusal reports whether the far side is up but accepts no more sessions now: the
// number of concurrent rsyncs should come down to what it accepted.
func (s Session) Refusal() bool { return s == MaxConnections || s == SSHRefused }

// String names the session failure.
func (s Session) String() string {
	switch s {
	case MaxConnections:
		return "max connections"
	case SSHRefused:
		return "ssh connection refused at key exchange"
	case UnknownModule:
		return "unknown module"
	case AuthFailed:
		return "authentication failed"
	case AccessDenied:
		return "access denied"
	case ReadOnly:
		return "read-only module"
	case RefusedOption:
		return "option refused by the daemon"
	case ConnectFailed:
		return "cannot connect"
	case HostUnknown:
		return "unknown host"
	case SSHAuth:
		return "ssh login failed"
	case WriteOnly:
		return "write-only module"
	case ModulePath:
		return "module path unusable"
	case PreXfer:
		return "pre-xfer exec refused"
	}
	return ""
}

// sessionLines are the substrings that mark session failures, checked in order.
var sessionLines = []struct {
	text string
	s    Session
}{
	{"max connections (", MaxConnections},
	{"kex_exchange_identification:", SSHRefused},
	{"ssh_exchange_identification:", SSHRefused},
	{"@ERROR: Unknown module", UnknownModule},
	{"@ERROR: auth failed", AuthFailed},
	{"@ERROR: access denied", AccessDenied},
	{"module is read only", ReadOnly},
	{"option may not be used with this server", RefusedOption},
	{"The server is configured to refuse", RefusedOption},
	{"module is write only", WriteOnly},
	{"@ERROR: chdir failed", ModulePath},
	{"pre-xfer exec returned failure", PreXfer},
	{"failed to connect to", ConnectFailed},
	{"ssh: connect to host", ConnectFailed},
	{"Could not resolve hostname", HostUnknown},
	{"Name or service not known", HostUnknown},
	{"Permission denied (publickey", SSHAuth},
	{"Host key verification failed", SSHAuth},
}

// StatedLimit returns the most sessions a far side says it admits, from the line with
// which it refused one: N of an rsync daemon's "@ERROR: max connections (N) reached -- try
// again later" (clientserver.c; N is the module's setting, other clients' sessions
// included). It returns 0 for a line that states no limit, such as sshd's refusals.
func StatedLimit(line string) int {
	const pre = "max connections ("
	i := strings.Index(line, pre)
	if i < 0 {
		return 0
	}
	rest := line[i+len(pre):]
	j := strings.IndexByte(rest, ')')
	if j < 0 {
		return 0
	}
	n, err := strconv.Atoi(rest[:j])
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// messageForm is one form of rsync message: its text's prefix, the operation it names,
// and what a failure of it means for the named path.
type messageForm struct {
	prefix string
	op     string
	scope  Scope
}

// verbs maps the operation words of rsync's per-file messages (after "rsync: [side] ")
// to what a failure of that operation means for the named path. Every one of them names
// the path with full_fname(): quoted, relative to the module in a daemon, followed by
// " (in MODULE)". Names are matched by prefix of the message text.
var verbs = []messageForm{
	{"link_stat ", "link_stat", ThePath},
	{"send_files failed to open ", "open", ThePath},
	{"read errors mapping ", "read", ThePath},
	{"readlink_stat(", "readlink", ThePath},
	{"readlink ", "readlink", ThePath},
	{"mkstemp ", "mkstemp", ThePath},
	{"rename ", "rename", ThePath},
	{"write failed on ", "write", ThePath},
	{"fsync failed on ", "write", ThePath},
	{"close failed on ", "write", ThePath},
	{"open ", "open", ThePath},
	{"failed to open ", "open", ThePath},
	{"failed to set times on ", "times", ThePath},
	{"failed to set permissions on ", "perms", ThePath},
	{"chgrp ", "chown", ThePath},
	{"chown ", "chown", ThePath},
	{"symlink ", "symlink", ThePath},
	{"link ", "link", ThePath},
	{"mknod ", "mknod", ThePath},
	{"set_acl: ", "acl", ThePath},
	{"delete_file: ", "delete", Below},
	{"rsync_xal_set: ", "xattr", ThePath},
	{"rsync_xal_get: ", "xattr", ThePath},
	{"get_xattr_data: ", "xattr", ThePath},
	{"recv_generator: mkdir ", "mkdir", Below},
	{"recv_generator: failed to stat ", "stat", ThePath},
	{"mkdir ", "mkdir", Below},
	{"change_dir ", "change_dir", Below},
	{"opendir ", "opendir", Below},
	{"stat ", "stat", ThePath},
	{"lstat ", "stat", ThePath},
	{"unlink ", "unlink", ThePath},
	{"make_bak_dir ", "backup", ThePath},
	{"keep_backup failed: ", "backup", ThePath},
	{"fstat ", "stat", ThePath},
	{"ftruncate ", "write", ThePath},
	{"do_fsync ", "write", ThePath},
	{"receive_sums ", "read", ThePath},
	{"chdir ", "chdir", Below},
}

// stopping are the prefixes of the per-file messages after which rsync 3.5.0 exits at once
// (exit_cleanup(RERR_FILEIO), code 11) instead of going on with the next file: the
// receiver's "write failed on NAME" (receive_data: ENOSPC, EDQUOT, EFBIG, EIO while
// writing one file), "fsync failed on NAME" (--fsync) and "close failed on TMPNAME"
// (recv_files: a close that reports the write error, as NFS does). Each names the one path
// it stopped on; the paths after it were never tried.
var stopping = []string{"write failed on ", "fsync failed on ", "close failed on "}

// bareNames are messages that print a name raw, without quotes (or quoted, but not by
// full_fname), up to ": ERROR (N)" or the end of the line.
var bareNames = []messageForm{
	{"cannot delete non-empty directory: ", "make way", ThePath},
	{"could not make way for new directory: ", "make way", Below},
	{"could not make way for new ", "make way", ThePath}, // regular file, symlink, device, special, hard link
	{"skipping non-regular file ", "skip", ThePath},
	{"skipping daemon-excluded file ", "daemon exclude", ThePath},
	{"skipping daemon-excluded directory ", "daemon exclude", Below},
	{"ERROR: daemon refused to receive file ", "daemon exclude", ThePath},
	{"ERROR: daemon refused to receive directory ", "daemon exclude", Below},
	{"skipping directory ", "skip", ThePath},
	{"skipping unsafe symlink ", "skip", ThePath},
	{"ignoring unsafe symlink ", "skip", ThePath},
	{"symlink has no referent: ", "skip", ThePath},
	{"cannot convert filename: ", "skip", ThePath},
	{"sender failed to remove ", "remove source", ThePath},
}

// ParseMessage parses one rsync stderr line. Lines that name no path and mark no session
// failure come back with KindOther and a nil Name.
func ParseMessage(line []byte) Message {
	var m Message
	for _, sl := range sessionLines {
		if bytes.Contains(line, []byte(sl.text)) {
			m.Session = sl.s
			return m
		}
	}
	m.NoSpace = bytes.Contains(line, []byte("No space left on device (28)"))
	s := line
	s, _ = bytes.CutPrefix(s, []byte("rsync: "))
	if bytes.HasPrefix(s, []byte("[")) {
		if i := bytes.IndexByte(s, ']'); i > 0 {
			m.Side = string(s[1:i])
			s = bytes.TrimPrefix(s[i+1:], []byte(" "))
		}
	}
	m.Errno = trailingErrno(s)
	if rest, ok := bytes.CutPrefix(s, []byte("file has vanished: ")); ok {
		m.Op, m.Kind = "vanished", KindVanished
		m.Name, m.Module = quoted(rest)
		return m
	}
	for _, b := range bareNames {
		rest, ok := bytes.CutPrefix(s, []byte(b.prefix))
		if !ok {
			continue
		}
		if b.prefix == "could not make way for new " {
			if i := bytes.Index(rest, []byte(": ")); i >= 0 {
				rest = rest[i+2:] // "regular file: NAME"
			}
		}
		m.Op, m.Kind, m.Scope = b.op, KindFailed, b.scope
		if len(rest) > 0 && rest[0] == '"' {
			m.Name, m.Module = quoted(rest)
		} else if len(rest) > 0 {
			if m.Errno != 0 {
				if i := bytes.LastIndex(rest, []byte(": ")); i > 0 {
					rest = rest[:i] // "NAME: Operation not permitted (1)"
				}
			}
			m.Name = Unescape(bytes.TrimSuffix(rest, []byte("/")))
		}
		return m
	}
	for _, v := range verbs {
		rest, ok := bytes.CutPrefix(s, []byte(v.prefix))
		if !ok {
			continue
		}
		m.Op = v.op
		name, mod := nameAt(rest)
		if name == nil {
			return m
		}
		m.Op, m.Scope, m.Name, m.Module, m.Kind = v.op, v.scope, name, mod, KindFailed
		m.Stops = m.Side != "sender" && slices.Contains(stopping, v.prefix)
		if v.op == "link_stat" && (m.Errno == 2 || m.Errno == 20) {
			m.Kind = KindVanished // the source is not there (ENOENT, ENOTDIR)
		}
		if v.op == "mkdir" && m.Errno == 17 {
			m.MkdirRace = true
		}
		if v.op == "delete" && m.Errno == 21 && bytes.HasPrefix(rest, []byte("unlink(")) {
			m.ReplaceRace = true // unlink never meets a directory it did not race
		}
		if v.op == "rename" {
			// rename "TMP" -> "FINAL": the final name is the path, whatever the temp or
			// partial-dir name was
			if i := bytes.Index(rest, []byte(`" -> "`)); i >= 0 {
				if fin, _ := quoted(rest[i+5:]); fin != nil {
					m.Name = fin
				}
			}
		}
		return m
	}
	for _, o := range opLines {
		if bytes.HasPrefix(s, []byte(o.prefix)) {
			m.Op = o.op
			return m
		}
	}
	if i := bytes.Index(s, []byte(": ")); i > 0 && isWord(s[:i]) {
		m.Op = string(s[:i]) // "get_xattr_names: llistxattr(...) failed"
	}
	return m
}

// opLines are messages that name an operation but no path prsync attributes.
var opLines = []struct {
	prefix string
	op     string
}{
	{"IO error encountered -- skipping file deletion", "skip deletion"},
	{"refusing to follow a symlink owned by an untrusted user", "untrusted link"},
	{"change_dir#", "change_dir"}, // main.c's, on the whole source or DEST
}

// isWord reports whether s is a C identifier in lower case, as rsync's function names are.
func isWord(s []byte) bool {
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return len(s) > 0
}

// nameAt reads the name at the start of a message's rest: "NAME" (full_fname), or a
// call such as fsetxattr("NAME","user.x") or xacl_set(NAME, ACL_TYPE_ACCESS) or unlink(NAME).
func nameAt(rest []byte) ([]byte, string) {
	if len(rest) > 0 && rest[0] == '"' {
		return quoted(rest)
	}
	open := bytes.IndexByte(rest, '(')
	if open <= 0 || bytes.IndexByte(rest[:open], ' ') >= 0 {
		return nil, ""
	}
	in := rest[open+1:]
	if len(in) > 0 && in[0] == '"' {
		return quoted(in)
	}
	end := bytes.IndexAny(in, ",)")
	if end <= 0 {
		return nil, ""
	}
	return Unescape(in[:end]), ""
}

// quoted reads a name written by rsync's full_fname() at the start of s: "NAME", maybe
// followed by " (in MODULE)". The name ends at the first quote that is followed by the
// end of the line, a space, a colon, a comma or a closing parenthesis; names holding
// such a quote are misread, which only costs the reason of a failure, never its truth.
func quoted(s []byte) (name []byte, module string) {
	if len(s) == 0 || s[0] != '"' {
		return nil, ""
	}
	for i := 1; i < len(s); i++ {
		if s[i] != '"' {
			continue
		}
		if i+1 < len(s) && !bytes.ContainsRune([]byte(" :,)"), rune(s[i+1])) {
			continue
		}
		name = Unescape(s[1:i])
		if rest, ok := bytes.CutPrefix(s[i+1:], []byte(" (in ")); ok {
			if j := bytes.IndexByte(rest, ')'); j > 0 {
				module = string(rest[:j])
			}
		}
		return name, module
	}
	return nil, ""
}

// trailingErrno returns N of a line ending in "(N)", or 0.
func trailingErrno(s []byte) int {
	s = bytes.TrimRight(s, " ")
	if len(s) < 3 || s[len(s)-1] != ')' {
		return 0
	}
	i := bytes.LastIndexByte(s, '(')
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(string(s[i+1 : len(s)-1]))
	if err != nil {
		return 0
	}
	return n
}
