//go:build !linux

package throttle

// ownCPUSource returns nil: prsync's own CPU use is measured only on Linux,
// so elsewhere (macOS, for instance) its rsyncs count toward the CPU
// thresholds like any other load.
func ownCPUSource(func() ([]int, []FUSEMount)) func([]int) (cpuTimes, error) { return nil }
