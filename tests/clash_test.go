package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clashRun is one refused run: how prsync is started, and what must be true afterwards.
type clashRun struct {
	name  string
	args  []string // before DEST
	shell string   // run prsync through sh -c SHELL, which ends in exec "$0" ... "$@"; "" for none
	stdin bool     // stdin is the victim
	names []string // what the one error line names
	new   []string // files that did not exist and must still not exist
}

// TestOutputClash: every output prsync writes (--failed, --metrics-file) named as a file
// it reads (stdin, --from, with --sizes too) or as another output (--failed or
// --metrics-file, the control socket, stdout when it is a file), through a symlink, a hard
// link and "..", is refused before anything is created: exit 1, one error line naming
// both, the file byte for byte as it was, DEST not created, stdout empty. A hard link needs
// a file to link to: the control socket, which does not exist before prsync makes it, is
// reached through a dangling symlink and "..". Before, --metrics-file LIST replaced the
// list with metrics and exited 0, and --failed F --metrics-file F lost the failed list.
func TestOutputClash(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	bin(t) // build before the parallel subtests
	const victim = "v/list"
	ways := []struct{ name, via string }{{"symlink", "ln"}, {"hard link", "hl"}, {"dot dot", "sub/../v/list"}}
	other := map[string]string{"--failed": "--metrics-file", "--metrics-file": "--failed"}
	var runs []clashRun
	for _, out := range []string{"--failed", "--metrics-file"} {
		for _, w := range ways {
			at := func(name string) string { return out + ", " + name + ", " + w.name }
			runs = append(runs,
				clashRun{name: at("stdin"), args: []string{out, w.via}, stdin: true, names: []string{out, "stdin"}},
				clashRun{name: at("stdin --sizes"), args: []string{"--sizes", out, w.via}, stdin: true, names: []string{out, "stdin"}},
				clashRun{name: at("--from"), args: []string{"--from", victim, out, w.via}, names: []string{out, "--from"}},
				clashRun{name: at("--from --sizes"), args: []string{"--sizes", "--from", victim, out, w.via}, names: []string{out, "--from"}},
				clashRun{name: at("--from through it"), args: []string{"--from", w.via, out, victim}, names: []string{out, "--from"}},
				clashRun{name: at(other[out]), args: []string{other[out], victim, out, w.via}, names: []string{out, other[out]}},
				clashRun{name: at("stdout"), args: []string{out, w.via}, shell: `exec "$0" "$@" >>v/list`, names: []string{out, "stdout"}},
			)
		}
		runs = append(runs,
			clashRun{name: out + ", the control socket, symlink", args: []string{out, "sock"},
				shell: `ln -s "$XDG_RUNTIME_DIR/prsync/$$.sock" sock && exec "$0" "$@"`, names: []string{out, "the control socket"}},
			clashRun{name: out + ", the control socket, dot dot",
				shell: `exec "$0" ` + out + ` "$XDG_RUNTIME_DIR/prsync/../prsync/$$.sock" "$@"`, names: []string{out, "the control socket"}},
		)
	}
	runs = append(runs,
		clashRun{name: "two new outputs, dot dot", args: []string{"--failed", "new.list", "--metrics-file", "sub/../new.list"},
			names: []string{"--failed", "--metrics-file"}, new: []string{"new.list"}},
		clashRun{name: "two new outputs, a dangling symlink", args: []string{"--metrics-file", "new.prom", "--failed", "dangling"},
			names: []string{"--failed", "--metrics-file"}, new: []string{"new.prom", "sub/new.prom"}},
	)
	for _, tt := range runs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			content := []byte("src/a\n")
			if strings.Contains(tt.name, "--sizes") {
				content = []byte("2\tsrc/a\n")
			}
			writeFile(t, filepath.Join(base, "src", "a"), "a", 0o644)
			writeFile(t, filepath.Join(base, victim), string(content), 0o644)
			for _, err := range []error{
				os.Mkdir(filepath.Join(base, "sub"), 0o755),
				os.Symlink(victim, filepath.Join(base, "ln")),
				os.Link(filepath.Join(base, victim), filepath.Join(base, "hl")),
				os.Symlink("new.prom", filepath.Join(base, "dangling")),
				os.MkdirAll(filepath.Join(base, "run", "prsync"), 0o700),
				os.Chmod(filepath.Join(base, "run"), 0o700),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
			o := startOpts{dir: base, env: []string{"XDG_RUNTIME_DIR=" + filepath.Join(base, "run")}}
			if tt.stdin {
				fh, err := os.Open(filepath.Join(base, victim))
				if err != nil {
					t.Fatal(err)
				}
				defer fh.Close()
				o.stdin = fh
			}
			if tt.shell != "" {
				o.wrap = []string{"sh", "-c", tt.shell}
			}
			r := start(t, o, append(tt.args, "dst")...).wait(time.Minute)
			r.Refused(t, 1, tt.names...)
			if b, _ := os.ReadFile(filepath.Join(base, victim)); !bytes.Equal(b, content) {
				t.Errorf("%s is now %q, was %q", victim, b, content)
			}
			absent(t, base, append(tt.new, "dst")...)
		})
	}
}

// TestRefusalCreatesNothing: a run refused for any reason creates nothing: not DEST (nor
// its parents), not a --failed or --metrics-file that did not exist, and it does not empty
// an old --failed list. Before, DEST was created first (--failed /no/such/dir/f created
// DEST, then failed), and --failed was emptied before --metrics-file was checked. As root,
// the runs are made as nobody, for whom a directory of mode 0555 cannot be written.
func TestRefusalCreatesNothing(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	bin(t)
	tests := []struct {
		name   string
		args   []string // with W for the writable directory and RO for the read-only one
		stdin  string
		code   int
		names  []string // in the error line
		dest   string   // DEST, with W and RO as in args; "" for W/new/dst
		absent []string // below W
	}{
		{name: "unwritable --failed directory", args: []string{"--failed", "RO/failed", "--metrics-file", "W/m.prom"},
			code: 1, names: []string{"--failed", "RO/failed: permission denied"}, absent: []string{"m.prom"}},
		{name: "unwritable --metrics-file directory", args: []string{"--failed", "W/failed", "--metrics-file", "RO/m.prom"},
			code: 1, names: []string{"--metrics-file RO/m.prom: cannot create a file in RO: permission denied"}, absent: []string{"failed"}},
		{name: "--failed in a missing directory", args: []string{"--failed", "/no/such/dir/f", "--metrics-file", "W/m.prom"},
			code: 1, names: []string{"--failed: open /no/such/dir/f: no such file or directory"}, absent: []string{"m.prom"}},
		{name: "an old --failed list is not emptied", args: []string{"--failed", "W/old", "--metrics-file", "RO/m.prom"},
			code: 1, names: []string{"--metrics-file"}},
		{name: "bad --from", args: []string{"--from", "W/missing.list", "--failed", "W/failed", "--metrics-file", "W/m.prom"},
			code: 2, names: []string{"--from", "no such file or directory"}, absent: []string{"failed", "m.prom"}},
		{name: "DEST in an unwritable directory", args: []string{"--failed", "W/failed", "--metrics-file", "W/m.prom"}, dest: "RO/new/dst",
			code: 3, names: []string{"create destination: mkdir RO/new: permission denied"}, absent: []string{"failed", "m.prom"}},
		{name: "DEST below a file", args: []string{"--failed", "W/failed", "--metrics-file", "W/m.prom"}, dest: "W/old/dst",
			code: 3, names: []string{"not a directory"}, absent: []string{"failed", "m.prom"}},
		{name: "an option rsync rejects", args: []string{"--failed", "W/failed", "--metrics-file", "W/m.prom", "DEST", "--", "--no-such-option"},
			code: 1, names: []string{"rsync rejected the options"}, absent: []string{"failed", "m.prom"}},
		{name: "a CRLF list", args: []string{"--failed", "W/failed", "--metrics-file", "W/m.prom"}, stdin: "src/a\r\n",
			code: 1, names: []string{"CRLF"}, absent: []string{"failed", "m.prom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			w, ro := filepath.Join(base, "w"), filepath.Join(base, "ro")
			var o startOpts
			if isRoot() {
				o = asNobody(t, base)
				nobodysDir(t, w)
				nobodysDir(t, ro)
			} else {
				os.MkdirAll(w, 0o755)
				os.MkdirAll(ro, 0o755)
			}
			writeFile(t, filepath.Join(base, "src", "a"), "a", 0o644)
			writeFile(t, filepath.Join(w, "old"), "src/old\n", 0o666) // writable by nobody
			if err := os.Chmod(ro, 0o555); err != nil {
				t.Fatal(err)
			}
			o.dir, o.in = base, []byte(tt.stdin)
			dest := filepath.Join(w, "new", "dst")
			if tt.dest != "" {
				dest = strings.NewReplacer("RO/", ro+"/", "W/", w+"/").Replace(tt.dest)
			}
			args := make([]string, 0, len(tt.args)+1)
			for _, a := range tt.args {
				args = append(args, strings.NewReplacer("RO/", ro+"/", "W/", w+"/", "DEST", dest).Replace(a))
			}
			if !strings.Contains(strings.Join(tt.args, " "), "DEST") {
				args = append(args, dest)
			}
			r := start(t, o, args...).wait(time.Minute)
			names := make([]string, len(tt.names))
			for i, n := range tt.names {
				names[i] = strings.NewReplacer("RO/", ro+"/", "RO", ro, "W/", w+"/").Replace(n)
			}
			r.Refused(t, tt.code, names...)
			absent(t, w, append(tt.absent, "new")...)
			absent(t, "/", dest)
			if b, _ := os.ReadFile(filepath.Join(w, "old")); string(b) != "src/old\n" {
				t.Errorf("the old --failed list is now %q", b)
			}
			if ents, _ := os.ReadDir(ro); len(ents) > 0 {
				t.Errorf("%s holds %v", ro, ents)
			}
		})
	}
}
