package rsync

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCheckOptions(t *testing.T) {
	tests := []struct {
		args       []string
		noThrottle bool
		refused    string // "" when allowed
	}{
		{[]string{"--bwlimit=10m", "-H", "-v"}, false, ""},
		{[]string{"--delete"}, false, "--delete"},
		{[]string{"--delete-after"}, false, "--delete-after"},
		{[]string{"--del"}, false, "--del"},
		{[]string{"--files-from=x"}, false, "--files-from"},
		{[]string{"--from0"}, false, "--from0"},
		{[]string{"-0"}, false, "-0"},
		{[]string{"-av0"}, false, "-av0"},
		{[]string{"-B1024"}, false, ""},
		{[]string{"--out-format=%n"}, false, "--out-format"},
		{[]string{"--timeout=30"}, false, "--timeout"},
		{[]string{"--timeout=30"}, true, ""},
		{[]string{"--no-R"}, false, "--no-R"},
		{[]string{"--contimeout=5"}, false, ""},
		{[]string{"-q"}, false, "-q"},
		{[]string{"-avq"}, false, "-avq"},
		{[]string{"--quiet"}, false, "--quiet"},
		{[]string{"-e0"}, false, ""},      // 0 is -e's value
		{[]string{"-essh -q"}, false, ""}, // so is -q
		{[]string{"-fP *.q"}, false, ""},
		{[]string{"-Tq"}, false, ""},
	}
	for _, tt := range tests {
		err := CheckOptions(tt.args, tt.noThrottle)
		var oe *OptionError
		switch {
		case tt.refused == "" && err != nil:
			t.Errorf("%v refused: %v", tt.args, err)
		case tt.refused != "" && (!errors.As(err, &oe) || !strings.Contains(err.Error(), tt.refused) || oe.Hint == ""):
			t.Errorf("%v: error %v", tt.args, err)
		}
	}
}

func TestQuickCheckSafe(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--bwlimit=10m", "-v", "--stats"}, true},
		{[]string{"--bwlimit", "10m", "-T", "/tmp"}, true},
		{[]string{"-e", "ssh -p 22"}, true},
		{[]string{"-c"}, false}, {[]string{"--checksum"}, false}, {[]string{"-I"}, false},
		{[]string{"--size-only"}, false}, {[]string{"-u"}, false}, {[]string{"--modify-window=2"}, false},
		{[]string{"-H"}, false}, {[]string{"-A"}, false}, {[]string{"-X"}, false},
		{[]string{"--no-perms"}, false}, {[]string{"--chmod=u+w"}, false}, {[]string{"-L"}, false},
	}
	for _, tt := range tests {
		if got := QuickCheckSafe(tt.args); got != tt.want {
			t.Errorf("QuickCheckSafe(%q) = %v", tt.args, got)
		}
	}
}

func TestDaemonSocketOptions(t *testing.T) {
	tests := []struct {
		args string
		want []string
	}{
		{"", []string{NoDelay}},
		{"-v --bwlimit 10m --port 8730", []string{NoDelay}},
		{"--sockopts=SO_SNDBUF=65536", nil},
		{"--sockopts SO_KEEPALIVE", nil},
		{"--sockopts=", nil},
		{"-e ssh", []string{NoDelay}},
	}
	for _, tt := range tests {
		if got := DaemonSocketOptions(strings.Fields(tt.args)); !slices.Equal(got, tt.want) {
			t.Errorf("DaemonSocketOptions(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestLocalWholeFile(t *testing.T) {
	w := []string{WholeFile}
	tests := []struct {
		args string
		want []string
	}{
		{"", w},
		{"--archive", w},
		{"--archive -v --bwlimit 10m -H", w},
		{"--archive -W", nil},
		{"--archive -aW", nil},
		{"--archive -avWH", nil},
		{"--archive --whole-file", nil},
		{"--archive --no-whole-file", nil},
		{"--archive --no-W", nil},
		{"--archive --append", nil},
		{"--archive --append-verify", nil},
		{"--archive --write-batch=/tmp/b", nil},
		{"--archive --only-write-batch /tmp/b", nil},
		{"--archive --read-batch=/tmp/b", nil},
		// values are not options
		{"--archive --exclude -W", w},
		{"--archive --exclude=-W", w},
		{"--archive -T -W", w},
		{"--archive -aT -W", w},
		{"--archive -f -W", w},
		{"--archive -e W", w},
		{"--archive -eW", w},
		{"--archive --temp-dir -W", w},
		// after --, paths
		{"--archive -- -W", w},
	}
	for _, tt := range tests {
		if got := LocalWholeFile(strings.Fields(tt.args)); !slices.Equal(got, tt.want) {
			t.Errorf("LocalWholeFile(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestHardLinks(t *testing.T) {
	for args, want := range map[string]bool{"-H": true, "-aH": true, "--hard-links": true, "-a": false, "--bwlimit=1H": false,
		"-T/tmp/H": false, "-T /tmp/H": false, "-e ssh -H": true, "-avT/H": false, "-avHT/x": true} {
		if got := HardLinks(strings.Fields(args)); got != want {
			t.Errorf("HardLinks(%q) = %v", args, got)
		}
	}
}

func TestStatConfirmable(t *testing.T) {
	tests := []struct {
		archive bool
		args    string
		want    bool
	}{
		{true, "", true}, {false, "", false}, {true, "-H -A -X", true}, {true, "-avH", true},
		{true, "--bwlimit 10m -v", true}, {true, "--no-times", false}, {true, "-L", false},
		{true, "--link-dest=/x", false}, {true, "-u", false}, {true, "--chmod=u+w", false},
		{true, "--exclude=*.tmp", false}, {true, "-b", false}, {true, "-c", true},
	}
	for _, tt := range tests {
		if got := StatConfirmable(tt.archive, strings.Fields(tt.args)); got != tt.want {
			t.Errorf("StatConfirmable(%v, %q) = %v", tt.archive, tt.args, got)
		}
	}
}

func TestParseVersion(t *testing.T) {
	v, ok := ParseVersion([]byte("rsync  version 3.5.0  protocol version 32\nCopyright"))
	if !ok || v != (Version{3, 5, 0}) || !v.AtLeast(3, 2, 3) || v.AtLeast(3, 5, 1) || v.String() != "3.5.0" {
		t.Errorf("ParseVersion = %v, %v", v, ok)
	}
	if _, ok := ParseVersion([]byte("openrsync: protocol version 29")); ok {
		t.Error("a version without three numbers parsed")
	}
}

func TestTimesKept(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"--archive"}, true},
		{[]string{"--archive", "--no-times"}, false},
		{[]string{"--archive", "--no-t"}, false},
		{[]string{"--archive", "--no-times", "-t"}, true},
		{nil, false},
		{[]string{"-rl"}, false},
		{[]string{"-rlt"}, true},
		{[]string{"-a"}, true},
		{[]string{"--times"}, true},
		{[]string{"--archive", "--no-times", "--bwlimit=10t"}, false},
	} {
		if got := TimesKept(tt.args); got != tt.want {
			t.Errorf("TimesKept(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

func TestSkipOption(t *testing.T) {
	tests := []struct {
		args string
		want string
	}{
		{"", ""},
		{"-v -H --bwlimit=10m", ""},
		{"--exclude=*.tmp", "--exclude"},
		{"--exclude *.tmp", "--exclude"},
		{"-v --exclude-from list", "--exclude-from"},
		{"--filter=-_*.tmp", "--filter"},
		{"-f -_*.tmp", "-f"},
		{"-avF", "-F"},
		{"-aC", "-C"},
		{"--cvs-exclude", "--cvs-exclude"},
		{"--max-size=1G", "--max-size"},
		{"--min-size 1", "--min-size"},
		{"--existing", "--existing"},
		{"--ignore-non-existing", "--ignore-non-existing"},
		{"--include=*.db", ""},             // an include alone leaves nothing out
		{"-T /tmp/-f", ""},                 // a value, not an option
		{"--temp-dir -C", ""},              // the same, long
		{"-B1024f", ""},                    // the rest of a cluster after B is its value
		{"-essh -f", "-f"},                 // -e takes the rest of its cluster; -f follows
		{"-- --exclude=x", ""},             // after --: not rsync's
		{"--ignore-existing --update", ""}, // DEST keeps a version of every path
	}
	for _, tt := range tests {
		if got := SkipOption(strings.Fields(tt.args)); got != tt.want {
			t.Errorf("SkipOption(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestShortFlags(t *testing.T) {
	for in, want := range map[string]string{
		"-avz": "avz", "-B1024f": "B", "-avessh -x": "ave", "-f-_x": "f", "-T": "T",
		"--exclude": "", "-": "", "avz": "", "": "",
	} {
		if got := ShortFlags(in); got != want {
			t.Errorf("ShortFlags(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDestDirLinks(t *testing.T) {
	tests := []struct {
		args string
		want DirLinks
	}{
		{"", DirLinksReplaced},
		{"--archive -v -H", DirLinksReplaced},
		{"--archive -K", DirLinksInTree},
		{"--keep-dirlinks", DirLinksInTree},
		{"-aK", DirLinksInTree},
		{"-vKH", DirLinksInTree},
		{"-k", DirLinksReplaced},               // --copy-dirlinks: the sender's symlinks
		{"-L", DirLinksReplaced},               // --copy-links: rsync still replaces DEST's
		{"--insecure-links", DirLinksReplaced}, // without -K it keeps no symlink
		{"-K --insecure-links", DirLinksAny},
		{"--insecure-links -aK", DirLinksAny},
		{"-e ssh -K", DirLinksInTree},        // -e takes "ssh"; -K is rsync's
		{"-e -K", DirLinksReplaced},          // -K is -e's value
		{"-essh -K", DirLinksInTree},         // the value is in the cluster
		{"-eK", DirLinksReplaced},            // K is -e's value
		{"-B1024K", DirLinksReplaced},        // the rest of a cluster after B is its value
		{"-T -K", DirLinksReplaced},          // a temp dir named -K
		{"--exclude -K", DirLinksReplaced},   // a pattern
		{"--exclude=-K -K", DirLinksInTree},  // a pattern, then the option
		{"--rsh -K", DirLinksReplaced},       // a remote shell named -K
		{"--temp-dir=/t -K", DirLinksInTree}, // the value after =
		{"-- -K", DirLinksReplaced},          // after --: not rsync's
		{"--keep-dirlinks=yes", DirLinksReplaced},
	}
	for _, tt := range tests {
		if got := DestDirLinks(strings.Fields(tt.args)); got != tt.want {
			t.Errorf("DestDirLinks(%q) = %d, want %d", tt.args, got, tt.want)
		}
	}
}
