package rsync

import (
	"slices"
	"testing"
)

func TestListPaths(t *testing.T) {
	tests := []struct {
		dest, path, dir, root string
	}{
		// a daemon opens the list relative to the module
		{"rsync://127.0.0.1:8730/mod/", ".prsync-lists/N", "rsync://127.0.0.1:8730/mod/.prsync-lists/", "rsync://127.0.0.1:8730/mod/"},
		{"rsync://h/mod/backup/day1", "backup/day1/.prsync-lists/N", "rsync://h/mod/backup/day1/.prsync-lists/", "rsync://h/mod/backup/day1/"},
		{"h::mod", ".prsync-lists/N", "h::mod/.prsync-lists/", "h::mod/"},
		{"u@h::mod/sub/", "sub/.prsync-lists/N", "u@h::mod/sub/.prsync-lists/", "u@h::mod/sub/"},
		// a remote shell's server, relative to the login's home or absolute
		{"h:/srv/backup/", "/srv/backup/.prsync-lists/N", "h:/srv/backup/.prsync-lists/", "h:/srv/backup/"},
		{"u@h:backup", "backup/.prsync-lists/N", "u@h:backup/.prsync-lists/", "u@h:backup/"},
		{"h:", ".prsync-lists/N", "h:.prsync-lists/", "h:"},
	}
	for _, tt := range tests {
		if got := ListPath(tt.dest, "N"); got != tt.path {
			t.Errorf("ListPath(%q) = %q, want %q", tt.dest, got, tt.path)
		}
		if got := RemoteListArg(tt.dest, "N"); got != "--files-from=:"+tt.path {
			t.Errorf("RemoteListArg(%q) = %q", tt.dest, got)
		}
		if got := ListDirArg(tt.dest); got != tt.dir {
			t.Errorf("ListDirArg(%q) = %q, want %q", tt.dest, got, tt.dir)
		}
		if got := RootArg(tt.dest); got != tt.root {
			t.Errorf("RootArg(%q) = %q, want %q", tt.dest, got, tt.root)
		}
	}
}

func TestRemoteListUsable(t *testing.T) {
	tests := []struct {
		args []string
		ok   bool
		opt  string
	}{
		{nil, true, ""},
		{[]string{"--archive", "--compress", "-e", "ssh -p 2222"}, true, ""},
		{[]string{"--iconv=utf8,latin1"}, false, "--iconv"},
		{[]string{"--iconv", "utf8"}, false, "--iconv"},
		{[]string{"--dry-run"}, false, "--dry-run"},
		{[]string{"-avn"}, false, "-avn (-n, --dry-run)"},
		{[]string{"-essh -n"}, true, ""},        // -e's value
		{[]string{"--", "--iconv=x"}, true, ""}, // not an option
	}
	for _, tt := range tests {
		if ok, opt := RemoteListUsable(tt.args); ok != tt.ok || opt != tt.opt {
			t.Errorf("RemoteListUsable(%q) = %v, %q; want %v, %q", tt.args, ok, opt, tt.ok, tt.opt)
		}
	}
}

func TestListUnread(t *testing.T) {
	tests := []struct {
		name   string
		code   int
		logged bool
		stderr string
		want   bool
	}{
		{"daemon: the module has no such list", 12, false,
			"unexpected tag -7 [sender]\nrsync error: error in rsync protocol data stream (code 12) at io.c(1896) [sender=3.5.0]\n", true},
		{"ssh: the server cannot open it", 12, false,
			"rsync: failed to open files-from file /srv/x/.prsync-lists/N: No such file or directory\nrsync error: syntax or usage error (code 1) at main.c(1886) [server=3.5.0]\nrsync: connection unexpectedly closed (0 bytes received so far) [sender]\n", true},
		{"a line was logged: the list was read", 12, true, "unexpected tag -7 [sender]\n", false},
		{"read-only module", 1, false, "ERROR: module is read only\nrsync error: syntax or usage error (code 1) at main.c(1185) [Receiver=3.5.0]\n", false},
		{"max connections", 5, false, "@ERROR: max connections (3) reached -- try again later\n", false},
		{"a broken connection, no tag", 12, false, "rsync: connection unexpectedly closed (0 bytes received so far) [sender]\n", false},
		{"partial transfer", 23, false, "rsync: [sender] link_stat \"/x\" failed: No such file or directory (2)\n", false},
	}
	for _, tt := range tests {
		a := NewAttributor(nil, "/src/", "rsync://h/mod/", "")
		for _, l := range splitLines(tt.stderr) {
			a.Stderr([]byte(l))
		}
		if got := a.Result().ListUnread(tt.code, tt.logged, tt.stderr); got != tt.want {
			t.Errorf("%s: ListUnread = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func TestReachOptions(t *testing.T) {
	tests := []struct {
		args, want []string
	}{
		{[]string{"--archive", "--sockopts=TCP_NODELAY", "--bwlimit=1m", "--chmod=u+w"}, []string{"--sockopts=TCP_NODELAY"}},
		{[]string{"-avz", "-e", "ssh -p 2222", "--rsync-path", "sudo rsync"}, []string{"-e", "ssh -p 2222", "--rsync-path", "sudo rsync"}},
		{[]string{"-essh -i key", "--port=8873", "-4"}, []string{"-e", "ssh -i key", "--port=8873", "-4"}},
		{[]string{"-ave", "ssh", "--password-file", "/p"}, []string{"-e", "ssh", "--password-file", "/p"}},
		{[]string{"-M--fake-super", "--remote-option", "--log-file=/x"}, []string{"-M", "--fake-super", "--remote-option", "--log-file=/x"}},
		// values of other options are not options
		{[]string{"--exclude", "-e", "--filter", "-4 x", "-f", "- *.q", "-B", "1024"}, nil},
		{[]string{"--address=10.0.0.1", "--contimeout=5", "--ipv6", "--blocking-io"}, []string{"--address=10.0.0.1", "--contimeout=5", "--ipv6", "--blocking-io"}},
		{[]string{"--", "-e", "ssh"}, nil},
	}
	for _, tt := range tests {
		if got := ReachOptions(tt.args); !slices.Equal(got, tt.want) {
			t.Errorf("ReachOptions(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}
