package cli

import "strings"

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

// quickCheckSafe reports whether prsync's own up-to-date check decides exactly as rsync
// would with these options (prsync's --archive plus the options after --).
func quickCheckSafe(args []string) bool {
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
