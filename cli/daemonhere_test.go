package cli

import "testing"

func TestOnThisMachine(t *testing.T) {
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.0.0.2", true},
		{"::1", true},
		{"localhost", true},
		{"192.0.2.1", false}, // TEST-NET-1: no machine's
		{"no-such-host.invalid", false},
	} {
		if got := onThisMachine(tc.host); got != tc.want {
			t.Errorf("onThisMachine(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}

func TestLocalDaemonPorts(t *testing.T) {
	for _, tc := range []struct {
		dest, root string
		args       []string
		want       []int
	}{
		{"rsync://127.0.0.1:8873/mod/", "", nil, []int{8873}},
		{"127.0.0.1::mod/x", "", []string{"--port=2873"}, []int{2873}},
		{"localhost::mod", "", nil, []int{873}},
		{"localhost::mod", "", []string{"-e", "ssh"}, nil}, // a daemon over a remote shell
		{"rsync://192.0.2.1/mod/", "", nil, nil},
		{"/tmp/dst", "rsync://127.0.0.1:9873/mod/", nil, []int{9873}},
		{"127.0.0.1:/tmp/dst", "", nil, nil}, // ssh
		{"/tmp/dst", "", nil, nil},
	} {
		r := &runner{args: tc.args, srcRemote: tc.root}
		r.f.Dest = tc.dest
		got := r.localDaemonPorts()
		if len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] {
			t.Errorf("%q, root %q, %v: %v, want %v", tc.dest, tc.root, tc.args, got, tc.want)
		}
	}
}
