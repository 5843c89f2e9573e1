package splitter

import "golang.org/x/sys/unix"

// networkFS reports whether path is on a filesystem whose lookups cross a network; false
// when it cannot tell.
func networkFS(path string) bool {
	var st unix.Statfs_t
	if path == "" || unix.Statfs(path, &st) != nil {
		return false
	}
	return networkNames[unix.ByteSliceToString(st.Fstypename[:])]
}

// networkNames are the f_fstypename values of macOS filesystems whose lookups cross a
// network.
var networkNames = map[string]bool{
	"nfs": true, "smbfs": true, "afpfs": true, "webdav": true, "cifs": true,
	"macfuse": true, "osxfuse": true, "osxfusefs": true, "fusefs": true,
}
