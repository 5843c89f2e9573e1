package cli

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ttyInput is the list read from a terminal that is prsync's controlling terminal. It
// reads only while prsync's process group is the terminal's foreground group, and only
// once a line is there to read, so that prsync never sits in a read(2) of the terminal:
// from the background, that read stops the whole process (SIGTTIN), and a read stopped
// so is restarted, and stops it again, each time it is continued. timeout 4 prsync DEST,
// run from a script (timeout puts itself and prsync in a group of their own, in the
// background), stayed stopped for ever after timeout's SIGTERM and SIGCONT, its summary
// sometimes written. In the background it waits, running, until it is brought to the
// foreground (fg), or the run ends.
type ttyInput struct {
	f *os.File
}

// ttyPoll is how often a read from the background looks again, and the longest wait for a
// line before it looks.
const ttyPoll = 200 * time.Millisecond

func (t ttyInput) Read(b []byte) (int, error) {
	fd := int(t.f.Fd())
	for {
		fg, err := foreground(fd)
		if err != nil {
			return t.f.Read(b) // not prsync's controlling terminal: a read cannot stop it
		}
		if !fg {
			time.Sleep(ttyPoll)
			continue
		}
		var set unix.FdSet
		set.Set(fd)
		tv := unix.NsecToTimeval(ttyPoll.Nanoseconds())
		n, err := unix.Select(fd+1, &set, nil, nil, &tv)
		switch {
		case errors.Is(err, unix.EINTR), err == nil && n == 0:
			continue // a signal, or nothing to read yet: look at the foreground again
		case err != nil:
			return t.f.Read(b)
		}
		return t.f.Read(b)
	}
}

// foreground reports whether prsync's process group is the foreground group of the
// terminal fd; an error when fd is not prsync's controlling terminal.
func foreground(fd int) (bool, error) {
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil {
		return false, err
	}
	return pgrp == unix.Getpgrp(), nil
}
