package exec

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prsync/prsync/internal/cmdline"
)

func TestPipeHelperRefuses(t *testing.T) {
	t.Setenv(pipeRsyncEnv, "/usr/bin/rsync")
	tests := [][]string{
		nil,
		{"localhost"},
		{"otherhost", "/usr/bin/rsync", "--server", "--sender", "."},
		{"localhost", "/bin/sh", "--server", "--sender", "-c", "touch PWNED"},
		{"localhost", "/usr/bin/rsync", "--daemon", "--sender"},
		{"localhost", "/usr/bin/rsync", "--server", "."}, // a receiver: the pipe transport only pulls
		{"localhost", "/usr/bin/rsync2", "--server", "--sender"},
	}
	for _, args := range tests {
		var errb bytes.Buffer
		if code := cmdline.Fail(&errb, PipeHelper(args), 0); code != 1 || !strings.HasPrefix(errb.String(), "prsync: error: ") {
			t.Errorf("PipeHelper(%q) = %d, %q; want a refusal", args, code, errb.String())
		}
	}
	t.Setenv(pipeRsyncEnv, "")
	var errb bytes.Buffer
	if code := cmdline.Fail(&errb, PipeHelper([]string{"localhost", "", "--server", "--sender"}), 0); code != 1 {
		t.Errorf("without prsync's environment: exit %d, %q", code, errb.String())
	}
}

func TestPipeUsable(t *testing.T) {
	for args, want := range map[string]bool{
		"": true, "-v --bwlimit=10m -H": true, "-avz": true, "-T /tmp": true,
		"-e ssh": false, "--rsh=ssh": false, "-avze ssh": false, "--rsync-path=/opt/rsync": false,
		"--old-args": false, "-M --fake-super": false, "--no-s": false, "-B1024e": true,
	} {
		if got, why := PipeUsable(strings.Fields(args)); got != want {
			t.Errorf("PipeUsable(%q) = %v (%s), want %v", args, got, why, want)
		}
	}
}

func TestRshQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/bin/prsync": "/usr/bin/prsync", "/opt/my tools/prsync": "'/opt/my tools/prsync'",
		"/opt/it's/prsync": `"/opt/it's/prsync"`, `/a'b"c/prsync`: "",
	} {
		got, err := rshQuote(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("rshQuote(%q) = %q, %v", in, got, err)
		}
	}
}

func TestPipeArgs(t *testing.T) {
	const base = "-e /usr/bin/prsync --rsync-pipe-helper --rsync-path=/usr/bin/rsync -s"
	tests := []struct {
		args  string // the pool's rsync options
		trust bool
		want  string
	}{
		{"--archive", false, base + " --whole-file"},
		{"--archive", true, base + " --whole-file --trust-sender"},
		// the user's choice, or options that need the delta algorithm, stand
		{"--archive --no-whole-file", false, base},
		{"--archive -W", false, base},
		{"--archive --append-verify", false, base},
	}
	for _, tt := range tests {
		p := &Pool{Rsync: "/usr/bin/rsync", Helper: "/usr/bin/prsync --rsync-pipe-helper", TrustSender: tt.trust,
			Env: []string{"A=1"}, Args: strings.Fields(tt.args)}
		opts, from, env := p.pipeArgs("/src/")
		if got := strings.Join(opts, " "); got != tt.want {
			t.Errorf("%q, TrustSender %v: options %q, want %q", tt.args, tt.trust, got, tt.want)
		}
		if from != "localhost:/src/" {
			t.Errorf("source %q", from)
		}
		if strings.Join(env, " ") != "A=1 "+pipeRsyncEnv+"=/usr/bin/rsync" {
			t.Errorf("environment %q", env)
		}
	}
}
