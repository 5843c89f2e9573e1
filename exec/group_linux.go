package exec

import (
	"bytes"
	"os"
	"strconv"
)

// groupAlive reports whether a process of the group pgid is alive and not a zombie.
func groupAlive(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
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
		if g, _ := strconv.Atoi(string(f[2])); g == pgid && string(f[0]) != "Z" && string(f[0]) != "X" {
			return true
		}
	}
	return false
}
