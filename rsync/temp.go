package rsync

import (
	"path"
	"strings"
)

// TempOf returns the file name that an rsync temp file name stands for: rsync's receiver
// writes NAME into ".NAME.XXXXXX" (6 random characters) beside it, and renames it when done.
func TempOf(tmp string) (string, bool) {
	if len(tmp) < 9 || tmp[0] != '.' || tmp[len(tmp)-7] != '.' {
		return "", false
	}
	if strings.ContainsAny(tmp[len(tmp)-6:], "./") {
		return "", false
	}
	return tmp[1 : len(tmp)-7], true
}

// ProtectTemp is the filter rule that keeps rsync's temp files (TempOf's ".NAME.XXXXXX")
// from deletion: another rsync may be writing them into the same directory now.
const ProtectTemp = "--filter=P .*.??????"

// landingOf maps a receiver-side name to the path it stands for: a temp file
// "dir/.NAME.XXXXXX" to "dir/NAME", and a --delay-updates file "dir/.~tmp~/NAME" to
// "dir/NAME". Other names come back unchanged.
func landingOf(p string) string {
	dir, base := path.Split(p)
	if d, ok := strings.CutSuffix(dir, ".~tmp~/"); ok {
		return d + base
	}
	if n, ok := TempOf(base); ok {
		return dir + n
	}
	return p
}
