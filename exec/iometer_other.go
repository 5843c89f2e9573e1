//go:build !linux

package exec

type written struct {
	pgid  int
	bytes uint64
}

func groupWrites(map[int]bool) map[int]written { return nil }

const ioMeasured = false

// IOMeasured reports whether the pool can see what each rsync group writes (Linux).
func IOMeasured() bool { return ioMeasured }
