package doctor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/prsync/prsync/internal/human"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// Sampling bounds: doctor reads the whole list, and lstats its first DefaultSample paths
// for hard links, ACLs, extended attributes and holes, and its first DefaultSizeSample
// paths for their sizes (when --sizes does not give them).
const (
	DefaultSample     = 10000
	DefaultSizeSample = 100000
)

// Check names of the source.
const (
	NameSource    = "source"
	NameHardLinks = "source-hard-links"
	NameACLs      = "source-acls"
	NameXattrs    = "source-xattrs"
	NameSparse    = "source-sparse"
)

// SourceConfig says how to read the list, as the run reads it.
type SourceConfig struct {
	Sep        byte   // '\n', or 0 with -0
	Sizes      bool   // SIZE<TAB>PATH records
	Base       string // where relative paths are: --root, or the working directory
	Remote     bool   // a remote --root: nothing can be lstat'ed
	Sample     int    // paths examined for links, ACLs, xattrs and holes; 0: DefaultSample
	SizeSample int    // paths lstat'ed for their size; 0: DefaultSizeSample
}

// Finding is how many sampled paths have one property, and the first of them.
type Finding struct {
	Count   int
	Example string
	Bytes   int64 // for holes: the bytes the holes would take if filled
}

func (f *Finding) add(path string) {
	if f.Count == 0 {
		f.Example = path
	}
	f.Count++
}

// SourceFacts is what reading the list and lstat'ing a sample of it found.
type SourceFacts struct {
	Remote     bool
	Records    int   // paths in the list
	Empty      int   // empty records
	Bad        int   // --sizes records that do not parse
	Bytes      int64 // the list's size: from --sizes, else from the lstat'ed ones
	SizeKnown  bool
	Estimated  bool // Bytes is scaled up from the first SizedPaths paths
	SizedPaths int
	Sampled    int // paths examined for links, ACLs, xattrs and holes
	Missing    Finding
	StatErrors Finding
	HardLinks  Finding
	ACLs       Finding
	Xattrs     Finding
	Sparse     Finding
	XattrsRead bool   // the xattrs of the sample could be listed (on Linux and macOS)
	XattrErr   string // why not, when they could not
	ReadErr    error  // the list could not be read to its end
}

// ReadSource reads the list from r as the run would, and lstats its head (see
// SourceConfig). It opens no file and changes nothing.
func ReadSource(r io.Reader, cfg SourceConfig) SourceFacts {
	if cfg.Sample <= 0 {
		cfg.Sample = DefaultSample
	}
	if cfg.SizeSample <= 0 {
		cfg.SizeSample = DefaultSizeSample
	}
	f := SourceFacts{Remote: cfg.Remote, SizeKnown: cfg.Sizes, XattrsRead: !cfg.Remote}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<26)
	sc.Split(splitOn(cfg.Sep))
	var sized int64 // bytes of the lstat'ed paths
	for sc.Scan() {
		rec := sc.Bytes()
		if len(rec) == 0 {
			f.Empty++
			continue
		}
		path := rec
		if cfg.Sizes {
			size, p, err := splitter.SplitSized(rec)
			if err != nil {
				f.Bad++
				continue
			}
			f.Bytes += size
			path = p
		}
		f.Records++
		if cfg.Remote || (f.Records > cfg.Sample && (cfg.Sizes || f.Records > cfg.SizeSample)) {
			continue
		}
		abs := string(path)
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(cfg.Base, abs)
		}
		var st unix.Stat_t
		if err := unix.Lstat(abs, &st); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				f.Missing.add(abs)
			} else {
				f.StatErrors.add(abs)
			}
			continue
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		isReg := st.Mode&unix.S_IFMT == unix.S_IFREG
		if !cfg.Sizes && isReg {
			sized += st.Size
			f.SizedPaths++
		}
		if f.Records > cfg.Sample {
			continue
		}
		f.Sampled++
		if !isDir && uint64(st.Nlink) > 1 {
			f.HardLinks.add(abs)
		}
		if isReg {
			if hole := st.Size - int64(st.Blocks)*512; hole >= max(64<<10, st.Size/8) {
				f.Sparse.add(abs)
				f.Sparse.Bytes += hole
			}
		}
		if f.XattrsRead {
			acl, xattr, err := attrs(abs)
			switch {
			case err != nil && (errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP)):
			case err != nil:
				f.XattrsRead, f.XattrErr = false, err.Error()
			}
			if acl {
				f.ACLs.add(abs)
			}
			if xattr {
				f.Xattrs.add(abs)
			}
		}
	}
	if err := sc.Err(); err != nil {
		f.ReadErr = err
	}
	if !cfg.Sizes && !cfg.Remote {
		f.Bytes, f.SizeKnown = sized, true
		if counted := f.Records - f.Missing.Count - f.StatErrors.Count; f.Records > cfg.SizeSample && counted > 0 {
			f.Estimated = true
			f.Bytes = int64(float64(sized) / float64(min(counted, cfg.SizeSample)) * float64(f.Records))
		}
	}
	return f
}

func splitOn(sep byte) bufio.SplitFunc {
	return func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data, sep); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	}
}

// attrs lists a path's extended attributes: whether it has a POSIX ACL
// (system.posix_acl_access or _default) and whether it has others (user.*, trusted.*,
// security.capability …; security.selinux, which a system sets on every file, aside).
func attrs(path string) (acl, xattr bool, err error) {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(path, buf)
	if errors.Is(err, unix.ERANGE) {
		if n, err = unix.Llistxattr(path, nil); err == nil {
			buf = make([]byte, n*2)
			n, err = unix.Llistxattr(path, buf)
		}
	}
	if err != nil {
		return false, false, err
	}
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		switch name {
		case "":
		case "system.posix_acl_access", "system.posix_acl_default":
			acl = true
		case "security.selinux", "com.apple.provenance", "com.apple.quarantine":
		default:
			xattr = true
		}
	}
	return acl, xattr, nil
}

// Source checks the list and its sample against the attributes the rsync options keep.
func Source(f SourceFacts, keep rsync.Preserved) []Check {
	if f.Remote {
		c := ok(NameSource, "%d paths in the list; the source is remote: not examined for hard links, ACLs, xattrs or holes", f.Records)
		if f.Bad > 0 {
			c = badRecords(c, f)
		}
		return []Check{c}
	}
	var head Check
	size := ""
	if f.SizeKnown {
		size = ", " + human.Bytes(f.Bytes)
		if f.Estimated {
			size += fmt.Sprintf(" (estimated from the first %d)", f.SizedPaths)
		}
	}
	sample := "all of them"
	if f.Sampled < f.Records {
		sample = fmt.Sprintf("the first %d", f.Sampled)
	}
	switch {
	case f.ReadErr != nil:
		head = fail(NameSource, "check the list (--from FILE or stdin)", "the list could not be read to its end: %v", f.ReadErr)
	case f.Records == 0:
		head = warn(NameSource, "pipe in the list as for the run (find DIR -type f -print0 | prsync doctor -0 …), or give --from FILE", "the list is empty: the run would copy nothing")
	case f.Missing.Count > 0:
		head = warn(NameSource, "check --root and the working directory: relative paths are taken from them",
			"%d paths%s; %d of the %d lstat'ed do not exist (first: %s): the run reports them vanished", f.Records, size, f.Missing.Count, f.Sampled+f.Missing.Count, f.Missing.Example)
	case f.StatErrors.Count > 0:
		head = warn(NameSource, "run prsync as a user who can read the source", "%d paths%s; %d of them cannot be lstat'ed (first: %s): the run fails them", f.Records, size, f.StatErrors.Count, f.StatErrors.Example)
	default:
		head = ok(NameSource, "%d paths%s; examined %s", f.Records, size, sample)
	}
	if f.Bad > 0 {
		head = badRecords(head, f)
	}
	out := []Check{head}
	of := fmt.Sprintf("of the %d paths sampled", f.Sampled)
	out = append(out, attribute(NameHardLinks, f.HardLinks, keep.HardLinks, "-H", of,
		"are hard links (nlink > 1)", "each link lands in DEST as a separate copy"))
	if !f.XattrsRead {
		why := "not examined on this system"
		if f.XattrErr != "" {
			why = "could not be listed: " + f.XattrErr
		}
		out = append(out, ok(NameACLs, "ACLs %s", why), ok(NameXattrs, "extended attributes %s", why))
	} else {
		aclNote := ""
		if runtime.GOOS != "linux" {
			aclNote = " (POSIX ACLs are read on Linux only)"
		}
		out = append(out,
			attribute(NameACLs, f.ACLs, keep.ACLs, "-A", of, "have POSIX ACLs"+aclNote, "DEST gets none of them"),
			attribute(NameXattrs, f.Xattrs, keep.Xattrs, "-X", of, "have extended attributes", "DEST gets none of them"))
	}
	sparse := attribute(NameSparse, f.Sparse, keep.Sparse, "-S", of, "are sparse (holes: fewer blocks than their size)",
		"each lands fully allocated in DEST, "+human.Bytes(f.Sparse.Bytes)+" more than the source takes")
	out = append(out, sparse)
	return out
}

func badRecords(c Check, f SourceFacts) Check {
	c.Status = max(c.Status, Warning)
	c.Message += fmt.Sprintf("; %d records are not SIZE<TAB>PATH: the run fails them", f.Bad)
	if c.Fix == "" {
		c.Fix = "write the list with find DIR -printf '%s\\t%P\\0' and -0, or drop --sizes"
	}
	return c
}

// attribute is the check of one attribute the sample may have (what), which the option
// flag keeps.
func attribute(name string, f Finding, kept bool, flag, of, what, lost string) Check {
	switch {
	case f.Count == 0 && kept:
		return ok(name, "none %s %s; %s is on", of, what, flag)
	case f.Count == 0:
		return ok(name, "none %s %s", of, what)
	case kept:
		return ok(name, "%d %s %s, first %s; %s keeps them", f.Count, of, what, f.Example, flag)
	}
	return warn(name, "add "+flag+" after -- (prsync … DEST -- "+flag+")",
		"%d %s %s, first %s; %s is off: %s", f.Count, of, what, f.Example, flag, lost)
}
