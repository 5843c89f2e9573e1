//go:build !linux

package exec

func groupWrites(map[int]bool) map[int]uint64 { return nil }

const ioMeasured = false
