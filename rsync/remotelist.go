package rsync

import (
	"path"
	"strings"
)

// Remote lists: in a push, rsync's client is the sender, and it reads a local
// --files-from one byte per read(2), each after a poll(2) (io.c read_line, safe_read of 1
// byte). With --files-from=:NAME the far side opens NAME itself (options.c, on the
// server) and sends its contents over the protocol in blocks (io.c
// forward_filesfrom_data), with --from0 passed on to it. A daemon opens NAME relative to
// the module, after sanitizing it; a remote shell's server relative to the directory it
// starts in (the login's home). NAME must be on the host the transfer goes to.

// ListDir is the directory in DEST's root where prsync puts the lists that the far side
// reads for a push (--files-from=:NAME).
const ListDir = ".prsync-lists"

// ProtectLists is the filter rule that keeps ListDir, in the root of the transfer (DEST's
// root), from deletion: a deletion pass leaves it alone and never names it.
const ProtectLists = "--filter=P /" + ListDir + "/"

// ListPath returns NAME in ListDir under DEST as the far side opens it for
// --files-from=:NAME: relative to the module for a daemon, and DEST's own path over a
// remote shell (relative to the login's home when DEST's is).
func ListPath(dest, name string) string {
	p, _ := endpointPath(dest)
	return path.Join(p, ListDir, name)
}

// RemoteListArg is the option that makes rsync read its list from NAME in ListDir under
// DEST, on the far side.
func RemoteListArg(dest, name string) string { return "--files-from=:" + ListPath(dest, name) }

// ListDirArg is ListDir under DEST as rsync's destination argument, with its final slash.
func ListDirArg(dest string) string { return RootArg(dest) + ListDir + "/" }

// RootArg is DEST's root as rsync's destination argument: DEST with a final slash, unless
// it names a module's or a login's top (host::mod/, host:), where none is wanted.
func RootArg(dest string) string {
	if strings.HasSuffix(dest, "/") || strings.HasSuffix(dest, ":") {
		return dest
	}
	return dest + "/"
}

// RemoteListUsable reports whether the far side can be given a chunk's list for a push
// with these options, and else which option is in the way: with --iconv the names that
// the far side sends are converted from its character set (options.c filesfrom_convert),
// while prsync writes them in the local one; with -n (--dry-run) nothing may be written to
// DEST, a list included.
func RemoteListUsable(args []string) (bool, string) {
	for _, a := range args {
		if a == "--" {
			break
		}
		switch name, _, _ := strings.Cut(a, "="); {
		case name == "--iconv", name == "--dry-run":
			return false, name
		case len(a) > 1 && a[0] == '-' && a[1] != '-' && shortHas(a[1:], 'n'):
			return false, a + " (-n, --dry-run)"
		}
	}
	return true, ""
}

// ListUnread reports whether an rsync told to read its list on the far side failed
// because the far side could not, from its exit code, whether it logged a line and its
// stderr: it logged none, no session failure was reported (max connections, a read-only
// module), and it exited as rsync does when the server cannot open its --files-from or
// refuses its path. A daemon's client then says only "unexpected tag -7" (exit 12); a
// remote shell's server says "failed to open files-from file" (exit 1 for it, 12 for the
// client).
func (r *Result) ListUnread(code int, logged bool, stderr string) bool {
	if logged || r.Session != NoSession || (code != 12 && code != 1) {
		return false
	}
	return strings.Contains(stderr, "files-from") || (code == 12 && strings.Contains(stderr, "unexpected tag"))
}

// reachValue are the options, with whether they take a value, that say how an rsync
// reaches the far side and what runs there: the remote shell, the far side's rsync, the
// daemon's port and connection (ConnectionOptions), and options for the far side's rsync.
var reachValue = map[string]bool{
	"--rsh": true, "--rsync-path": true, "--port": true, "--remote-option": true,
	"--password-file": true, "--address": true, "--sockopts": true, "--contimeout": true,
	"--ipv4": false, "--ipv6": false, "--blocking-io": false, "--no-blocking-io": false,
}

// ReachOptions returns the options of args (up to --) that say how an rsync reaches the
// far side, with their values: -e/--rsh, --rsync-path, --port, -M/--remote-option, -4,
// -6, --blocking-io and ConnectionOptions'. A side session (a list's upload) runs with
// these and none of the copy's.
func ReachOptions(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "--") {
			name, _, hasValue := strings.Cut(a, "=")
			takes, ok := reachValue[name]
			if !ok {
				if longValue[name] && !hasValue {
					i++ // another option's value, such as --exclude -e
				}
				continue
			}
			out = append(out, a)
			if takes && !hasValue && i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			continue
		}
		flags := ShortFlags(a)
		if flags == "" {
			continue
		}
		for _, c := range flags {
			if c == '4' || c == '6' {
				out = append(out, "-"+string(c))
			}
		}
		last := flags[len(flags)-1]
		if !strings.ContainsRune(shortValue, rune(last)) {
			continue
		}
		v := a[len(flags)+1:]
		if v == "" && i+1 < len(args) {
			i++
			v = args[i]
		}
		if last == 'e' || last == 'M' {
			out = append(out, "-"+string(last), v)
		}
	}
	return out
}
