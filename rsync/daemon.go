package rsync

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// An rsync daemon's side of a session, as its client sees it.

var greetingRE = regexp.MustCompile(`^@RSYNCD: (\d+)`)

// ParseGreeting reads a daemon's first line, "@RSYNCD: 32.0 sha512 …", and returns the
// protocol it speaks.
func ParseGreeting(line string) (int, error) {
	m := greetingRE.FindStringSubmatch(line)
	if m == nil {
		return 0, fmt.Errorf("not an rsync daemon: it said %q", strings.TrimSpace(line))
	}
	return strconv.Atoi(m[1])
}

// ErrorLine returns the first line of an rsync client's output that is an error of the
// daemon's (@ERROR: …) or of rsync's (ERROR: …), or "".
func ErrorLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "@ERROR") || strings.HasPrefix(l, "ERROR:") {
			return l
		}
	}
	return ""
}

// AdmitOption makes an rsync client say when a daemon has admitted its session (Admitted).
const AdmitOption = "--verbose"

// Admitted reports whether the output of an rsync client run with AdmitOption says that
// the daemon admitted its session: it says "building file list" (a push) or "receiving
// file list" (a pull) once the module's checks have passed, and a refusal (@ERROR) before.
func Admitted(out string) bool { return strings.Contains(out, "file list") }

// connOptions are the rsync options that shape how an rsync connects to a daemon, each
// with whether it takes a value (after = or as the next word).
var connOptions = map[string]bool{"--password-file": true, "--address": true, "--sockopts": true,
	"--contimeout": true, "--ipv4": false, "--ipv6": false, "-4": false, "-6": false}

// ConnectionOptions returns the options of args (up to --) that shape how an rsync
// connects to a daemon, with their values: --password-file, --address, --sockopts,
// --contimeout, and -4, -6 (--ipv4, --ipv6).
func ConnectionOptions(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, _, hasValue := strings.Cut(a, "=")
		takes, ok := connOptions[name]
		if !ok {
			continue
		}
		out = append(out, a)
		if takes && !hasValue && i+1 < len(args) {
			out = append(out, args[i+1])
			i++
		}
	}
	return out
}
