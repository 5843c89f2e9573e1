package exec

// groupAlive reports whether a process of the group pgid is alive and not a zombie.
func groupAlive(pgid int) bool {
	alive := false
	if !eachProc(func(_, state string, pgrp int) bool {
		alive = pgrp == pgid && state != "Z" && state != "X"
		return !alive
	}) {
		return true
	}
	return alive
}
