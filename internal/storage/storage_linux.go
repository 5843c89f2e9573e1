package storage

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fsNames are the statfs(2) f_type values of common Linux filesystems (linux/magic.h).
var fsNames = map[int64]string{
	0xef53: "ext4", 0x58465342: "xfs", 0x9123683e: "btrfs", 0x2fc12fc1: "zfs", 0x01021994: "tmpfs",
	0x794c7630: "overlay", 0x6969: "nfs", 0xff534d42: "cifs", 0xfe534d42: "smb2", 0x65735546: "fuse",
	0x00c36400: "ceph", 0x0bd00bd0: "lustre", 0x47504653: "gpfs", 0x01021997: "9p", 0x4d44: "vfat",
	0x5346544e: "ntfs", 0x3153464a: "jfs", 0xf2f52010: "f2fs", 0x73717368: "squashfs", 0x858458f6: "ramfs",
}

func fsName(st *unix.Statfs_t) string {
	if n, ok := fsNames[int64(st.Type)]; ok {
		return n
	}
	return fmt.Sprintf("filesystem 0x%x", st.Type)
}

// mountPoints returns the mount points of this process's mount namespace, from
// /proc/self/mountinfo (its fifth field, with \ooo escapes), or none.
func mountPoints() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 5 {
			continue
		}
		out = append(out, filepath.Clean(unescape(f[4])))
	}
	return out
}

// unescape decodes mountinfo's \ooo escapes (space, tab, newline, backslash).
func unescape(b []byte) string {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+3 < len(b) && isOctal(b[i+1]) && isOctal(b[i+2]) && isOctal(b[i+3]) {
			out = append(out, (b[i+1]-'0')<<6|(b[i+2]-'0')<<3|(b[i+3]-'0'))
			i += 3
			continue
		}
		out = append(out, b[i])
	}
	return string(out)
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
