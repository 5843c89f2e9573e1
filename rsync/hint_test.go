package rsync

import (
	"strings"
	"testing"
)

// TestAdvice: the advice of real rsync message lines.
func TestAdvice(t *testing.T) {
	tests := []struct {
		line string
		want Advice
	}{
		{`rsync: [generator] recv_generator: mkdir "/t/dst/new" failed: Read-only file system (30)`, ReadOnlyFS},
		{`rsync: [receiver] mkstemp ".a.txt.9RJzcO" (in m) failed: Read-only file system (30)`, ReadOnlyFS},
		{`rsync: [generator] delete_file: unlink(d) failed: Operation not permitted (1)`, ImmutableEntry},
		{`IO error encountered -- skipping file deletion`, DeletionSkipped},
		{`rsync: [receiver] mkstemp "/t/dst/sub/.f1.0sSd5l" failed: Operation not permitted (1)`, ImmutableDir},
		{`rsync: [receiver] rename "sub/.f1.pgygHg" (in m) -> "sub/f1": Operation not permitted (1)`, ImmutableDir},
		{`rsync: [generator] recv_generator: mkdir "new" (in m) failed: Permission denied (13)`, DaemonUID},
		{`rsync: [receiver] mkstemp ".a.txt.GWoH0b" (in m) failed: Permission denied (13)`, DaemonUID},
		{`rsync: [receiver] mkstemp "/t/dst/old/.f2.JC9eAX" failed: Permission denied (13)`, DestNotWritable},
		{`rsync: [generator] recv_generator: mkdir "/t/dst/sub" failed: Permission denied (13)`, DestNotWritable},
		{`rsync: [Receiver] mkdir "/t/dst" failed: Permission denied (13)`, NoAdvice},
		{`rsync: [sender] link_stat "/t/src/priv/f" failed: Permission denied (13)`, SourceNotReadable},
		{`rsync: [sender] send_files failed to open "locked" (in m): Permission denied (13)`, SourceNotReadable},
		{`ERROR: daemon refused to receive file "x.secret"`, DaemonExcluded},
		{`ERROR: daemon refused to receive directory "sub"`, DaemonExcluded},
		{`skipping daemon-excluded file "x.secret"`, DaemonExcluded},
		{`cannot delete non-empty directory: f1`, TypeClash},
		{`could not make way for new directory: d`, TypeClash},
		{`could not make way for new regular file: f1`, TypeClash},
		{`rsync: [sender] change_dir "/t/src/" failed: No such file or directory (2)`, SourceDirMissing},
		{`rsync: [sender] change_dir#3 "/t/src/" failed: No such file or directory (2)`, SourceDirMissing},
		{`rsync: [Receiver] change_dir#1 "/t/dst/" failed: Too many levels of symbolic links (40)`, NoAdvice},
		{`rsync: [receiver] rsync_xal_set: fsetxattr("/t/dst/.a.txt.nsaMOC","user.foo") failed: Operation not supported (95)`, NoXattrs},
		{`rsync: [receiver] get_xattr_names: llistxattr("/t/dst/a",1024) failed: Operation not supported (95)`, NoXattrs},
		{`rsync: [receiver] set_acl: xacl_set(sub/.f1.rIla9L, ACL_TYPE_ACCESS): Operation not supported (95)`, NoACLs},
		{`rsync: [sender] sender failed to remove sub/f1: Operation not permitted (1)`, SourceNotRemoved},
		{`refusing to follow a symlink owned by an untrusted user; use --insecure-links locally or "insecure links = yes" in a daemon module ONLY if every path component is trusted`, UntrustedLink},
		{`rsync: [receiver] write failed on "/dst/ten": No space left on device (28)`, NoRoom},
		{`rsync: [receiver] write failed on "big" (in m): Disk quota exceeded (122)`, NoRoom},
		{`rsync: [receiver] write failed on "/dst/iso": File too large (27)`, TooLarge},
		{`rsync: [sender] link_stat "/src/x" failed: No such file or directory (2)`, NoAdvice},
		{`rsync: [receiver] write error: Broken pipe (32)`, NoAdvice},
		{`@ERROR: max connections (2) reached -- try again later`, NoAdvice},
		{`rsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1394) [sender=3.5.0]`, NoAdvice},
	}
	for _, tt := range tests {
		if got := AdviceOf(tt.line); got != tt.want {
			t.Errorf("AdviceOf(%q) = %d %q, want %d %q", tt.line, got, got, tt.want, tt.want)
		}
	}
}

// TestAdviceAsBefore: the advice read from parsed messages is the hint that matching
// substrings of the reason gave (textHint, the rule before), for every line of every
// recorded run of the real rsync and for every failed path's reason there, and a reason
// that joins two lines takes the advice that ranks first.
func TestAdviceAsBefore(t *testing.T) {
	cases := recorded(t)
	vars := map[string]string{"TMP": "/t", "SRC": "/t/src", "DST": "/t/dst", "MOD": "/t/mod",
		"URL": "rsync://127.0.0.1:873/m/", "HELPER": "/t/helper", "PORT": "873"}
	hinted := 0
	for _, c := range cases {
		c = c.Expand(vars)
		for _, l := range append(c.StderrLines(), c.StdoutLines()...) {
			if got, want := AdviceOf(l).String(), textHint(l); got != want {
				t.Errorf("%s: %q advises %q, want %q", c.Name, l, got, want)
			} else if want != "" {
				hinted++
			}
		}
		src, dest := endpoints(t, c)
		local := ""
		if _, remote := endpointPath(dest); !remote {
			local = strings.TrimSuffix(dest, "/")
		}
		entries := make([][]byte, len(c.List))
		for i, e := range c.List {
			entries[i] = []byte(e)
		}
		a := NewAttributor(entries, src, dest, local)
		for _, l := range c.StdoutLines() {
			a.Stdout([]byte(l))
		}
		for _, l := range c.StderrLines() {
			a.Stderr([]byte(l))
		}
		r := a.Result()
		s := Settle(r, c.Exit, false, false)
		// the dry run's verdicts, as Differences gives them when it finds the same errors
		vs := Differences(r, c.Exit)
		sub := make([]Verdict, len(s.Unproven))
		for k, i := range s.Unproven {
			sub[k] = vs[i]
		}
		out, _ := s.Fold(sub)
		for i, o := range out {
			if o.Status != Failed {
				continue
			}
			if want := textHint(o.Reason); o.Hint != want {
				t.Errorf("%s: %q failed for %q, advised %q, want %q", c.Name, c.List[i], o.Reason, o.Hint, want)
			}
		}
		for i, ch := range Checks(r, c.Exit, false, c.Stderr, nil) {
			if ch.Status == Failed && ch.Hint != textHint(ch.Reason) {
				t.Errorf("%s: %q verify %q, advised %q, want %q", c.Name, c.List[i], ch.Reason, ch.Hint, textHint(ch.Reason))
			}
		}
	}
	if hinted < 50 {
		t.Errorf("only %d lines with advice", hinted)
	}
}

// textHint is the rule before Advice: the hint of a reason by the substrings it holds.
func textHint(reason string) string {
	switch {
	case strings.HasPrefix(reason, "verify: source changed since it was copied"):
		return SourceChanged.String()
	case strings.HasPrefix(reason, "verify: content differs, DEST changed"):
		return DestChanged.String()
	case strings.HasPrefix(reason, "verify: content differs (") && (reason[28] == 's' || reason[29] == 't'):
		return StampDiffers.String()
	case strings.HasPrefix(reason, "verify: content differs"):
		return "DEST holds other content with the source's size and mtime, which rsync's quick check cannot see: copy those paths again with the --failed list and `-- --checksum`"
	case strings.Contains(reason, "Read-only file system (30)"):
		return "the destination file system is mounted read-only"
	case strings.Contains(reason, "delete_file:") && strings.Contains(reason, "Operation not permitted (1)"):
		return "DEST does not let rsync remove an entry: an immutable or append-only file or directory (lsattr shows it)"
	case strings.Contains(reason, "IO error encountered -- skipping file deletion"):
		return "rsync could not read all of a source directory, and so deleted nothing there: fix the source error it reported, then run again"
	case strings.Contains(reason, "Operation not permitted (1)") && (strings.Contains(reason, "mkstemp") || strings.Contains(reason, "rename")):
		return "the destination refuses new files there: an immutable or append-only directory or file (lsattr shows it), or a file system that does not allow it"
	case strings.Contains(reason, "Permission denied (13)") && strings.Contains(reason, "(in ") &&
		(strings.Contains(reason, "[receiver]") || strings.Contains(reason, "[generator]")):
		return "the rsync daemon cannot write into its module: it runs as `uid = nobody` unless rsyncd.conf says otherwise; set uid and gid for the module, or make its path writable for that user"
	case strings.Contains(reason, "Permission denied (13)") && (strings.Contains(reason, "[receiver]") || strings.Contains(reason, "[generator]")):
		return "the destination directory is not writable for the user rsync runs as"
	case strings.Contains(reason, "Permission denied (13)") && strings.Contains(reason, "[sender]"):
		return "the source is not readable for the user prsync runs as"
	case strings.Contains(reason, "daemon-excluded") || strings.Contains(reason, "daemon refused to receive"):
		return "the rsync daemon excludes these paths (exclude or filter in rsyncd.conf)"
	case strings.Contains(reason, "could not make way") || strings.Contains(reason, "cannot delete non-empty directory"):
		return "DEST has a directory where the source has a file (or the other way round): move it away, then re-run with the --failed list"
	case strings.Contains(reason, "[sender] change_dir"):
		return "the source directory is missing or cannot be entered"
	case strings.Contains(reason, "Operation not supported (95)") && (strings.Contains(reason, "xattr") || strings.Contains(reason, "xal_")):
		return "the destination file system does not support extended attributes (-X)"
	case strings.Contains(reason, "Operation not supported (95)") && strings.Contains(reason, "acl"):
		return "the destination file system does not support ACLs (-A)"
	case strings.Contains(reason, "sender failed to remove"):
		return "the copy landed, but --remove-source-files could not remove the source"
	case strings.Contains(reason, "untrusted user"):
		return "rsync refuses a symlink in the path owned by another user; run as its owner, or pass -- --insecure-links deliberately"
	case strings.Contains(reason, "No space left on device (28)"):
		return "the destination is full (or its quota is): free space, then re-run with the --failed list"
	}
	return ""
}
