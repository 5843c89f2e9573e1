package rsync

import (
	"slices"
	"strings"
	"testing"
)

func TestIsRemote(t *testing.T) {
	tests := map[string]bool{
		"dst/": false, "/mnt/backup": false, "./host:file": false, "a/b:c": false,
		"host:path": true, "user@host:/p": true, "host::mod/p": true, "rsync://h/m/p": true,
	}
	for d, want := range tests {
		if got := IsRemote(d); got != want {
			t.Errorf("IsRemote(%q) = %v", d, got)
		}
	}
}

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		in   string
		args []string
		want Endpoint
	}{
		{"rsync://127.0.0.1:8730/mod/sub/", nil, Endpoint{Daemon: true, Host: "127.0.0.1", Port: 8730, Module: "mod"}},
		{"rsync://u@backup1/mod", nil, Endpoint{Daemon: true, User: "u", Host: "backup1", Port: 873, Module: "mod"}},
		{"backup1::mod/x", []string{"--port=1873"}, Endpoint{Daemon: true, Host: "backup1", Port: 1873, Module: "mod"}},
		{"u@backup1::mod", []string{"--port", "99"}, Endpoint{Daemon: true, User: "u", Host: "backup1", Port: 99, Module: "mod"}},
		{"backup1:/srv/x", nil, Endpoint{Host: "backup1"}},
		{"me@backup1:x", nil, Endpoint{User: "me", Host: "backup1"}},
		{"rsync://[::1]:874/m/", nil, Endpoint{Daemon: true, Host: "::1", Port: 874, Module: "m"}},
	}
	for _, tt := range tests {
		if got := ParseEndpoint(tt.in, tt.args); got != tt.want {
			t.Errorf("ParseEndpoint(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestRemoteShell(t *testing.T) {
	tests := []struct {
		args  []string
		rsh   string // $RSYNC_RSH
		want  string
		given bool
	}{
		{nil, "", "ssh", false},
		{nil, "ssh -p 2222", "ssh -p 2222", false},
		{[]string{"-e", "ssh -p 22"}, "rsh", "ssh -p 22", true},
		{[]string{"--rsh=ssh -x"}, "", "ssh -x", true},
		{[]string{"-essh"}, "", "ssh", true},
		{[]string{"--", "-e", "x"}, "", "ssh", false},
	}
	for _, tt := range tests {
		got, given := RemoteShell(tt.args, tt.rsh)
		if strings.Join(got, " ") != tt.want || given != tt.given {
			t.Errorf("RemoteShell(%q) = %q, %v; want %q, %v", tt.args, got, given, tt.want, tt.given)
		}
	}
}

func TestRsyncPath(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "rsync"},
		{[]string{"--rsync-path=/opt/rsync"}, "/opt/rsync"},
		{[]string{"-a", "--rsync-path", "sudo rsync"}, "sudo rsync"},
		{[]string{"--", "--rsync-path=x"}, "rsync"},
	} {
		if got := RsyncPath(tt.args); got != tt.want {
			t.Errorf("RsyncPath(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestDaemonURL(t *testing.T) {
	if got := DaemonURL("", "127.0.0.1:873", "m"); got != "rsync://127.0.0.1:873/m/" {
		t.Errorf("DaemonURL = %q", got)
	}
	if got := DaemonURL("u", "[::1]:874", "m"); got != "rsync://u@[::1]:874/m/" {
		t.Errorf("DaemonURL = %q", got)
	}
	// what rsync reads back from it
	if e := ParseEndpoint(DaemonURL("u", "[::1]:874", "m"), nil); e != (Endpoint{Daemon: true, User: "u", Host: "::1", Port: 874, Module: "m"}) {
		t.Errorf("ParseEndpoint(DaemonURL) = %+v", e)
	}
}

func TestParseGreeting(t *testing.T) {
	for _, tt := range []struct {
		line string
		want int
		ok   bool
	}{
		{"@RSYNCD: 32.0 sha512 sha256 sha1 md5 md4\n", 32, true},
		{"@RSYNCD: 31.0\n", 31, true},
		{"SSH-2.0-OpenSSH_9.2p1\r\n", 0, false},
		{"", 0, false},
	} {
		got, err := ParseGreeting(tt.line)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseGreeting(%q) = %d, %v", tt.line, got, err)
		}
	}
}

// TestErrorLine: the line a refused session gives, in each recorded run that a daemon
// refused (exit 5), and in rsync's own words.
func TestErrorLine(t *testing.T) {
	if got := ErrorLine("Password: \nERROR: module is read only\nrsync error: x\n"); got != "ERROR: module is read only" {
		t.Errorf("ErrorLine = %q", got)
	}
	if got := ErrorLine("building file list ... done\n"); got != "" {
		t.Errorf("ErrorLine of an admitted session = %q", got)
	}
	cases := recorded(t)
	n := 0
	for _, c := range cases {
		if !c.Daemon() || c.Exit != 5 || strings.HasPrefix(c.Stderr, "Password: ") {
			// glibc's getpass prompt, with no newline, stands before the @ERROR of a run
			// with no password; prsync's rsyncs never prompt (RSYNC_PASSWORD is set)
			continue
		}
		n++
		if l := ErrorLine(c.Stderr); !strings.Contains(l, "@ERROR") {
			t.Errorf("%s: ErrorLine = %q; stderr %q", c.Name, l, c.Stderr)
		}
	}
	if n < 5 {
		t.Errorf("%d recorded runs a daemon refused; the corpus has more", n)
	}
}

func TestAdmitted(t *testing.T) {
	for out, want := range map[string]bool{
		"building file list ... \n":                                true,
		"receiving file list ... \n":                               true,
		"@ERROR: max connections (2) reached -- try again later\n": false,
		"": false,
	} {
		if got := Admitted(out); got != want {
			t.Errorf("Admitted(%q) = %v, want %v", out, got, want)
		}
	}
}

func TestConnectionOptions(t *testing.T) {
	for _, tt := range []struct {
		args, want []string
	}{
		{nil, nil},
		{[]string{"--archive", "--password-file=/p", "-z"}, []string{"--password-file=/p"}},
		{[]string{"--address", "10.0.0.1", "-4", "--sockopts=SO_SNDBUF=1", "--contimeout", "5"},
			[]string{"--address", "10.0.0.1", "-4", "--sockopts=SO_SNDBUF=1", "--contimeout", "5"}},
		{[]string{"--ipv6", "--", "--address=x"}, []string{"--ipv6"}},
	} {
		if got := ConnectionOptions(tt.args); !slices.Equal(got, tt.want) {
			t.Errorf("ConnectionOptions(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}
