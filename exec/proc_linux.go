package exec

import (
	"bytes"
	"os"
	"strconv"
)

// eachProc calls fn for every process in /proc with its PID (as /proc names it), its
// state letter and its process group, until fn returns false. It reports whether /proc
// could be read.
func eachProc(fn func(pid, state string, pgrp int) bool) bool {
	d, err := os.Open("/proc")
	if err != nil {
		return false
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil && len(names) == 0 {
		return false
	}
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:]) // state, ppid, pgrp, …
		if len(f) < 3 {
			continue
		}
		g, _ := strconv.Atoi(string(f[2]))
		if !fn(name, string(f[0]), g) {
			break
		}
	}
	return true
}
