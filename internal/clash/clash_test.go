package clash

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFind(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile("list", []byte("a\n"), 0o644))
	must(os.WriteFile("other", []byte("b\n"), 0o644))
	must(os.Mkdir("sub", 0o755))
	must(os.MkdirAll("far/deep", 0o755))
	must(os.Symlink("list", "link"))
	must(os.Link("list", "hard"))
	must(os.Symlink("far/deep", "dlink"))    // dlink/.. is far, not .
	must(os.Symlink("new.prom", "dangling")) // creating it creates new.prom
	must(os.WriteFile("far/x", nil, 0o644))  // dlink/../x
	must(os.WriteFile("x", nil, 0o644))      // ./x, which dlink/../x is not
	must(os.Symlink("/dev/null", "null"))    // a device loses nothing
	listFile, err := os.Open("list")
	must(err)
	defer listFile.Close()
	stdin, err := listFile.Stat()
	must(err)
	in := func(flag, path string) File { return File{Flag: flag, Path: path} }
	out := func(flag, path string) File { return File{Flag: flag, Path: path, Out: true} }
	stream := func(flag string, out bool) File { return File{Flag: flag, Info: stdin, Out: out} }

	tests := []struct {
		name  string
		files []File
		want  string // the clash's message; "" for none
	}{
		{"distinct", []File{in("--from", "list"), out("--failed", "other"), out("--metrics-file", "m.prom")}, ""},
		{"as given", []File{in("--from", "list"), out("--failed", "list")},
			"--failed list is the input (--from list): it would be overwritten"},
		{"symlink", []File{in("--from", "list"), out("--failed", "link")},
			"--failed link is the input (--from list): it would be overwritten"},
		{"hard link", []File{in("--from", "list"), out("--metrics-file", "hard")},
			"--metrics-file hard is the input (--from list): it would be overwritten"},
		{"dot dot", []File{in("--from", "list"), out("--failed", "sub/../list")},
			"--failed sub/../list is the input (--from list): it would be overwritten"},
		{"dot dot below a symlink is the kernel's", []File{in("--from", "far/x"), out("--failed", "dlink/../x")},
			"--failed dlink/../x is the input (--from far/x): it would be overwritten"},
		{"dot dot below a symlink, lexically elsewhere", []File{in("--from", "x"), out("--failed", "dlink/../x")}, ""},
		{"stdin", []File{stream("stdin", false), out("--failed", "hard")},
			"--failed hard is the input (stdin): it would be overwritten"},
		{"stream to stream", []File{stream("stdin", false), stream("stdout", true)}, ""},
		{"stdout", []File{in("--from", "link"), stream("stdout", true)},
			"stdout is the input (--from link): it would be overwritten"},
		{"two outputs, neither there yet", []File{out("--failed", "new.list"), out("--metrics-file", "sub/../new.list")},
			"--failed new.list and --metrics-file sub/../new.list are the same file: one would overwrite the other"},
		{"two outputs below a missing directory", []File{out("--failed", "no/such/f"), out("--metrics-file", "no/such/../such/f")},
			"--failed no/such/f and --metrics-file no/such/../such/f are the same file: one would overwrite the other"},
		{"a dangling symlink is followed", []File{out("--metrics-file", "new.prom"), out("--failed", "dangling")},
			"--metrics-file new.prom and --failed dangling are the same file: one would overwrite the other"},
		{"an absolute path", []File{out("the control socket", filepath.Join(dir, "sub", "1.sock")), out("--failed", "sub/1.sock")},
			"the control socket " + filepath.Join(dir, "sub", "1.sock") + " and --failed sub/1.sock are the same file: one would overwrite the other"},
		{"two outputs, one there", []File{out("--failed", "other"), out("--metrics-file", "./other")},
			"--failed other and --metrics-file ./other are the same file: one would overwrite the other"},
		{"devices", []File{in("--from", "/dev/null"), out("--failed", "null"), out("--metrics-file", "/dev/null")}, ""},
		{"an input that is missing", []File{in("--from", "gone"), out("--failed", "gone")}, ""},
		{"the first clash", []File{in("--from", "list"), out("--failed", "other"), out("--metrics-file", "link"), out("-o", "other")},
			"--metrics-file link is the input (--from list): it would be overwritten"},
		{"a noun", []File{{Flag: "EVENTS", Path: "list", Noun: "the events file"}, out("-o", "hard")},
			"-o hard is the events file (EVENTS list): it would be overwritten"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Find(tt.files)
			got := ""
			if c != nil {
				got = c.Error()
			}
			if got != tt.want {
				t.Errorf("Find = %q\n          want %q", got, tt.want)
			}
		})
	}
}

func TestHint(t *testing.T) {
	c := &Clash{Out: File{Flag: "--metrics-file", Path: "m.prom", Out: true}, Other: File{Flag: "stdin"}}
	if got := c.HintText(); got != "name another file for --metrics-file" {
		t.Errorf("hint %q", got)
	}
	c = &Clash{Out: File{Flag: "stdout", Out: true}, Other: File{Flag: "--from", Path: "list"}}
	if got := c.HintText(); got != "send stdout to another file" {
		t.Errorf("hint %q", got)
	}
}

func TestResolve(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	os.MkdirAll("a/b", 0o755)
	os.Symlink("a/b", "l")
	os.Symlink("loop", "loop") // a loop: followed 40 times, then taken as it is
	tests := []struct{ in, want string }{
		{"f", dir + "/f"},
		{"l/f", dir + "/a/b/f"},
		{"l/../f", dir + "/a/f"},
		{"missing/../f", dir + "/f"},
		{dir + "/l/x/y", dir + "/a/b/x/y"},
		{"/", "/"},
	}
	for _, tt := range tests {
		if got := Resolve(tt.in); got != tt.want {
			t.Errorf("Resolve(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := Resolve("loop"); got != dir+"/loop" {
		t.Errorf("Resolve(loop) = %q", got)
	}
}
