package rsync

import "testing"

// TestStop: in every recorded disk-full run of the real rsync (push, pull, daemon), rsync
// stopped on big.bin, and the Result names it, full; no other recorded run stops on a path.
func TestStop(t *testing.T) {
	cases := recorded(t)
	vars := map[string]string{"TMP": "/t", "SRC": "/t/src", "DST": "/t/dst", "MOD": "/t/mod",
		"URL": "rsync://127.0.0.1:873/m/", "HELPER": "/t/helper", "PORT": "873"}
	full := 0
	for _, c := range cases {
		c = c.Expand(vars)
		src, dest := endpoints(t, c)
		local := ""
		if p, remote := endpointPath(dest); !remote {
			local = p
		}
		entries := make([][]byte, len(c.List))
		for i, e := range c.List {
			entries[i] = []byte(e)
		}
		a := NewAttributor(entries, src, dest, local)
		for _, l := range c.StdoutLines() {
			a.Stdout([]byte(l))
		}
		for _, l := range c.StderrLines() {
			a.Stderr([]byte(l))
		}
		r := a.Result()
		if len(c.Name) >= 9 && c.Name[:9] == "disk-full" {
			full++
			if len(r.Stop) != 1 || c.List[r.Stop[0]] != "big.bin" || !r.Full() || r.StopErrno != 28 {
				t.Errorf("%s: Stop %v (%q, errno %d), Full %v; want big.bin, full", c.Name, r.Stop, r.StopLine, r.StopErrno, r.Full())
			}
			continue
		}
		if len(r.Stop) > 0 {
			t.Errorf("%s: stops on %v (%q)", c.Name, r.Stop, r.StopLine)
		}
	}
	if full != 4 {
		t.Errorf("%d disk-full cases, want 4", full)
	}
	for _, tt := range []struct {
		line  string
		stops bool
		errno int
	}{
		{`rsync: [receiver] write failed on "/d/iso": File too large (27)`, true, 27},
		{`rsync: [receiver] write failed on "big" (in m): Disk quota exceeded (122)`, true, 122},
		{`rsync: [receiver] fsync failed on "/d/f": Input/output error (5)`, true, 5},
		{`rsync: [receiver] close failed on "/d/.f.AbCdEf": No space left on device (28)`, true, 28},
		{`rsync: [receiver] mkstemp "/d/.f.AbCdEf" failed: No space left on device (28)`, false, 28},
		{`rsync: [sender] read errors mapping "/s/f": Input/output error (5)`, false, 5},
	} {
		m := ParseMessage([]byte(tt.line))
		if m.Stops != tt.stops || m.Errno != tt.errno || m.Name == nil {
			t.Errorf("%q: Stops %v errno %d name %q, want %v %d", tt.line, m.Stops, m.Errno, m.Name, tt.stops, tt.errno)
		}
	}
}

// TestStopNames: each stop message resolves to the one path it stopped on, the temp name
// of "close failed on" (receiver.c:1280 prints fnametmp) included, locally and in a daemon.
func TestStopNames(t *testing.T) {
	entries := [][]byte{[]byte("sub/f"), []byte("g"), []byte("a b")}
	for _, tt := range []struct {
		dest, line string
		want       int
		full       bool
	}{
		{"/d", `rsync: [receiver] close failed on "/d/sub/.f.AbCdEf": No space left on device (28)`, 0, true},
		{"/d", `rsync: [receiver] fsync failed on "/d/g": Input/output error (5)`, 1, false},
		{"/d", `rsync: [receiver] write failed on "/d/a b": File too large (27)`, 2, false},
		{"rsync://h/m/", `rsync: [receiver] write failed on "sub/f" (in m): Disk quota exceeded (122)`, 0, true},
		{"rsync://h/m/", `rsync: [receiver] close failed on "sub/.f.AbCdEf" (in m): No space left on device (28)`, 0, true},
	} {
		local := ""
		if tt.dest[0] == '/' {
			local = tt.dest
		}
		a := NewAttributor(entries, "/s/", tt.dest, local)
		a.Stderr([]byte(tt.line))
		r := a.Result()
		if len(r.Stop) != 1 || r.Stop[0] != tt.want || r.Full() != tt.full {
			t.Errorf("%q: Stop %v Full %v, want [%d] %v", tt.line, r.Stop, r.Full(), tt.want, tt.full)
		}
	}
}
