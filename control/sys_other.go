//go:build !unix

package control

import "io/fs"

// fileOwner cannot tell the owner of a file on this system.
func fileOwner(fs.FileInfo) (int, bool) { return -1, false }

// processGone cannot tell on this system.
func processGone(int) bool { return false }
