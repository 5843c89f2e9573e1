// Package clash finds a file that a command would write over while it reads it, or write twice.
package clash

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// File is a file a command reads or writes: named by a path, or a stream it was given
// open (stdin, stdout).
type File struct {
	// Flag is what names it on the command line, for messages: "--failed", "--from",
	// "stdin", "-o", "the control socket".
	Flag string
	// Path is the path as given; "" for a stream.
	Path string
	// Info is the stream's Stat, or, for a path the command has opened already, the open
	// file's (so that what is checked is what is read); nil otherwise.
	Info fs.FileInfo
	// Out says the command writes it; otherwise it reads it.
	Out bool
	// Noun says what the command reads there ("the list prsync reads"); "" for "the input".
	Noun string
}

func (f File) String() string {
	if f.Path == "" {
		return f.Flag
	}
	return f.Flag + " " + f.Path
}

// Clash is an output that is a file the command reads, or another output.
type Clash struct {
	Out   File // the output
	Other File // what it is too: an input, or an output named before it
}

func (c *Clash) Error() string {
	if c.Other.Out {
		return fmt.Sprintf("%s and %s are the same file: one would overwrite the other", c.Other, c.Out)
	}
	noun := c.Other.Noun
	if noun == "" {
		noun = "the input"
	}
	return fmt.Sprintf("%s is %s (%s): it would be overwritten", c.Out, noun, c.Other)
}

// HintText is the next step: another file for the output.
func (c *Clash) HintText() string {
	if c.Out.Path == "" {
		return "send " + c.Out.Flag + " to another file"
	}
	return "name another file for " + c.Out.Flag
}

// Find returns the first output in files that is the same file as a file before it (an
// input, or an output named earlier), or nil. Put the inputs first. Two files are the
// same when they are one inode (os.SameFile: through symlinks, hard links and ".."), or,
// for an output that does not exist yet, when they resolve to one path: the parent
// directory with its symlinks resolved, and the base name (a dangling symlink is followed,
// as creating the file would). Only regular files can clash: a device (/dev/null), a pipe
// or a terminal loses nothing. Two streams never clash with each other: the shell opened
// them (2>&1 shares one offset), not the command.
func Find(files []File) *Clash {
	ids := make([]identity, len(files))
	for i, f := range files {
		ids[i] = identify(f)
	}
	for j, out := range files {
		if !out.Out || ids[j].none() {
			continue
		}
		for i, other := range files[:j] {
			if out.Path == "" && other.Path == "" {
				continue
			}
			if ids[i].same(ids[j]) {
				return &Clash{Out: out, Other: other}
			}
		}
	}
	return nil
}

// identity is what makes a file itself: the inode of one that exists, else the path an
// output would be created at.
type identity struct {
	info fs.FileInfo
	path string
}

func (id identity) none() bool { return id.info == nil && id.path == "" }

func (id identity) same(o identity) bool {
	switch {
	case id.info != nil && o.info != nil:
		return os.SameFile(id.info, o.info)
	case id.path != "":
		return id.path == o.path
	}
	return false
}

// identify returns f's identity; none for a file that is not a regular one, or that
// cannot be looked at (the step that opens it says why).
func identify(f File) identity {
	fi := f.Info
	if fi == nil && f.Path != "" {
		var err error
		fi, err = os.Stat(f.Path)
		if errors.Is(err, fs.ErrNotExist) && f.Out {
			return identity{path: Resolve(f.Path)}
		}
	}
	if fi == nil || !fi.Mode().IsRegular() {
		return identity{}
	}
	return identity{info: fi}
}

// Resolve returns the absolute path at which creating p would create a file: a dangling
// symlink at p followed, then the directory it lies in with its symlinks and ".." resolved
// as the kernel resolves them (a missing directory lexically, below its deepest existing
// ancestor), and the base name.
func Resolve(p string) string {
	if !filepath.IsAbs(p) {
		if wd, err := os.Getwd(); err == nil {
			p = wd + "/" + p // not Join: it would clean link/.. away lexically
		}
	}
	for range 40 { // as the kernel's limit on symlinks followed
		l, err := os.Readlink(p)
		if err != nil {
			break
		}
		if !filepath.IsAbs(l) {
			l = parent(p) + "/" + l
		}
		p = l
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return filepath.Clean(p)
	}
	return filepath.Join(Resolve(p[:i]), p[i+1:])
}

// parent returns the directory part of p, unresolved and uncleaned.
func parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	switch {
	case i < 0:
		return "."
	case i == 0:
		return "/"
	}
	return p[:i]
}

// StreamInfo returns the Stat of a stream that is a file (stdin, stdout, a list opened
// with --from), to be given as a File's Info, or nil for any other stream.
func StreamInfo(s any) fs.FileInfo {
	fh, ok := s.(*os.File)
	if !ok {
		return nil
	}
	fi, err := fh.Stat()
	if err != nil {
		return nil
	}
	return fi
}
