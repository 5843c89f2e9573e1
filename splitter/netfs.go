package splitter

import (
	"cmp"
	"os"
	"path/filepath"
)

// # Stat workers on a network filesystem
//
// On a local disk an lstat costs microseconds, or one disk read when the inode is cold, and
// DefaultStatWorkers keep a disk's queue busy without a crowd of threads. On a network
// filesystem each lstat whose attributes are not cached waits a round trip to the server:
// latency, not work. There the workers are the concurrency of the lookups. When the
// source's base is on one, NetStatWorkers examine records: their threads mostly wait, and
// the Ps they hold are handed back while they do. A DEST on one gets no quick check at all
// (cli: NetworkFS): even 32 workers read an sshfs mount with a 2 ms round trip at about
// 1,000 paths a second, and the rsyncs' own checks, side by side, came first.

// NetStatWorkers is how many goroutines examine records when Config.StatWorkers is 0 and
// the source's base or DEST is on a network filesystem.
const NetStatWorkers = 32

// networkMagics are the statfs(2) f_type values of Linux filesystems whose lookups cross
// a network (linux/magic.h and the filesystems' own sources).
var networkMagics = map[int64]string{
	0x6969:     "nfs",
	0x517b:     "smb",
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x65735546: "fuse", // sshfs, rclone, s3fs, gcsfuse, glusterfs' client
	0x00c36400: "ceph",
	0x0bd00bd0: "lustre",
	0x47504653: "gpfs",
	0x01021997: "9p",
	0x73757245: "coda",
	0x5346414f: "afs",
	0x6b414653: "kafs",
	0xaad7aaea: "panfs",
	0x19830326: "beegfs",
	0x013111a8: "ibrix",
	0x61636673: "acfs",
}

// networkMagic reports whether a statfs f_type is a network filesystem's.
func networkMagic(t int64) bool {
	_, ok := networkMagics[t]
	return ok
}

// NetworkFS reports whether path, or its nearest ancestor that exists (a DEST not made
// yet), is on a network filesystem; false when it cannot tell.
func NetworkFS(path string) bool {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			return networkFS(p)
		}
		if p == filepath.Dir(p) {
			return false
		}
	}
}

// statWorkers returns how many goroutines examine records under cfg: the number given,
// or NetStatWorkers when the source's base (Root, or Cwd) is on a network filesystem, or
// DefaultStatWorkers.
func statWorkers(cfg Config) int {
	switch {
	case cfg.StatWorkers > 0:
		return cfg.StatWorkers
	case !cfg.Stats():
		return DefaultStatWorkers
	case cfg.RemoteSrc == "" && networkFS(cmp.Or(cfg.Root, cfg.Cwd)):
		return NetStatWorkers
	}
	return DefaultStatWorkers
}
