package splitter

import (
	"cmp"
	"errors"
	"syscall"
)

// CRLF is the reason a record fails when it ends in CR and only the name without the CR
// exists: a line of a list written with CRLF (Windows) line ends. Such a path is not
// vanished, which would claim that it was there and went.
const CRLF = `the record ends in CR, and only the name without the CR exists: the list has CRLF line ends (convert it with tr -d '\r')`

// CRLF reports whether rec, a record of a newline-separated list with a local source,
// ends in CR while the name without the CR exists and the name with it does not: the
// mark of a list with CRLF line ends. A name that really ends in CR (it exists as such)
// does not. The path is taken as the splitter takes it: relative to Root, else to Cwd,
// and absolute as given. With NUL-separated records a CR is a byte of the name, and a
// remote source cannot be looked at: then it reports false.
func (c Config) CRLF(rec []byte) bool {
	if c.Sep != '\n' || c.RemoteSrc != "" {
		return false
	}
	p := rec
	if c.Sizes {
		var err error
		if _, p, err = SplitSized(rec); err != nil {
			return false
		}
	}
	if !endsInCR(p) {
		return false
	}
	abs := string(p)
	if abs[0] != '/' {
		abs = cmp.Or(c.Root, c.Cwd) + "/" + abs
	}
	return onlyWithoutCR(abs)
}

// crlf is Config.CRLF for a record examine has resolved: path is its path part, abs the
// absolute path to lstat.
func (s *Splitter) crlf(path []byte, abs string) bool {
	return s.cfg.Sep == '\n' && s.cfg.RemoteSrc == "" && endsInCR(path) && onlyWithoutCR(abs)
}

// endsInCR reports whether a path ends in CR and holds more than the CR.
func endsInCR(p []byte) bool { return len(p) > 1 && p[len(p)-1] == '\r' }

// onlyWithoutCR reports whether abs, which ends in CR, does not exist while abs without
// its CR does.
func onlyWithoutCR(abs string) bool {
	var st syscall.Stat_t
	if err := syscall.Lstat(abs, &st); !errors.Is(err, syscall.ENOENT) {
		return false
	}
	return syscall.Lstat(abs[:len(abs)-1], &st) == nil
}
