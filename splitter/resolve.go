package splitter

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/prsync/prsync/rsync"
)

// Where a path comes from and where it lands: rsync's source directory and list entry for
// it, DEST's own paths, and the shard it belongs to.

// resolve returns the absolute path to lstat, rsync's source directory and list entry
// for it, and where it lands under DEST (clean and relative, "." for DEST itself).
// Entries are kept short: rsync reads its --files-from list one byte at a time, and with
// long absolute entries that read costs more than the copy of small files.
func (s *Splitter) resolve(in []byte) (abs, src, entry, lands string, err error) {
	if bytes.IndexByte(in, 0) >= 0 {
		return "", "", "", "", errors.New("name contains a NUL byte")
	}
	if s.cfg.RemoteSrc != "" {
		src, entry, lands, err = s.resolveRemote(string(in))
		return "", src, entry, lands, err
	}
	if len(in) > 0 && in[0] == '/' {
		p := string(in)
		if !isClean(p[1:]) {
			p = filepath.Clean(p)
		}
		if s.cfg.Root == "" {
			lands = cmp.Or(p[1:], ".")
			return p, "/", protect(p[1:]), lands, nil
		}
		rest, ok := under(p, s.cfg.Root)
		if !ok {
			return "", "", "", "", fmt.Errorf("outside --root %s", s.cfg.Root)
		}
		return p, s.cfg.Root, protect(rest), rest, nil
	}
	base := s.cfg.Root
	if base == "" {
		base = s.cfg.Cwd
	}
	var rel string
	if r := trimDot(in); isClean(r) {
		// the common case, as find . prints it: one allocation for abs, rel a part of it
		if base == "/" {
			abs = "/" + string(r)
			rel = abs[1:]
		} else {
			abs = base + "/" + string(r)
			rel = abs[len(base)+1:]
		}
	} else {
		rel = filepath.Clean(string(in))
		if rel == ".." || strings.HasPrefix(rel, "../") {
			if s.cfg.Root != "" {
				return "", "", "", "", fmt.Errorf("outside --root %s", s.cfg.Root)
			}
			return "", "", "", "", errors.New("outside the working directory: use absolute paths or --root")
		}
		abs = joinClean(base, rel)
	}
	if s.cfg.Root == "" && s.cfg.HardLinks && base != "/" {
		// one source for every path, so that the links of an inode share a chunk
		return abs, "/", anchor(base[1:], rel), rel, nil
	}
	return abs, base, protect(rel), rel, nil
}

// resolveRemote places a path of a remote source: relative paths are taken from it,
// absolute ones must lie under its path part.
func (s *Splitter) resolveRemote(p string) (src, entry, lands string, err error) {
	outside := fmt.Errorf("outside --root %s", s.cfg.RemoteSrc)
	if filepath.IsAbs(p) {
		if !isClean(p[1:]) {
			p = filepath.Clean(p)
		}
		if s.cfg.Root == "" || !filepath.IsAbs(s.cfg.Root) {
			return "", "", "", fmt.Errorf("an absolute path, but --root %s names no absolute directory: give paths relative to it", s.cfg.RemoteSrc)
		}
		rest, ok := under(p, s.cfg.Root)
		if !ok {
			return "", "", "", outside
		}
		return s.cfg.RemoteSrc, protect(rest), rest, nil
	}
	rel := cleanRel(p)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", "", "", outside
	}
	return s.cfg.RemoteSrc, protect(rel), rel, nil
}

// cleanRel is filepath.Clean of a relative path, without its cost for the common
// shapes: "./a/b" (as find . prints it) and paths that are clean already.
func cleanRel(p string) string {
	if q := trimDot(p); isClean(q) {
		return q
	}
	return filepath.Clean(p)
}

// trimDot drops the leading "./" of a relative path, as find . prints it, when the rest
// is not empty and does not start with '/'.
func trimDot[T string | []byte](p T) T {
	for len(p) > 2 && p[0] == '.' && p[1] == '/' && p[2] != '/' {
		p = p[2:]
	}
	return p
}

// isClean reports whether a relative path is what filepath.Clean makes of it.
func isClean[T string | []byte](p T) bool {
	if len(p) == 0 || p[0] == '/' || p[len(p)-1] == '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch {
		case p[i] == '/' && i+1 < len(p) && p[i+1] == '/':
			return false
		case p[i] == '.' && (i == 0 || p[i-1] == '/'):
			j := i + 1
			if j < len(p) && p[j] == '.' {
				j++
			}
			if j == len(p) || p[j] == '/' {
				return false // a "." or ".." element
			}
		}
	}
	return true
}

// joinClean joins a clean absolute base and a clean relative path.
func joinClean(base, rel string) string {
	switch {
	case rel == ".":
		return base
	case base == "/":
		return "/" + rel
	}
	return base + "/" + rel
}

// protect makes rel a --files-from entry (rsync.ListEntry: "./" before a name rsync would
// read as a comment), and turns the empty path (the source directory itself) into ".".
func protect(rel string) string {
	if rel == "" {
		return "."
	}
	return rsync.ListEntry(rel)
}

// under reports whether p is root or below it, and the rest of p after root.
func under(p, root string) (string, bool) {
	if p == root {
		return ".", true
	}
	if root == "/" {
		return p[1:], true
	}
	if len(p) > len(root) && p[:len(root)] == root && p[len(root)] == '/' {
		return p[len(root)+1:], true
	}
	return "", false
}

// anchor writes base/./rel for a relative base: rsync copies it to DEST/rel.
func anchor(base, rel string) string { return base + "/./" + rel }

// destsBelow returns the forms of DEST that lie strictly below dir.
func destsBelow(dest []string, dir string) []string {
	var out []string
	for _, d := range dest {
		if below(d, dir) {
			out = append(out, d)
		}
	}
	return out
}

// InsideDest is the reason a path inside a local DEST fails: `cd /data && find . | prsync
// ./backup` lists the backup's own files, and copying them would nest a copy of DEST in
// itself at every run.
const InsideDest = "inside DEST: DEST's own file is not copied into DEST (leave DEST out of the list)"

// insideDest reports whether the local source path abs is DEST or below it, where DEST
// lies below the directory the path was taken from (absolute: an absolute input path).
func (s *Splitter) insideDest(abs string, absolute bool) bool {
	dests := s.destBelowBase
	if absolute {
		dests = s.destBelowSlash
	}
	for _, d := range dests {
		if abs == d || below(abs, d) {
			return true
		}
	}
	return false
}

// below reports whether the clean absolute path p lies strictly below dir.
func below(p, dir string) bool {
	if dir == "/" {
		return p != "/"
	}
	return len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir)
}

// Shard returns the shard of n that path p belongs to: xxhash64 (XXH64, seed 0) of
// the path's bytes, mod n. The function is part of prsync's stable contract.
func Shard(p []byte, n int) int {
	if n <= 1 {
		return 0
	}
	return int(xxhash.Sum64(p) % uint64(n))
}
