package control

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// DefaultDir returns the directory that holds the control sockets of the user's prsyncs,
// and creates it (mode 0700) when missing: $XDG_RUNTIME_DIR/prsync when XDG_RUNTIME_DIR
// is a directory of the user's with mode 0700, else /tmp/prsync-UID. It refuses a
// directory that is a symlink, is not the user's, or that others may enter.
func DefaultDir() (string, error) {
	return runtimeDir(os.Getenv("XDG_RUNTIME_DIR"), "/tmp", os.Getuid(), true)
}

// LookupDir returns the directory DefaultDir would use, and checks it as DefaultDir does,
// but creates nothing: a missing directory is an fs.ErrNotExist error (prsync doctor).
func LookupDir() (string, error) {
	return runtimeDir(os.Getenv("XDG_RUNTIME_DIR"), "/tmp", os.Getuid(), false)
}

// SocketPath returns the socket of the prsync with process ID pid in dir: DIR/PID.sock.
func SocketPath(dir string, pid int) string {
	return filepath.Join(dir, strconv.Itoa(pid)+".sock")
}

// socketPID returns the process ID a socket's file name holds, as SocketPath writes it.
func socketPID(name string) (int, bool) {
	s, ok := strings.CutSuffix(name, ".sock")
	if !ok || s == "" || strings.TrimLeft(s, "0123456789") != "" || s[0] == '0' {
		return 0, false
	}
	pid, err := strconv.Atoi(s)
	if err != nil {
		return 0, false
	}
	return pid, true
}

// runtimeDir is DefaultDir with its inputs given: the value of XDG_RUNTIME_DIR, the base
// of the fallback (/tmp), the user's uid, and whether to create the directory. The
// directory is returned also with an error, for messages.
func runtimeDir(xdg, tmp string, uid int, create bool) (string, error) {
	if xdg != "" && filepath.IsAbs(xdg) {
		if fi, err := os.Stat(xdg); err == nil && fi.IsDir() && fi.Mode().Perm() == 0o700 && ownedBy(fi, uid) {
			dir := filepath.Join(xdg, "prsync")
			return dir, privateDir(dir, uid, create)
		}
	}
	dir := filepath.Join(tmp, "prsync-"+strconv.Itoa(uid))
	return dir, privateDir(dir, uid, create)
}

// privateDir makes sure dir is a directory (not a symlink) owned by uid that no one else
// may enter, creating it if asked to. A missing dir is an fs.ErrNotExist error when not.
func privateDir(dir string, uid int, create bool) error {
	if create {
		// Mkdir never follows a symlink at dir: it fails with EEXIST, and Lstat sees it
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create the control directory: %w", err)
		}
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	return checkPrivate(dir, fi, uid)
}

// unixMode is a mode's permission bits as chmod and ls write them: with the setuid,
// setgid and sticky bits, which Go keeps apart from Perm (a mode of 1777 is not 0777).
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

// checkPrivate refuses a control directory that someone else could have made, or could
// enter: the socket's mode is not a guard on every system, the directory's is.
func checkPrivate(dir string, fi fs.FileInfo, uid int) error {
	owner, known := fileOwner(fi)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &Error{Msg: fmt.Sprintf("control directory %s is a symlink: refusing to use it", dir),
			Hint: "someone may be trying to catch prsync's socket: remove it if it is yours, else ask root to"}
	case !fi.IsDir():
		return &Error{Msg: fmt.Sprintf("control directory %s is not a directory", dir),
			Hint: "remove it if it is yours, else ask root to"}
	case !known:
		return &Error{Msg: fmt.Sprintf("control directory %s: cannot tell its owner on this system", dir)}
	case owner != uid:
		return &Error{Msg: fmt.Sprintf("control directory %s belongs to uid %d, not to uid %d: refusing to use it", dir, owner, uid),
			Hint: "someone may be trying to catch prsync's socket: ask root to remove it, or set XDG_RUNTIME_DIR to a private directory"}
	case fi.Mode().Perm()&0o077 != 0:
		return &Error{Msg: fmt.Sprintf("control directory %s has mode %04o: others may enter it", dir, unixMode(fi.Mode())),
			Hint: "make it private: chmod 700 " + dir}
	case fi.Mode().Perm()&0o700 != 0o700:
		return &Error{Msg: fmt.Sprintf("control directory %s has mode %04o: its owner cannot use it", dir, unixMode(fi.Mode())),
			Hint: "chmod 700 " + dir}
	}
	return nil
}

func ownedBy(fi fs.FileInfo, uid int) bool {
	owner, ok := fileOwner(fi)
	return ok && owner == uid
}

// Running returns, in order, the process IDs of the prsyncs with a socket in dir whose
// process lives; none when dir is missing. It only reads: unlike prsync ctl, it removes no
// stale socket (prsync doctor, which writes nothing).
func Running(dir string) []int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		if pid, ok := socketPID(e.Name()); ok && e.Type() == fs.ModeSocket && !processGone(pid) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}
