package rsync

import "strings"

// IsDaemon reports whether an rsync source or destination is an rsync daemon
// (host::module or rsync://).
func IsDaemon(arg string) bool {
	if strings.HasPrefix(arg, "rsync://") {
		return true
	}
	i := strings.Index(arg, "::")
	return i > 0 && !strings.Contains(arg[:i], "/")
}

// IsRemote reports whether an rsync destination is on another host (host:path,
// host::module or rsync://).
func IsRemote(dest string) bool {
	if strings.HasPrefix(dest, "rsync://") {
		return true
	}
	i := strings.IndexByte(dest, ':')
	if i < 0 {
		return false
	}
	slash := strings.IndexByte(dest, '/')
	return slash < 0 || i < slash
}
