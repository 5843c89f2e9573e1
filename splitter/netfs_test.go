package splitter

import "testing"

func TestStatWorkers(t *testing.T) {
	local := t.TempDir()
	for _, tt := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"given", Config{StatWorkers: 3, Root: local}, 3},
		{"local source, no quick check", Config{Root: local}, DefaultStatWorkers},
		{"local source and DEST", Config{Cwd: local, Quick: &QuickCheck{Dest: local}}, DefaultStatWorkers},
		{"no lstat at all (--sizes)", Config{Sizes: true, Root: local}, DefaultStatWorkers},
		{"a remote source", Config{RemoteSrc: "host:", Root: "/"}, DefaultStatWorkers},
		{"a DEST that does not exist yet", Config{Root: local, Quick: &QuickCheck{Dest: local + "/none"}}, DefaultStatWorkers},
	} {
		if got := statWorkers(tt.cfg); got != tt.want {
			t.Errorf("%s: %d workers, want %d", tt.name, got, tt.want)
		}
	}
}

func TestNetworkMagic(t *testing.T) {
	for _, tt := range []struct {
		magic int64
		want  bool
	}{
		{0x6969, true},      // nfs
		{0x65735546, true},  // fuse: sshfs
		{0xfe534d42, true},  // smb2
		{0x0bd00bd0, true},  // lustre
		{0xef53, false},     // ext4
		{0x58465342, false}, // xfs
		{0x01021994, false}, // tmpfs
		{0x9123683e, false}, // btrfs
		{0x794c7630, false}, // overlayfs
	} {
		if got := networkMagic(tt.magic); got != tt.want {
			t.Errorf("networkMagic(%#x) = %v, want %v", tt.magic, got, tt.want)
		}
	}
}

// TestNetworkFSMissing: a path not made yet is judged by its nearest ancestor that exists
// (a local one here: not a network filesystem), and an empty path by the working directory.
func TestNetworkFSMissing(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{dir, dir + "/not/made/yet", "relative/none"} {
		if NetworkFS(p) {
			t.Errorf("NetworkFS(%q) = true on a local filesystem", p)
		}
	}
}
