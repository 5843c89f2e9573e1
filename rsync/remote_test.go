package rsync

import "testing"

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
