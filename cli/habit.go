package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prsync/prsync/rsync"
)

// rsyncHabit is the usage error of a command line written as rsync's, prsync SRC/ DEST/:
// prsync takes DEST alone and reads the paths on stdin, so the second path would be
// taken for an rsync option put before --. It returns nil when args (DEST, then the
// arguments after it, with no --) do not look so: none may begin with -, and the last
// must be a destination (a remote one, an existing directory, or one written with a
// final slash) or the first a source written as rsync's SRC/ (an existing directory, or a
// remote one, with a final slash).
func rsyncHabit(args []string) error {
	if len(args) < 2 {
		return nil
	}
	for _, a := range args {
		if a == "" || strings.HasPrefix(a, "-") {
			return nil
		}
	}
	srcs, dest := args[:len(args)-1], args[len(args)-1]
	if !looksLikeDest(dest) && !(strings.HasSuffix(srcs[0], "/") && looksLikeSource(srcs[0])) {
		return nil // prsync DEST word: an rsync option put before --
	}
	// NUL-separated whatever the run's -0: names may hold newlines
	const sep, print = "-0 ", "-print0"
	msg := fmt.Sprintf("%d paths, %s and %s: prsync takes DEST alone, and reads the paths to copy on stdin",
		len(args), strings.Join(quoteAll(srcs), ", "), shellQuote(dest))
	src := srcs[0]
	switch {
	case len(srcs) == 1 && rsync.IsRemote(src):
		return usage(msg, fmt.Sprintf("to copy from %s, list the paths below it (README, Pulling from a remote host) and give it as --root: prsync %s-C %s %s <list",
			src, sep, shellQuote(src), shellQuote(dest)))
	case len(srcs) == 1 && isDir(src):
		// rsync's rule: SRC/ copies what is in SRC, SRC copies SRC itself
		abs, err := filepath.Abs(src)
		if err != nil {
			break
		}
		root := abs
		if !strings.HasSuffix(src, "/") {
			root = filepath.Dir(abs)
		}
		return usage(msg, fmt.Sprintf("to copy %s into %s as rsync -a %s %s would: find %s %s | prsync %s-C %s %s",
			src, dest, src, dest, shellQuote(abs), print, sep, shellQuote(root), shellQuote(dest)))
	}
	return usage(msg, fmt.Sprintf("list the paths to copy on stdin: find %s %s | prsync %s%s",
		strings.Join(quoteAll(srcs), " "), print, sep, shellQuote(dest)))
}

// looksLikeSource reports whether s names an existing directory or a remote path.
func looksLikeSource(s string) bool { return rsync.IsRemote(s) || isDir(s) }

// looksLikeDest reports whether s is written as a destination: remote, a directory, or
// with a final slash.
func looksLikeDest(s string) bool { return rsync.IsRemote(s) || strings.HasSuffix(s, "/") || isDir(s) }

func isDir(s string) bool {
	fi, err := os.Stat(s)
	return err == nil && fi.IsDir()
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = shellQuote(s)
	}
	return out
}
