package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/prsync/prsync/control"
	"github.com/prsync/prsync/internal/clash"
)

// checkOutputs refuses, before anything is created or truncated, an output that is a
// file the run reads or another output (clash.Find), then an output that cannot be
// written.
func (r *runner) checkOutputs() error {
	f := &r.f
	if c := clash.Find(r.files()); c != nil {
		hint := c.HintText()
		if c.Out.Flag == "--failed" && !c.Other.Out {
			// the retry loop: prsync --failed failed.list DEST < failed.list
			hint = fmt.Sprintf("write the new list to another file, then move it over the old one: --failed %s.next", f.Failed)
		}
		return usage(c.Error(), hint)
	}
	if f.Failed != "" {
		if err := writable(f.Failed); err != nil {
			return usage(fmt.Sprintf("--failed: %v", err), "")
		}
	}
	if f.PathsLog != "" {
		if err := writable(f.PathsLog); err != nil {
			return usage(fmt.Sprintf("--paths-log: %v", err), "")
		}
	}
	if f.MetricsFile != "" {
		if err := replaceable(f.MetricsFile); err != nil {
			return usage(fmt.Sprintf("--metrics-file %s: %v", f.MetricsFile, err), "")
		}
	}
	return nil
}

// files returns what the run reads and writes, the input first: the list (stdin or
// --from), the control socket (it does not exist yet: its path), stdout when it is a file
// (the events), --failed, --metrics-file and --paths-log. A list piped in through another
// program cannot be told apart from any other pipe.
func (r *runner) files() []clash.File {
	f := &r.f
	const list = "the list prsync reads"
	var files []clash.File
	if f.From != "" && f.From != "-" {
		if fi := clash.StreamInfo(r.input); fi != nil {
			files = append(files, clash.File{Flag: "--from", Path: f.From, Info: fi, Noun: list})
		}
	} else if fi := clash.StreamInfo(r.stdin); fi != nil {
		files = append(files, clash.File{Flag: "stdin", Info: fi, Noun: list})
	}
	if !f.NoControl {
		dir, _ := control.LookupDir() // the directory it would be in, also when it is not there yet
		files = append(files, clash.File{Flag: "the control socket", Path: control.SocketPath(dir, os.Getpid()), Out: true})
	}
	if fi := clash.StreamInfo(r.stdout); fi != nil {
		files = append(files, clash.File{Flag: "stdout", Info: fi, Out: true})
	}
	if f.Failed != "" {
		files = append(files, clash.File{Flag: "--failed", Path: f.Failed, Out: true})
	}
	if f.MetricsFile != "" {
		files = append(files, clash.File{Flag: "--metrics-file", Path: f.MetricsFile, Out: true})
	}
	if f.PathsLog != "" {
		files = append(files, clash.File{Flag: "--paths-log", Path: f.PathsLog, Out: true})
	}
	return files
}

// writable returns the error that opening path for writing would fail with, without
// opening it: a file there must be writable and no directory; a missing one must have a
// directory that may be written (where a dangling symlink leads, resolved as the kernel
// resolves it).
func writable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		err = syscall.EISDIR
	case err == nil:
		err = syscall.Access(path, 2) // W_OK
	case errors.Is(err, fs.ErrNotExist):
		err = syscall.Access(filepath.Dir(clash.Resolve(path)), 2|1) // W_OK|X_OK
	default:
		err = bare(err)
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return nil
}

// replaceable returns the error that the metrics file's first write would fail with,
// without writing it: a temp file is created in its directory and renamed over it
// (metrics.replace). It refuses a device or a pipe, which the rename would replace.
func replaceable(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		err = bare(err)
	case !fi.IsDir():
		err = syscall.ENOTDIR
	default:
		err = syscall.Access(dir, 2|1) // W_OK|X_OK
	}
	if err != nil {
		return fmt.Errorf("cannot create a file in %s: %w", dir, err)
	}
	fi, err = os.Lstat(path)
	switch {
	case err != nil || fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0:
		return nil // the rename replaces a symlink itself
	case fi.IsDir():
		return fmt.Errorf("cannot replace it: %w", syscall.EISDIR)
	}
	// a device (/dev/null) or a pipe: the rename would put a file in its place
	return errors.New("cannot replace it: not a regular file")
}
