//go:build !linux

package throttle

// DetectCgroup reports no cgroup: cgroups exist only on Linux. The result
// has Version 0 and no PSI files, and the error is nil.
func DetectCgroup() (CgroupInfo, error) { return CgroupInfo{}, nil }

// hostCgroupMeter returns no meter: cgroups exist only on Linux.
func hostCgroupMeter() (cgroupFound, *cgroupMeter, error) { return cgroupFound{}, nil, nil }
