package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/prsync/prsync/exec"
)

func TestSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1000", 1000, true}, {"64K", 64 << 10, true}, {"512M", 512 << 20, true}, {"1G", 1 << 30, true},
		{"1.5G", 3 << 29, true}, {"2T", 2 << 40, true}, {"1gb", 1 << 30, true}, {"0", 0, false},
		{"-1M", 0, false}, {"lots", 0, false}, {"", 0, false},
	}
	for _, tt := range tests {
		var s Size
		err := s.UnmarshalText([]byte(tt.in))
		if (err == nil) != tt.ok || (tt.ok && int64(s) != tt.want) {
			t.Errorf("Size(%q) = %d, %v", tt.in, s, err)
		}
	}
}

func TestParseShard(t *testing.T) {
	tests := []struct {
		in   string
		k, n int
		ok   bool
	}{
		{"", 0, 1, true}, {"0/1", 0, 1, true}, {"2/3", 2, 3, true}, {"3/3", 0, 0, false},
		{"a/b", 0, 0, false}, {"0/0", 0, 0, false}, {"-1/2", 0, 0, false}, {"1", 0, 0, false},
	}
	for _, tt := range tests {
		k, n, err := parseShard(tt.in)
		if (err == nil) != tt.ok || (tt.ok && (k != tt.k || n != tt.n)) {
			t.Errorf("parseShard(%q) = %d, %d, %v", tt.in, k, n, err)
		}
	}
}

func TestCheckRsyncArgs(t *testing.T) {
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
	}
	for _, tt := range tests {
		f := Flags{RsyncArgs: tt.args, NoThrottle: tt.noThrottle}
		err := f.checkRsyncArgs()
		switch {
		case tt.refused == "" && err != nil:
			t.Errorf("%v refused: %v", tt.args, err)
		case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused) || hintOf(err) == ""):
			t.Errorf("%v: error %v, hint %q", tt.args, err, hintOf(err))
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
		if got := quickCheckSafe(tt.args); got != tt.want {
			t.Errorf("quickCheckSafe(%q) = %v", tt.args, got)
		}
	}
}

func TestHardLinks(t *testing.T) {
	for args, want := range map[string]bool{"-H": true, "-aH": true, "--hard-links": true, "-a": false, "--bwlimit=1H": false,
		"-T/tmp/H": false, "-T /tmp/H": false, "-e ssh -H": true, "-avT/H": false, "-avHT/x": true} {
		if got := hardLinks(strings.Fields(args)); got != want {
			t.Errorf("hardLinks(%q) = %v", args, got)
		}
	}
}

func TestUsageExitCodes(t *testing.T) {
	tests := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--bogus", "dst"}, ExitUsage, "unknown flag --bogus"},
		{[]string{}, ExitUsage, `expected "<DEST>"`},
		{[]string{"--rsync", "/nonexistent/rsync", "dst"}, ExitNoRsync, "rsync not found"},
		{[]string{"--shard", "1/1", "dst"}, ExitUsage, "bad --shard"},
		{[]string{"--jobs=-1", "dst"}, ExitUsage, "--jobs -1"},
		{[]string{"--shard", "", "dst"}, ExitUsage, "empty --shard"},
		{[]string{"--shard=", "dst"}, ExitUsage, "empty --shard"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := Run(tt.args, strings.NewReader(""), &out, &errb)
		if code != tt.code || !strings.Contains(errb.String(), "prsync: error: ") || !strings.Contains(errb.String(), tt.err) {
			t.Errorf("%v: exit %d, stderr %q", tt.args, code, errb.String())
		}
		if out.Len() != 0 {
			t.Errorf("%v: stdout %q", tt.args, out.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Run([]string{"--version"}, strings.NewReader(""), &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "prsync ") {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

func TestExitStatus(t *testing.T) {
	ab := &exec.AbortError{ExitCode: 10}
	killed := &exec.AbortError{ExitCode: -1}
	tests := []struct {
		name        string
		interrupted bool
		inputErr    error
		ab          *exec.AbortError
		c           exec.Counts
		want        int
	}{
		{"clean", false, nil, nil, exec.Counts{Transferred: 3}, ExitOK},
		{"vanished", false, nil, nil, exec.Counts{Vanished: 1}, ExitVanished},
		{"failed beats vanished", false, nil, nil, exec.Counts{Vanished: 1, Failed: 1}, ExitPartial},
		{"not done", false, nil, nil, exec.Counts{NotDone: 1}, ExitPartial},
		{"stopped early", false, nil, ab, exec.Counts{Failed: 5}, 10},
		{"stopped by a signal death", false, nil, killed, exec.Counts{Failed: 5}, ExitPartial},
		{"input", false, errors.New("x"), ab, exec.Counts{}, ExitInput},
		{"interrupt beats all", true, errors.New("x"), ab, exec.Counts{Failed: 1}, ExitInterrupted},
	}
	for _, tt := range tests {
		if got := exitStatus(tt.interrupted, tt.inputErr, tt.ab, tt.c, nil); got != tt.want {
			t.Errorf("%s: exit %d, want %d", tt.name, got, tt.want)
		}
	}
}
