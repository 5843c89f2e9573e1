package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Commit and Date are set with -ldflags "-X github.com/prsync/prsync/cli.Commit=0123abc
// -X github.com/prsync/prsync/cli.Date=2026-12-01T10:42:00Z" (make build, goreleaser); when
// empty, they come from the build's VCS stamp (vcs.revision, vcs.time), if it has one.
var (
	Commit = ""
	Date   = ""
)

// The oldest rsync prsync works with, and the oldest that creates a missing remote DEST
// (--mkpath).
const (
	MinRsync       = "3.1.0"
	MinRsyncMkpath = "3.2.3"
)

// stamp is what a build knows about itself.
type stamp struct {
	version, commit, date string
}

// readStamp reads the version, commit and date of this binary: from the ldflags, else from
// the build info.
func readStamp() stamp {
	bi, _ := debug.ReadBuildInfo()
	return makeStamp(Version, Commit, Date, bi)
}

// makeStamp prefers what the ldflags set; bi may be nil.
func makeStamp(ldVersion, ldCommit, ldDate string, bi *debug.BuildInfo) stamp {
	s := stamp{version: ldVersion, commit: ldCommit, date: ldDate}
	if bi == nil {
		bi = &debug.BuildInfo{}
	}
	if s.version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		s.version = bi.Main.Version
	}
	if s.version == "" {
		s.version = "dev"
	}
	var revision, when string
	modified := false
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			revision = kv.Value
		case "vcs.time":
			when = kv.Value
		case "vcs.modified":
			modified = kv.Value == "true"
		}
	}
	if s.commit == "" && revision != "" {
		s.commit = revision
		if modified {
			s.commit += "-dirty"
		}
	}
	if s.date == "" {
		s.date = when
	}
	return s
}

// versionText is what --version prints: the version, the commit and date of the build,
// and the rsync it needs.
func versionText() string {
	s := readStamp()
	var b strings.Builder
	fmt.Fprintf(&b, "prsync %s\n", s.version)
	fmt.Fprintf(&b, "commit %s, built %s, %s %s/%s\n", orUnknown(s.commit), orUnknown(s.date), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "needs rsync %s or newer (%s or newer to create a missing remote DEST with --mkpath)", MinRsync, MinRsyncMkpath)
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// Version is set with -ldflags "-X github.com/prsync/prsync/cli.Version=v1.2.3"; when
// empty, it comes from the build info (go install …@v1.2.3), else it is "dev".
var Version = ""

// version is the version alone, as the start event carries it.
func version() string { return readStamp().version }
