package throttle

// DetectCgroup finds the cgroup this process runs in and reports it: the
// cgroup version and path of the cpu controller, the tightest CPU limit on
// the cgroup or its ancestors, where the cgroup's CPU use can be read, and
// which PSI files give cpu and io pressure.
//
// It reads /proc/self/cgroup and /proc/self/mountinfo, so it handles cgroup
// v2, v1 with cpu and cpuacct mounted together or apart, the hybrid layout
// (v1 controllers beside a v2 hierarchy), and containers whose cgroup mounts
// have a root other than "/". Without cgroups the result has Version 0 and
// the system-wide PSI files, and the error is nil; an error means a file
// could not be read or parsed, and the result then holds what was found
// before it. NewSystemSampler does the same detection (see
// SystemSampler.Source).
func DetectCgroup() (CgroupInfo, error) {
	found, err := detectCgroup("/")
	return found.CgroupInfo, err
}

// hostCgroupMeter detects this process's cgroup and returns a meter of its
// CPU use, nil if it has no CPU limit.
func hostCgroupMeter() (cgroupFound, *cgroupMeter, error) {
	found, err := detectCgroup("/")
	if err != nil {
		return found, nil, err
	}
	return found, newCgroupMeter(found, "/", clockTicks()), nil
}
