package throttle

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CgroupInfo describes the cgroup that prsync runs in, as far as the CPU
// thresholds and the pressure limits are concerned: what DetectCgroup found
// and what a SystemSampler reads.
type CgroupInfo struct {
	// Version is the cgroup version of the cpu controller, 1 or 2, or 0
	// if there is none (not Linux, no cgroup file system mounted, or the
	// cgroup of this process cannot be reached from its mounts).
	Version int
	// Path is this process's cgroup in the cpu controller's hierarchy, as
	// /proc/self/cgroup names it, such as "/kubepods/pod1/ctr"; "" if
	// Version is 0.
	Path string
	// Dir is that cgroup's directory, such as
	// "/sys/fs/cgroup/cpu/kubepods/pod1/ctr"; "" if Version is 0.
	Dir string
	// CPUs is the CPU budget in CPUs: quota / period of the tightest CPU
	// limit set on the cgroup or one of its ancestors (0.5 is half a
	// CPU), or 0 if there is no limit.
	CPUs float64
	// LimitDir is the directory of the cgroup that sets CPUs, Dir or an
	// ancestor of it; its CPU use is what Sample.CgroupCPU measures, since
	// the quota is shared by everything below it. "" if CPUs is 0.
	LimitDir string
	// Usage names where the CPU use of LimitDir comes from: UsageCPUStat,
	// UsageCPUAcct or UsageProcs; "" if CPUs is 0.
	Usage string
	// PSI says where the cpu and io pressure figures come from: PSICgroup
	// (cpu.pressure and io.pressure of this process's cgroup v2
	// directory), PSISystem (/proc/pressure), or "" if neither exists.
	PSI string
	// CPUPressureFile and IOPressureFile are the PSI files read for
	// Policy.MaxCPUPressure and Policy.MaxIOPressure; "" where there are
	// none (not Linux).
	CPUPressureFile string
	IOPressureFile  string
}

// Sources of cgroup CPU use, for CgroupInfo.Usage.
const (
	// UsageCPUStat is usage_usec of the cgroup v2 cpu.stat.
	UsageCPUStat = "cpu.stat"
	// UsageCPUAcct is cpuacct.usage of cgroup v1, read when the cpuacct
	// cgroup is the same group as the cpu one: the controllers are
	// mounted together, or this process has the same path in both.
	UsageCPUAcct = "cpuacct.usage"
	// UsageProcs is the utime and stime, in /proc/PID/stat, of the
	// processes listed in cgroup.procs of the cgroup and its descendants:
	// for a v1 cpu cgroup without a matching cpuacct one, or when
	// cpu.stat or cpuacct.usage cannot be read.
	UsageProcs = "procs"
)

// Sources of pressure stall information, for CgroupInfo.PSI.
const (
	PSICgroup = "cgroup" // cpu.pressure and io.pressure of the cgroup v2 directory
	PSISystem = "system" // /proc/pressure/cpu and /proc/pressure/io
)

// errMalformed marks a cgroup or proc file that cannot be parsed.
var errMalformed = errors.New("malformed")

// cgroupEntry is one line of /proc/PID/cgroup.
type cgroupEntry struct {
	v2          bool     // hierarchy 0 with no controllers: the unified hierarchy
	controllers []string // v1 controllers, such as "cpu", "cpuacct", "name=systemd"
	path        string   // cgroup path in the hierarchy, starting with "/"
}

func (e cgroupEntry) has(controller string) bool { return slices.Contains(e.controllers, controller) }

// parseProcCgroup parses /proc/PID/cgroup, whose lines are
//
//	hierarchy-ID:controller-list:cgroup-path
//
// such as "4:cpu,cpuacct:/docker/abc" for cgroup v1 and "0::/user.slice" for
// the v2 unified hierarchy.
func parseProcCgroup(b []byte) ([]cgroupEntry, error) {
	var out []cgroupEntry
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		ctrls, p, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || !isDigits(id) || !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("%w line %q", errMalformed, line)
		}
		e := cgroupEntry{path: p}
		if id == "0" && ctrls == "" {
			e.v2 = true
		} else {
			e.controllers = strings.Split(ctrls, ",")
		}
		out = append(out, e)
	}
	return out, nil
}

// cgroupMount is a cgroup or cgroup2 line of /proc/PID/mountinfo.
type cgroupMount struct {
	root  string   // the mount's root within the hierarchy (field 4)
	point string   // mount point (field 5)
	v2    bool     // file system type cgroup2, not cgroup
	opts  []string // super options (field 11), such as "rw", "cpu", "cpuacct"
}

// parseMountinfo returns the cgroup mounts of /proc/PID/mountinfo, whose
// lines look like
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// (mount id, parent id, device, root, mount point, options, optional fields
// up to "-", file system type, source, super options; see proc_pid_mountinfo(5)).
// Paths have space, tab, newline and backslash escaped in octal, as \040.
func parseMountinfo(b []byte) ([]cgroupMount, error) {
	var out []cgroupMount
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue
		}
		fields := strings.Split(line, " ")
		sep := slices.Index(fields, "-")
		if sep < 6 || len(fields) < sep+4 {
			return nil, fmt.Errorf("%w line %q", errMalformed, line)
		}
		fstype := fields[sep+1]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		root, point := unescapeMountPath(fields[3]), unescapeMountPath(fields[4])
		if !strings.HasPrefix(root, "/") || !strings.HasPrefix(point, "/") {
			return nil, fmt.Errorf("%w line %q", errMalformed, line)
		}
		out = append(out, cgroupMount{
			root:  root,
			point: point,
			v2:    fstype == "cgroup2",
			opts:  strings.Split(fields[sep+3], ","),
		})
	}
	return out, nil
}

// unescapeMountPath undoes the octal escapes (\040 for a space) of a path in
// /proc/PID/mountinfo.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// rel returns the path of cgroup cg relative to the mount's root, starting
// with "/", or false if the mount cannot reach it. Inside a container the
// root is often not "/": a mount with root /kubepods/pod1/ctr shows that
// cgroup at its mount point. A path starting with "/.." lies outside this
// process's cgroup namespace and cannot be reached.
func (m cgroupMount) rel(cg string) (string, bool) {
	var rel string
	switch {
	case m.root == "/":
		rel = cg
	case cg == m.root:
		rel = "/"
	case strings.HasPrefix(cg, m.root+"/"):
		rel = cg[len(m.root):]
	default:
		return "", false
	}
	if rel == "/.." || strings.HasPrefix(rel, "/../") {
		return "", false
	}
	return path.Clean(rel), true
}

// cgPath returns the cgroup path of rel, a path relative to the mount's root.
func (m cgroupMount) cgPath(rel string) string { return path.Join(m.root, rel) }

// cgroupDir is a cgroup found in one hierarchy.
type cgroupDir struct {
	m   cgroupMount
	rel string // relative to m.root
}

// dir returns the cgroup's directory under the file system root.
func (d cgroupDir) dir(root string) string { return filepath.Join(root, d.m.point, d.rel) }

// parent returns the parent cgroup, or false at the top of the mount.
func (d cgroupDir) parent() (cgroupDir, bool) {
	if d.rel == "/" {
		return d, false
	}
	return cgroupDir{d.m, path.Dir(d.rel)}, true
}

// findCgroupDir returns the first mount that reaches cg and is of the v2
// hierarchy (v2) or a v1 one with controller among its options, preferring a
// mount under which the cgroup's directory exists.
func findCgroupDir(root string, mounts []cgroupMount, cg string, v2 bool, controller string) (cgroupDir, bool) {
	var first cgroupDir
	found := false
	for _, m := range mounts {
		if m.v2 != v2 || (!v2 && !slices.Contains(m.opts, controller)) {
			continue
		}
		rel, ok := m.rel(cg)
		if !ok {
			continue
		}
		d := cgroupDir{m, rel}
		if fi, err := os.Stat(d.dir(root)); err == nil && fi.IsDir() {
			return d, true
		}
		if !found {
			first, found = d, true
		}
	}
	return first, found
}

// cgroupFound is what detectCgroup finds.
type cgroupFound struct {
	CgroupInfo
	usageFile string // cpu.stat or cpuacct.usage; "" for UsageProcs or no limit
}

// detectCgroup finds the cgroup of the process whose /proc/self and whose
// cgroup file systems are under root ("/" for this process), its CPU limit,
// the source of its CPU use and the PSI files. A system without cgroups is
// not an error: it gives Version 0. On an error, what was found before it
// (the PSI files at least) is returned with it.
func detectCgroup(root string) (cgroupFound, error) {
	var found cgroupFound
	info := &found.CgroupInfo
	entries, mounts, err := readSelfCgroup(root)
	if err != nil {
		setPSI(info, root, cgroupDir{}, false)
		return found, err
	}
	var cpuEntry, v2Entry *cgroupEntry
	for i, e := range entries {
		switch {
		case e.v2:
			v2Entry = &entries[i]
		case e.has("cpu"):
			cpuEntry = &entries[i]
		}
	}
	var v2Dir cgroupDir
	haveV2 := false
	if v2Entry != nil {
		v2Dir, haveV2 = findCgroupDir(root, mounts, v2Entry.path, true, "")
	}
	setPSI(info, root, v2Dir, haveV2)

	// A v1 hierarchy with the cpu controller takes precedence: the
	// controller cannot be in both, and a v2 hierarchy beside v1 ones
	// (the "hybrid" layout) has no CPU limits then.
	var cpuDir cgroupDir
	switch {
	case cpuEntry != nil:
		d, ok := findCgroupDir(root, mounts, cpuEntry.path, false, "cpu")
		if !ok {
			return found, nil
		}
		info.Version, info.Path, cpuDir = 1, cpuEntry.path, d
	case haveV2:
		info.Version, info.Path, cpuDir = 2, v2Entry.path, v2Dir
	default:
		return found, nil
	}
	info.Dir = cpuDir.dir(root)

	limit, cpus, err := tightestLimit(root, cpuDir, info.Version)
	if err != nil || cpus == 0 {
		return found, err
	}
	info.CPUs, info.LimitDir = cpus, limit.dir(root)
	info.Usage, found.usageFile = usageSource(root, mounts, info.Version, limit, cpuEntry, entries)
	return found, nil
}

// readSelfCgroup reads root/proc/self/cgroup and root/proc/self/mountinfo.
// Missing files mean no cgroups: no entries and no error.
func readSelfCgroup(root string) ([]cgroupEntry, []cgroupMount, error) {
	entries, ok, err := readParsed(filepath.Join(root, "proc/self/cgroup"), parseProcCgroup)
	if !ok || err != nil {
		return nil, nil, err
	}
	mounts, ok, err := readParsed(filepath.Join(root, "proc/self/mountinfo"), parseMountinfo)
	if !ok || err != nil {
		return nil, nil, err
	}
	return entries, mounts, nil
}

// readParsed reads the file name and parses it; a missing file is not ok, and no error.
func readParsed[T any](name string, parse func([]byte) (T, error)) (v T, ok bool, err error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	if v, err = parse(b); err != nil {
		return v, false, fmt.Errorf("read %s: %w", name, err)
	}
	return v, true, nil
}

// setPSI chooses the PSI files: those of the v2 cgroup if it has both and
// they parse, else the system-wide ones.
func setPSI(info *CgroupInfo, root string, d cgroupDir, haveV2 bool) {
	if haveV2 {
		dir := d.dir(root)
		cpu, io := filepath.Join(dir, "cpu.pressure"), filepath.Join(dir, "io.pressure")
		if psiReadable(cpu) && psiReadable(io) {
			info.PSI, info.CPUPressureFile, info.IOPressureFile = PSICgroup, cpu, io
			return
		}
	}
	info.CPUPressureFile = filepath.Join(root, "proc/pressure/cpu")
	info.IOPressureFile = filepath.Join(root, "proc/pressure/io")
	if fileExists(info.CPUPressureFile) || fileExists(info.IOPressureFile) {
		info.PSI = PSISystem
	}
}

func psiReadable(name string) bool {
	b, err := os.ReadFile(name)
	if err != nil {
		return false
	}
	_, err = parsePSI(bytes.NewReader(b))
	return err == nil
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// tightestLimit walks from d up to the top of its mount and returns the
// cgroup with the smallest CPU limit and that limit in CPUs, or 0 CPUs if no
// level has one.
func tightestLimit(root string, d cgroupDir, version int) (cgroupDir, float64, error) {
	var best cgroupDir
	bestCPUs := 0.0
	for {
		cpus, ok, err := readCPULimit(d.dir(root), version)
		if err != nil {
			return cgroupDir{}, 0, err
		}
		if ok && (bestCPUs == 0 || cpus < bestCPUs) {
			best, bestCPUs = d, cpus
		}
		var up bool
		if d, up = d.parent(); !up {
			return best, bestCPUs, nil
		}
	}
}

// readCPULimit returns the CPU limit set on the cgroup in dir, in CPUs, or
// false if it sets none: v2 cpu.max, or v1 cpu.cfs_quota_us and
// cpu.cfs_period_us. A missing file is no limit (the v2 root cgroup has no
// cpu.max, and a cgroup whose parent does not enable the cpu controller
// has none either).
func readCPULimit(dir string, version int) (float64, bool, error) {
	if version == 2 {
		name := filepath.Join(dir, "cpu.max")
		b, ok, err := readIfExists(name)
		if !ok {
			return 0, false, err
		}
		cpus, ok, err := parseCPUMax(b)
		if err != nil {
			return 0, false, fmt.Errorf("read %s: %w", name, err)
		}
		return cpus, ok, nil
	}
	qname := filepath.Join(dir, "cpu.cfs_quota_us")
	q, ok, err := readIfExists(qname)
	if !ok {
		return 0, false, err
	}
	quota, err := strconv.ParseInt(strings.TrimSpace(string(q)), 10, 64)
	if err != nil || quota == 0 {
		return 0, false, fmt.Errorf("read %s: %w value %q", qname, errMalformed, bytes.TrimSpace(q))
	}
	if quota < 0 { // -1: no limit
		return 0, false, nil
	}
	pname := filepath.Join(dir, "cpu.cfs_period_us")
	p, err := os.ReadFile(pname)
	if err != nil {
		return 0, false, err
	}
	period, err := strconv.ParseInt(strings.TrimSpace(string(p)), 10, 64)
	if err != nil || period <= 0 {
		return 0, false, fmt.Errorf("read %s: %w value %q", pname, errMalformed, bytes.TrimSpace(p))
	}
	return float64(quota) / float64(period), true, nil
}

// readIfExists reads the file name, and reports whether it was there: a missing file is
// no error.
func readIfExists(name string) ([]byte, bool, error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

// readBandwidthSlice returns the slice of quota each CPU takes at a time
// (sched_cfs_bandwidth_slice_us, 5 ms by default): a cgroup is throttled once
// the quota left is handed out, although each CPU may leave part of its slice
// unused.
func readBandwidthSlice(root string) time.Duration {
	b, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/sched_cfs_bandwidth_slice_us"))
	if err == nil {
		if us, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && us > 0 {
			return time.Duration(us) * time.Microsecond
		}
	}
	return 5 * time.Millisecond
}

// floor returns the least CPU use, as a fraction of the budget, that a share
// throttled of throttled periods proves: in each, the cgroup used its quota
// but for what the CPUs' slices may have left unused.
func (m *cgroupMeter) floor(throttled float64) float64 {
	if m.period <= 0 || !(m.cpus > 0) {
		return 0
	}
	quota := m.cpus * float64(m.period)
	return throttled * max(0, 1-float64(m.slack)/quota)
}

// readCPUPeriod returns the scheduler period of the CPU quota set on the
// cgroup in dir (v2 cpu.max, or v1 cpu.cfs_period_us), or 0.
func readCPUPeriod(dir string) time.Duration {
	if b, err := os.ReadFile(filepath.Join(dir, "cpu.max")); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if us, err := strconv.ParseInt(f[1], 10, 64); err == nil && us > 0 {
				return time.Duration(us) * time.Microsecond
			}
		}
		return 0
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return 0
	}
	us, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || us <= 0 {
		return 0
	}
	return time.Duration(us) * time.Microsecond
}

// parseCPUMax parses a cgroup v2 cpu.max, "$QUOTA $PERIOD" in microseconds
// such as "50000 100000", or "max 100000" for no limit.
func parseCPUMax(b []byte) (float64, bool, error) {
	f := strings.Fields(string(b))
	if len(f) >= 1 && len(f) <= 2 && f[0] == "max" {
		return 0, false, nil
	}
	if len(f) != 2 {
		return 0, false, fmt.Errorf("%w value %q", errMalformed, bytes.TrimSpace(b))
	}
	quota, err1 := strconv.ParseInt(f[0], 10, 64)
	period, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || quota <= 0 || period <= 0 {
		return 0, false, fmt.Errorf("%w value %q", errMalformed, bytes.TrimSpace(b))
	}
	return float64(quota) / float64(period), true, nil
}

// usageSource returns where the CPU use of the limiting cgroup comes from,
// and the file to read for UsageCPUStat and UsageCPUAcct. Each candidate is
// read once here, and the next is tried if it does not parse.
func usageSource(root string, mounts []cgroupMount, version int, limit cgroupDir, cpuEntry *cgroupEntry, entries []cgroupEntry) (string, string) {
	dir := limit.dir(root)
	if version == 2 {
		name := filepath.Join(dir, "cpu.stat")
		if st, err := readCPUStat(name); err == nil && st.hasUsage {
			return UsageCPUStat, name
		}
		return UsageProcs, ""
	}
	var acct string
	if cpuEntry.has("cpuacct") {
		acct = filepath.Join(dir, "cpuacct.usage") // co-mounted: one hierarchy
	} else {
		for _, e := range entries {
			if e.v2 || !e.has("cpuacct") || e.path != cpuEntry.path {
				continue
			}
			// The same path in both hierarchies: the same group, and
			// the limiting ancestor has the same path in both too.
			if d, ok := findCgroupDir(root, mounts, limit.m.cgPath(limit.rel), false, "cpuacct"); ok {
				acct = filepath.Join(d.dir(root), "cpuacct.usage")
			}
		}
	}
	if acct != "" {
		if _, err := readCPUAcct(acct); err == nil {
			return UsageCPUAcct, acct
		}
	}
	return UsageProcs, ""
}

// cpuStat is what prsync reads of a cgroup's cpu.stat.
type cpuStat struct {
	usage               time.Duration // v2 usage_usec
	periods, throttled  uint64        // nr_periods, nr_throttled
	hasUsage, hasPeriod bool
}

func readCPUStat(name string) (cpuStat, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return cpuStat{}, err
	}
	st, err := parseCPUStat(b)
	if err != nil {
		return cpuStat{}, fmt.Errorf("read %s: %w", name, err)
	}
	return st, nil
}

// parseCPUStat parses cpu.stat, lines of "key value": usage_usec (v2 only),
// nr_periods and nr_throttled (v1, and v2 with the cpu controller enabled).
// Other keys are ignored.
func parseCPUStat(b []byte) (cpuStat, error) {
	var st cpuStat
	var periods, throttled bool
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		if k != "usage_usec" && k != "nr_periods" && k != "nr_throttled" {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return cpuStat{}, fmt.Errorf("%w %s %q", errMalformed, k, v)
		}
		switch k {
		case "usage_usec":
			st.usage, st.hasUsage = time.Duration(min(n, math.MaxInt64/1000))*time.Microsecond, true
		case "nr_periods":
			st.periods, periods = n, true
		case "nr_throttled":
			st.throttled, throttled = n, true
		}
	}
	if st.hasPeriod = periods && throttled; !st.hasPeriod {
		st.periods, st.throttled = 0, 0
	}
	return st, nil
}

// readCPUAcct reads a cgroup v1 cpuacct.usage, the cgroup's CPU time in
// nanoseconds.
func readCPUAcct(name string) (time.Duration, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n > math.MaxInt64 {
		return 0, fmt.Errorf("read %s: %w value %q", name, errMalformed, bytes.TrimSpace(b))
	}
	return time.Duration(n), nil
}

// parseTaskStat parses a /proc/PID/stat line and returns utime+stime
// (fields 14 and 15) and starttime (field 22), in clock ticks. It parses
// after the last ')' because comm (field 2) may contain spaces and
// parentheses.
func parseTaskStat(b []byte) (ticks, start uint64, pgrp int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	// fields[k] is field k+3: state, ppid, pgrp, ...
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 20 {
		return 0, 0, 0, false
	}
	utime, err1 := strconv.ParseUint(string(fields[11]), 10, 64)
	stime, err2 := strconv.ParseUint(string(fields[12]), 10, 64)
	start, err3 := strconv.ParseUint(string(fields[19]), 10, 64)
	pgrp, err4 := strconv.Atoi(string(fields[2]))
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return 0, 0, 0, false
	}
	return utime + stime, start, pgrp, true
}

// parseProcs parses a cgroup.procs file, one PID a line.
func parseProcs(b []byte) ([]int, error) {
	var pids []int
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		pid, err := strconv.Atoi(s)
		if err != nil || pid < 0 {
			return nil, fmt.Errorf("%w pid %q", errMalformed, s)
		}
		if pid > 0 { // 0: a process outside this PID namespace
			pids = append(pids, pid)
		}
	}
	return pids, sc.Err()
}

// taskID tells a process from a later one with the same PID.
type taskID struct {
	pid   int
	start uint64 // starttime of /proc/PID/stat
}

// cgroupMeter measures the CPU use of the limiting cgroup of a CgroupInfo
// as a share of its budget. It is not safe for concurrent use.
type cgroupMeter struct {
	cpus      float64       // the budget
	usage     string        // UsageCPUStat, UsageCPUAcct or UsageProcs
	usageFile string        // cpu.stat or cpuacct.usage, unless UsageProcs
	statFile  string        // cpu.stat of the limiting cgroup, for throttling
	limitDir  string        // for UsageProcs: the cgroup whose tasks are summed
	procDir   string        // for UsageProcs: /proc
	hz        float64       // for UsageProcs: clock ticks per second of /proc/PID/stat
	period    time.Duration // the quota's scheduler period; 0 if unknown
	slack     time.Duration // quota a period can leave unused although throttled

	// UsageProcs state: the CPU ticks of each task at the last reading,
	// nil before the first, and the growth counted so far.
	tasks    map[taskID]uint64
	upTicks  uint64 // uptime at the last reading, in ticks; 0 if unknown
	procsCPU uint64
	// skip, if set, leaves out prsync's own tasks (by pid and process group): their
	// short-lived rsyncs end between readings and would be lost; the sampler adds
	// prsync's own CPU, reaped children included, instead.
	skip func(pid, pgrp int) bool

	ok   bool // the fields below hold a previous reading
	at   time.Time
	last time.Duration
	stat cpuStat
}

// newCgroupMeter returns a meter for what detectCgroup found under root, or
// nil if there is no CPU limit. hz is the unit of /proc/PID/stat times.
func newCgroupMeter(found cgroupFound, root string, hz uint64) *cgroupMeter {
	info := found.CgroupInfo
	if !(info.CPUs > 0) || info.LimitDir == "" {
		return nil
	}
	m := &cgroupMeter{
		cpus:      info.CPUs,
		usage:     info.Usage,
		usageFile: found.usageFile,
		statFile:  filepath.Join(info.LimitDir, "cpu.stat"),
		limitDir:  info.LimitDir,
		procDir:   filepath.Join(root, "proc"),
		hz:        float64(max(hz, 1)),
		period:    readCPUPeriod(info.LimitDir),
		slack:     time.Duration(runtime.NumCPU()) * readBandwidthSlice(root),
	}
	if m.usageFile == "" {
		m.usage = UsageProcs
	}
	return m
}

// sample reads the cgroup's counters at now and returns its CPU use since
// the previous reading in percent of the budget, clamped to [0, 100], and
// the fraction of periods throttled. It returns false on the first reading
// and when no time has passed.
func (m *cgroupMeter) sample(now time.Time) (pct, throttled float64, ok bool, err error) {
	used, st, err := m.read()
	if err != nil {
		return 0, 0, false, err
	}
	prevAt, prevUsed, prevStat, had := m.at, m.last, m.stat, m.ok
	m.at, m.last, m.stat, m.ok = now, used, st, true
	dt := now.Sub(prevAt)
	if !had || dt <= 0 {
		return 0, 0, false, nil
	}
	// A counter that goes down (tasks that left with their time, for
	// UsageProcs, or a cgroup recreated) counts as no use.
	pct = max(0, float64(used-prevUsed)/(float64(dt)*m.cpus)*100)
	pct = min(pct, 100)
	if st.hasPeriod && prevStat.hasPeriod && st.periods > prevStat.periods && st.throttled >= prevStat.throttled {
		n := float64(st.throttled - prevStat.throttled)
		if m.period > 0 {
			// of the periods that passed, not of those the cgroup ran in: a cgroup
			// that ran out of quota in every period it ran in, and ran in half of
			// them, used half its budget
			throttled = min(1, n*float64(m.period)/float64(dt))
		} else {
			throttled = min(1, n/float64(st.periods-prevStat.periods))
		}
	}
	return pct, throttled, true, nil
}

// read returns the cumulative CPU time of the cgroup and its cpu.stat.
func (m *cgroupMeter) read() (time.Duration, cpuStat, error) {
	st, err := readCPUStat(m.statFile)
	if errors.Is(err, fs.ErrNotExist) && m.usage != UsageCPUStat {
		st, err = cpuStat{}, nil // no throttling figures
	}
	if err != nil {
		return 0, cpuStat{}, err
	}
	switch m.usage {
	case UsageCPUStat:
		if !st.hasUsage {
			return 0, cpuStat{}, fmt.Errorf("read %s: no usage_usec", m.statFile)
		}
		return st.usage, st, nil
	case UsageCPUAcct:
		d, err := readCPUAcct(m.usageFile)
		return d, st, err
	}
	ticks, err := m.readProcs()
	if err != nil {
		return 0, cpuStat{}, err
	}
	return time.Duration(float64(ticks) / m.hz * float64(time.Second)), st, nil
}

// readProcs returns the CPU ticks (utime+stime) the tasks of the limiting
// cgroup and its descendants have used since the first reading.
//
// It adds, for each task, its growth since the last reading; a task not
// seen before counts with its whole time if it started since then (it was
// forked in the cgroup) and from now on otherwise (it moved in with time
// spent elsewhere). A task that ends or leaves loses what it used since the
// last reading: its time is no longer listed, and it does not take back
// what was counted before.
func (m *cgroupMeter) readProcs() (uint64, error) {
	var pids []int
	err := filepath.WalkDir(m.limitDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == m.limitDir {
				return err
			}
			return fs.SkipDir // a child cgroup removed meanwhile
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			if p == m.limitDir {
				return err
			}
			return nil
		}
		ps, err := parseProcs(b)
		if err != nil {
			return fmt.Errorf("read %s: %w", filepath.Join(p, "cgroup.procs"), err)
		}
		pids = append(pids, ps...)
		return nil
	})
	if err != nil {
		return 0, err
	}
	up := m.uptimeTicks()
	first := m.tasks == nil
	tasks := make(map[taskID]uint64, len(pids))
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join(m.procDir, strconv.Itoa(pid), "stat"))
		if err != nil {
			continue // ended meanwhile
		}
		ticks, start, pgrp, ok := parseTaskStat(b)
		if !ok || (m.skip != nil && m.skip(pid, pgrp)) {
			continue // prsync's own: measured apart, with the children it reaped
		}
		id := taskID{pid, start}
		tasks[id] = ticks
		prev, seen := m.tasks[id]
		switch {
		case first:
		case seen:
			if ticks > prev {
				m.procsCPU += ticks - prev
			}
		case m.upTicks == 0 || start+2 >= m.upTicks:
			// Started since the last reading (give or take the
			// two ticks of rounding of /proc/uptime), or unknown.
			m.procsCPU += ticks
		}
	}
	m.tasks, m.upTicks = tasks, up
	return m.procsCPU, nil
}

// uptimeTicks returns the time since boot from /proc/uptime in clock ticks,
// the clock of starttime in /proc/PID/stat, or 0 if it cannot be read.
func (m *cgroupMeter) uptimeTicks() uint64 {
	b, err := os.ReadFile(filepath.Join(m.procDir, "uptime"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	secs, err := strconv.ParseFloat(f[0], 64)
	if err != nil || !(secs > 0) {
		return 0
	}
	return uint64(secs * m.hz)
}
