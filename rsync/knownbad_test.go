package rsync

import (
	"slices"
	"testing"
)

func TestParseBanner(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want Banner
		ok   bool
	}{
		{"gnu", "rsync  version 3.5.0  protocol version 32\nCopyright (C) 1996-2026\n", Banner{Version{3, 5, 0}, 32, false}, true},
		{"gnu 3.4.3", "rsync  version 3.4.3  protocol version 32\n", Banner{Version{3, 4, 3}, 32, false}, true},
		{"openrsync", "openrsync: protocol version 29\nrsync version 2.6.9 compatible\n", Banner{Version{2, 6, 9}, 29, true}, true},
		{"old", "rsync  version 2.6.9  protocol version 29\n", Banner{Version{2, 6, 9}, 29, false}, true},
		{"not rsync", "usage: foo\n", Banner{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseBanner([]byte(tt.out))
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseBanner = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestKnownBadFor(t *testing.T) {
	sources := func(ks []KnownBad) []string {
		var out []string
		for _, k := range ks {
			out = append(out, k.Source)
		}
		return out
	}
	tests := []struct {
		name   string
		banner Banner
		want   []string
	}{
		{"3.5.0", Banner{Version: Version{3, 5, 0}}, nil},
		{"3.4.4", Banner{Version: Version{3, 4, 4}}, nil},
		{"3.4.3", Banner{Version: Version{3, 4, 3}}, []string{
			"https://github.com/RsyncProject/rsync/issues/910", "https://github.com/RsyncProject/rsync/issues/928"}},
		{"3.4.2", Banner{Version: Version{3, 4, 2}}, []string{"https://github.com/RsyncProject/rsync/issues/715"}},
		{"3.4.0", Banner{Version: Version{3, 4, 0}}, []string{
			"https://github.com/RsyncProject/rsync/issues/702", "https://github.com/RsyncProject/rsync/issues/715"}},
		{"3.2.7", Banner{Version: Version{3, 2, 7}}, nil},
		{"openrsync", Banner{Version: Version{2, 6, 9}, OpenRsync: true}, []string{
			"https://derflounder.wordpress.com/2025/04/06/rsync-replaced-with-openrsync-on-macos-sequoia/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sources(KnownBadFor(tt.banner)); !slices.Equal(got, tt.want) {
				t.Errorf("KnownBadFor(%+v) = %q, want %q", tt.banner, got, tt.want)
			}
		})
	}
	for _, k := range knownBad {
		if k.Source == "" || k.What == "" || k.Fix == "" {
			t.Errorf("known-bad entry %+v lacks a source, a what or a fix", k)
		}
	}
}

func TestTriggered(t *testing.T) {
	by := func(trigger string) KnownBad {
		for _, k := range knownBad {
			if k.Trigger == trigger {
				return k
			}
		}
		t.Fatalf("no entry triggered by %s", trigger)
		return KnownBad{}
	}
	tests := []struct {
		trigger string
		args    []string
		want    bool
	}{
		{"--delete-missing-args", []string{"--delete-missing-args"}, true},
		{"--delete-missing-args", []string{"-v"}, false},
		{"--delete-missing-args", []string{"--exclude", "--delete-missing-args"}, false},
		{"--link-dest", []string{"--link-dest=../snap.1"}, true},
		{"--link-dest", []string{"--link-dest", "../snap.1"}, true},
		{"--link-dest", []string{"-e", "--link-dest"}, false},
		{"--hard-links", []string{"-aH"}, true},
		{"--hard-links", []string{"-a"}, false},
		{"--keep-dirlinks", []string{"-K"}, true},
		{"--keep-dirlinks", nil, false},
	}
	for _, tt := range tests {
		if got := by(tt.trigger).Triggered(tt.args); got != tt.want {
			t.Errorf("%s triggered by %q = %v, want %v", tt.trigger, tt.args, got, tt.want)
		}
	}
	if !(KnownBad{OpenRsync: true}).Triggered(nil) {
		t.Error("an entry without a trigger is not triggered by every run")
	}
}

func TestPreserves(t *testing.T) {
	tests := []struct {
		args []string
		want Preserved
	}{
		{nil, Preserved{}},
		{[]string{"-a"}, Preserved{}},
		{[]string{"--archive", "-v"}, Preserved{}},
		{[]string{"-aHAXS"}, Preserved{true, true, true, true}},
		{[]string{"-H"}, Preserved{HardLinks: true}},
		{[]string{"--hard-links", "--acls", "--xattrs", "--sparse"}, Preserved{true, true, true, true}},
		{[]string{"-H", "--no-hard-links"}, Preserved{}},
		{[]string{"-X", "--no-X"}, Preserved{}},
		{[]string{"--no-S", "-S"}, Preserved{Sparse: true}},
		{[]string{"-e", "ssh -A"}, Preserved{}},
		{[]string{"-e", "-H"}, Preserved{}},
		{[]string{"-essh"}, Preserved{Sparse: false}},
		{[]string{"--exclude", "-H", "-A"}, Preserved{ACLs: true}},
		{[]string{"--exclude=-H"}, Preserved{}},
		{[]string{"-T/tmp/HAX"}, Preserved{}},
		{[]string{"-vT", "-H"}, Preserved{}},
		{[]string{"--", "-H"}, Preserved{}},
	}
	for _, tt := range tests {
		if got := Preserves(tt.args); got != tt.want {
			t.Errorf("Preserves(%q) = %+v, want %+v", tt.args, got, tt.want)
		}
	}
}

// Judge is the one rule of the run and of prsync doctor: openrsync and a known-bad release
// whose bug the options meet are fatal, one they do not meet is a warning that does not
// apply, an rsync older than 3.1 a warning that does.
func TestJudge(t *testing.T) {
	type verdict struct{ fatal, applies bool }
	tests := []struct {
		name   string
		banner Banner
		args   []string
		want   []verdict
	}{
		{"3.5.0", Banner{Version: Version{3, 5, 0}}, []string{"--archive"}, nil},
		{"openrsync", Banner{Version: Version{2, 6, 9}, OpenRsync: true}, []string{"--archive"}, []verdict{{true, true}}},
		{"3.4.3, --link-dest", Banner{Version: Version{3, 4, 3}}, []string{"--archive", "--link-dest=../old"}, []verdict{{false, false}, {true, true}}},
		{"3.4.3, plain", Banner{Version: Version{3, 4, 3}}, []string{"--archive"}, []verdict{{false, false}, {false, false}}},
		{"3.0.9", Banner{Version: Version{3, 0, 9}}, []string{"--archive"}, []verdict{{false, true}}},
		{"3.1.0", Banner{Version: Version{3, 1, 0}}, []string{"--archive"}, nil},
	}
	for _, tt := range tests {
		var got []verdict
		for _, p := range Judge(tt.banner, tt.args) {
			got = append(got, verdict{p.Fatal, p.Applies})
			if p.What == "" || p.Fix == "" {
				t.Errorf("%s: a problem without a what or a fix: %+v", tt.name, p)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: Judge = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestVersionReply(t *testing.T) {
	const banner = "rsync  version 3.5.0  protocol version 32\n"
	for _, tt := range []struct {
		v    VersionReply
		want bool
	}{
		{VersionReply{Out: []byte(banner), Code: 0}, false},
		{VersionReply{Out: []byte("rsync: --no-such: unknown option\nrsync error: syntax or usage error (code 1) at main.c(1886) [client=3.5.0]\n"), Code: 1}, true},
		{VersionReply{Out: []byte(banner), Code: 1}, false}, // it said what it is: not the options
		{VersionReply{Code: 2}, false},
		{VersionReply{Code: -1}, false},
	} {
		if got := tt.v.Rejected(); got != tt.want {
			t.Errorf("%q exit %d: Rejected() = %v, want %v", tt.v.Out, tt.v.Code, got, tt.want)
		}
	}
	args := append(make([]string, 0, 4), "-a") // room to spare: VersionArgs must not write into it
	if got := VersionArgs(args); !slices.Equal(got, []string{"-a", "--version"}) || args[:2][1] != "" {
		t.Errorf("VersionArgs(-a) = %q; args' room holds %q", got, args[:2])
	}
}
