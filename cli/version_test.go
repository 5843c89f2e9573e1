package cli

import (
	"runtime/debug"
	"testing"
)

func TestMakeStamp(t *testing.T) {
	vcs := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{}
		for i := 0; i+1 < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	tagged := vcs("vcs.revision", "abc123", "vcs.time", "2026-12-01T10:00:00Z")
	tagged.Main.Version = "v1.2.3"
	devel := vcs("vcs.revision", "def456", "vcs.time", "2026-11-30T09:00:00Z", "vcs.modified", "true")
	devel.Main.Version = "(devel)"
	tests := []struct {
		name                 string
		version, commit, day string
		bi                   *debug.BuildInfo
		want                 stamp
	}{
		{"ldflags win", "v9.9.9", "fff", "2027-01-01", tagged, stamp{"v9.9.9", "fff", "2027-01-01"}},
		{"build info", "", "", "", tagged, stamp{"v1.2.3", "abc123", "2026-12-01T10:00:00Z"}},
		{"a dirty devel build", "", "", "", devel, stamp{"dev", "def456-dirty", "2026-11-30T09:00:00Z"}},
		{"no build info", "", "", "", nil, stamp{"dev", "", ""}},
		{"ldflags version, vcs commit", "v2.0.0", "", "", tagged, stamp{"v2.0.0", "abc123", "2026-12-01T10:00:00Z"}},
	}
	for _, tt := range tests {
		if got := makeStamp(tt.version, tt.commit, tt.day, tt.bi); got != tt.want {
			t.Errorf("%s: makeStamp = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
