package splitter

import "golang.org/x/sys/unix"

// networkFS reports whether path is on a filesystem whose lookups cross a network; false
// when it cannot tell.
func networkFS(path string) bool {
	var st unix.Statfs_t
	if path == "" || unix.Statfs(path, &st) != nil {
		return false
	}
	return networkMagic(int64(st.Type))
}
