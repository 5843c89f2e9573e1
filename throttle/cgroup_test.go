package throttle

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prsync/prsync/internal/cmdline"
)

// tree writes files (path relative to the root: content) under a new
// temporary root and returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, files)
	return root
}

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Mountinfo lines.
const (
	miRoot    = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n22 27 0:21 / /proc rw,relatime - proc proc rw\n"
	miV2      = "30 27 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
	miCPU     = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	miCPUAcct = "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
	miCoMount = "34 31 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid master:3 - cgroup cgroup rw,cpu,cpuacct\n"
	miMemory  = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	miUnified = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	psiLine   = "some avg10=1.50 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
	statV2    = "usage_usec 1000\nuser_usec 600\nsystem_usec 400\nnr_periods 10\nnr_throttled 2\nthrottled_usec 5\n"
	statV1    = "nr_periods 10\nnr_throttled 2\nthrottled_time 5\n"
)

func TestDetectCgroup(t *testing.T) {
	v2 := "sys/fs/cgroup/"
	tests := []struct {
		name    string
		files   map[string]string
		want    CgroupInfo // paths relative to the root; LimitDir and Dir joined to it
		wantErr string     // a substring of the error
	}{
		{
			name: "v2 with a limit",
			files: map[string]string{
				"proc/self/cgroup":                    "0::/kubepods/pod1/ctr\n",
				"proc/self/mountinfo":                 miRoot + miV2,
				v2 + "kubepods/pod1/ctr/cpu.max":      "50000 100000\n",
				v2 + "kubepods/pod1/ctr/cpu.stat":     statV2,
				v2 + "kubepods/pod1/ctr/cpu.pressure": psiLine,
				v2 + "kubepods/pod1/ctr/io.pressure":  psiLine,
				v2 + "kubepods/pod1/cpu.max":          "max 100000\n",
				v2 + "kubepods/cpu.max":               "max 100000\n",
				"proc/pressure/cpu":                   psiLine,
			},
			want: CgroupInfo{Version: 2, Path: "/kubepods/pod1/ctr", Dir: v2 + "kubepods/pod1/ctr", CPUs: 0.5,
				LimitDir: v2 + "kubepods/pod1/ctr", Usage: UsageCPUStat, PSI: PSICgroup,
				CPUPressureFile: v2 + "kubepods/pod1/ctr/cpu.pressure", IOPressureFile: v2 + "kubepods/pod1/ctr/io.pressure"},
		},
		{
			name: "v2 max everywhere is no limit",
			files: map[string]string{
				"proc/self/cgroup":                        "0::/user.slice/session-1.scope\n",
				"proc/self/mountinfo":                     miRoot + miV2,
				v2 + "user.slice/session-1.scope/cpu.max": "max 100000\n",
				v2 + "user.slice/cpu.max":                 "max\n",
				"proc/pressure/cpu":                       psiLine,
				"proc/pressure/io":                        psiLine,
			},
			want: CgroupInfo{Version: 2, Path: "/user.slice/session-1.scope", Dir: v2 + "user.slice/session-1.scope",
				PSI: PSISystem, CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name: "v2 nested: the parent is tighter",
			files: map[string]string{
				"proc/self/cgroup":               "0::/kubepods/pod1/ctr\n",
				"proc/self/mountinfo":            miRoot + miV2,
				v2 + "kubepods/pod1/ctr/cpu.max": "200000 100000\n",
				v2 + "kubepods/pod1/cpu.max":     "150000 100000\n",
				v2 + "kubepods/pod1/cpu.stat":    statV2,
				v2 + "kubepods/cpu.max":          "400000 100000\n",
				v2 + "cpu.stat":                  statV2, // the root has no cpu.max
			},
			want: CgroupInfo{Version: 2, Path: "/kubepods/pod1/ctr", Dir: v2 + "kubepods/pod1/ctr", CPUs: 1.5,
				LimitDir: v2 + "kubepods/pod1", Usage: UsageCPUStat,
				CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name: "v2 nested: the child is tighter, the parent has no cpu.max",
			files: map[string]string{
				"proc/self/cgroup":    "0::/a/b\n",
				"proc/self/mountinfo": miRoot + miV2,
				v2 + "a/b/cpu.max":    "25000 50000\n",
				v2 + "a/b/cpu.stat":   "usage_usec 5\n",
				v2 + "a/cpu.stat":     statV2,
			},
			want: CgroupInfo{Version: 2, Path: "/a/b", Dir: v2 + "a/b", CPUs: 0.5, LimitDir: v2 + "a/b", Usage: UsageCPUStat,
				CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			// In a cgroup namespace the top of the mount is the
			// container's own cgroup, which has a cpu.max.
			name: "v2 cgroup namespace: the limit is at the top of the mount",
			files: map[string]string{
				"proc/self/cgroup":    "0::/\n",
				"proc/self/mountinfo": miRoot + miV2,
				v2 + "cpu.max":        "10000 100000\n",
				v2 + "cpu.stat":       statV2,
				v2 + "cpu.pressure":   psiLine,
				v2 + "io.pressure":    psiLine,
			},
			want: CgroupInfo{Version: 2, Path: "/", Dir: v2, CPUs: 0.1, LimitDir: v2, Usage: UsageCPUStat, PSI: PSICgroup,
				CPUPressureFile: v2 + "cpu.pressure", IOPressureFile: v2 + "io.pressure"},
		},
		{
			name: "v2 without usage_usec falls back to procs",
			files: map[string]string{
				"proc/self/cgroup":    "0::/a\n",
				"proc/self/mountinfo": miRoot + miV2,
				v2 + "a/cpu.max":      "100000 100000\n",
				v2 + "a/cpu.stat":     "nr_periods 1\n",
			},
			want: CgroupInfo{Version: 2, Path: "/a", Dir: v2 + "a", CPUs: 1, LimitDir: v2 + "a", Usage: UsageProcs,
				CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name: "v1 co-mounted cpu,cpuacct",
			files: map[string]string{
				"proc/self/cgroup":                              "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n",
				"proc/self/mountinfo":                           miRoot + miMemory + miCoMount,
				v2 + "cpu,cpuacct/docker/abc/cpu.cfs_quota_us":  "25000\n",
				v2 + "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
				v2 + "cpu,cpuacct/docker/abc/cpuacct.usage":     "123456789\n",
				v2 + "cpu,cpuacct/docker/cpu.cfs_quota_us":      "-1\n",
				v2 + "cpu,cpuacct/docker/cpu.cfs_period_us":     "100000\n",
				v2 + "cpu,cpuacct/cpu.cfs_quota_us":             "-1\n",
			},
			want: CgroupInfo{Version: 1, Path: "/docker/abc", Dir: v2 + "cpu,cpuacct/docker/abc", CPUs: 0.25,
				LimitDir: v2 + "cpu,cpuacct/docker/abc", Usage: UsageCPUAcct,
				CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name: "v1 separate mounts, the same path",
			files: map[string]string{
				"proc/self/cgroup":               "3:cpuacct:/grp\n2:cpu:/grp\n",
				"proc/self/mountinfo":            miRoot + miCPU + miCPUAcct,
				v2 + "cpu/grp/cpu.cfs_quota_us":  "300000\n",
				v2 + "cpu/grp/cpu.cfs_period_us": "200000\n",
				v2 + "cpuacct/grp/cpuacct.usage": "42\n",
				v2 + "cpu/cpu.cfs_quota_us":      "-1\n",
				v2 + "cpu/cpu.cfs_period_us":     "100000\n",
			},
			want: CgroupInfo{Version: 1, Path: "/grp", Dir: v2 + "cpu/grp", CPUs: 1.5, LimitDir: v2 + "cpu/grp", Usage: UsageCPUAcct,
				CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name: "v1 separate mounts, the process moved in the cpu hierarchy only, hybrid v2 beside",
			files: map[string]string{
				"proc/self/cgroup":                       "9:name=systemd:/\n3:cpuacct:/\n2:cpu:/prsync-test\n0::/\n",
				"proc/self/mountinfo":                    miRoot + miCPU + miCPUAcct + miUnified,
				v2 + "cpu/prsync-test/cpu.cfs_quota_us":  "50000\n",
				v2 + "cpu/prsync-test/cpu.cfs_period_us": "100000\n",
				v2 + "cpu/prsync-test/cpu.stat":          statV1,
				v2 + "cpu/prsync-test/cgroup.procs":      "1\n",
				v2 + "cpuacct/cpuacct.usage":             "42\n",
				v2 + "unified/cpu.pressure":              psiLine,
				v2 + "unified/io.pressure":               psiLine,
			},
			want: CgroupInfo{Version: 1, Path: "/prsync-test", Dir: v2 + "cpu/prsync-test", CPUs: 0.5,
				LimitDir: v2 + "cpu/prsync-test", Usage: UsageProcs, PSI: PSICgroup,
				CPUPressureFile: v2 + "unified/cpu.pressure", IOPressureFile: v2 + "unified/io.pressure"},
		},
		{
			name: "v1 cpuacct.usage malformed falls back to procs",
			files: map[string]string{
				"proc/self/cgroup":                     "4:cpu,cpuacct:/g\n",
				"proc/self/mountinfo":                  miRoot + miCoMount,
				v2 + "cpu,cpuacct/g/cpu.cfs_quota_us":  "100000\n",
				v2 + "cpu,cpuacct/g/cpu.cfs_period_us": "100000\n",
				v2 + "cpu,cpuacct/g/cpuacct.usage":     "lots\n",
			},
			want: CgroupInfo{Version: 1, Path: "/g", Dir: v2 + "cpu,cpuacct/g", CPUs: 1, LimitDir: v2 + "cpu,cpuacct/g", Usage: UsageProcs,
				CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name: "v1 container: the mount root is the container's cgroup",
			files: map[string]string{
				"proc/self/cgroup": "4:cpu,cpuacct:/kubepods/burstable/pod1/ctr\n",
				"proc/self/mountinfo": miRoot +
					"34 31 0:31 /kubepods/burstable/pod1/ctr /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n",
				v2 + "cpu,cpuacct/cpu.cfs_quota_us":  "75000\n",
				v2 + "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
				v2 + "cpu,cpuacct/cpuacct.usage":     "1\n",
			},
			want: CgroupInfo{Version: 1, Path: "/kubepods/burstable/pod1/ctr", Dir: v2 + "cpu,cpuacct", CPUs: 0.75,
				LimitDir: v2 + "cpu,cpuacct", Usage: UsageCPUAcct,
				CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name: "v2 container: a non-/ root with a nested cgroup below it",
			files: map[string]string{
				"proc/self/cgroup":    "0::/kubepods/pod1/ctr/init\n",
				"proc/self/mountinfo": miRoot + "30 27 0:26 /kubepods/pod1/ctr /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n",
				v2 + "init/cpu.max":   "max 100000\n",
				v2 + "cpu.max":        "200000 100000\n",
				v2 + "cpu.stat":       statV2,
			},
			want: CgroupInfo{Version: 2, Path: "/kubepods/pod1/ctr/init", Dir: v2 + "init", CPUs: 2, LimitDir: v2, Usage: UsageCPUStat,
				CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name: "a mount point with an escaped space",
			files: map[string]string{
				"proc/self/cgroup":    "0::/g\n",
				"proc/self/mountinfo": miRoot + `30 27 0:26 / /cg\040fs rw - cgroup2 none rw` + "\n",
				"cg fs/g/cpu.max":     "50000 100000\n",
				"cg fs/g/cpu.stat":    statV2,
			},
			want: CgroupInfo{Version: 2, Path: "/g", Dir: "cg fs/g", CPUs: 0.5, LimitDir: "cg fs/g", Usage: UsageCPUStat,
				CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name: "the cgroup is outside the mount's root",
			files: map[string]string{
				"proc/self/cgroup":    "0::/other\n",
				"proc/self/mountinfo": miRoot + "30 27 0:26 /mine /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
				"proc/pressure/io":    psiLine,
			},
			want: CgroupInfo{PSI: PSISystem, CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name: "the cgroup is outside the cgroup namespace",
			files: map[string]string{
				"proc/self/cgroup":    "0::/../../init\n",
				"proc/self/mountinfo": miRoot + miV2,
			},
			want: CgroupInfo{CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name: "v1 cpu hierarchy not mounted: no v2 fallback",
			files: map[string]string{
				"proc/self/cgroup":       "2:cpu:/g\n0::/g\n",
				"proc/self/mountinfo":    miRoot + miUnified,
				v2 + "unified/g/cpu.max": "50000 100000\n",
			},
			want: CgroupInfo{CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name: "v1 no limit",
			files: map[string]string{
				"proc/self/cgroup":             "2:cpu:/g\n",
				"proc/self/mountinfo":          miRoot + miCPU,
				v2 + "cpu/g/cpu.cfs_quota_us":  "-1\n",
				v2 + "cpu/g/cpu.cfs_period_us": "100000\n",
				v2 + "cpu/cpu.cfs_quota_us":    "-1\n",
			},
			want: CgroupInfo{Version: 1, Path: "/g", Dir: v2 + "cpu/g", CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name:  "no cgroups at all",
			files: map[string]string{"proc/pressure/cpu": psiLine},
			want:  CgroupInfo{PSI: PSISystem, CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name: "a cgroup pressure file that does not parse: system PSI",
			files: map[string]string{
				"proc/self/cgroup":    "0::/g\n",
				"proc/self/mountinfo": miRoot + miV2,
				v2 + "g/cpu.pressure": "garbage\n",
				v2 + "g/io.pressure":  psiLine,
				"proc/pressure/io":    psiLine,
			},
			want: CgroupInfo{Version: 2, Path: "/g", Dir: v2 + "g", PSI: PSISystem,
				CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
		},
		{
			name:    "malformed /proc/self/cgroup",
			files:   map[string]string{"proc/self/cgroup": "0:/g\n", "proc/self/mountinfo": miRoot + miV2},
			want:    CgroupInfo{CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
			wantErr: `proc/self/cgroup: malformed line "0:/g"`,
		},
		{
			name:    "malformed mountinfo",
			files:   map[string]string{"proc/self/cgroup": "0::/g\n", "proc/self/mountinfo": "27 1 254:0 / / rw ext4\n"},
			want:    CgroupInfo{CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
			wantErr: `proc/self/mountinfo: malformed line`,
		},
		{
			name: "malformed cpu.max",
			files: map[string]string{
				"proc/self/cgroup":    "0::/g\n",
				"proc/self/mountinfo": miRoot + miV2,
				v2 + "g/cpu.max":      "half 100000\n",
			},
			want:    CgroupInfo{Version: 2, Path: "/g", Dir: v2 + "g", CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
			wantErr: `g/cpu.max: malformed value "half 100000"`,
		},
		{
			name: "malformed v1 quota",
			files: map[string]string{
				"proc/self/cgroup":            "2:cpu:/g\n",
				"proc/self/mountinfo":         miRoot + miCPU,
				v2 + "cpu/g/cpu.cfs_quota_us": "x\n",
			},
			want:    CgroupInfo{Version: 1, Path: "/g", Dir: v2 + "cpu/g", CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
			wantErr: `cpu.cfs_quota_us: malformed value "x"`,
		},
		{
			name: "v1 period 0",
			files: map[string]string{
				"proc/self/cgroup":             "2:cpu:/g\n",
				"proc/self/mountinfo":          miRoot + miCPU,
				v2 + "cpu/g/cpu.cfs_quota_us":  "50000\n",
				v2 + "cpu/g/cpu.cfs_period_us": "0\n",
			},
			want:    CgroupInfo{Version: 1, Path: "/g", Dir: v2 + "cpu/g", CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
			wantErr: `cpu.cfs_period_us: malformed value "0"`,
		},
		{
			name: "v1 quota without a period file",
			files: map[string]string{
				"proc/self/cgroup":            "2:cpu:/g\n",
				"proc/self/mountinfo":         miRoot + miCPU,
				v2 + "cpu/g/cpu.cfs_quota_us": "50000\n",
			},
			want:    CgroupInfo{Version: 1, Path: "/g", Dir: v2 + "cpu/g", CPUPressureFile: "proc/pressure/cpu", IOPressureFile: "proc/pressure/io"},
			wantErr: `cpu.cfs_period_us: no such file`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := tree(t, tt.files)
			got, err := detectCgroup(root)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one with %q", err, tt.wantErr)
			}
			want := tt.want
			for _, p := range []*string{&want.Dir, &want.LimitDir, &want.CPUPressureFile, &want.IOPressureFile} {
				if *p != "" {
					*p = filepath.Join(root, *p)
				}
			}
			if got.CgroupInfo != want {
				t.Errorf("detectCgroup() =\n%+v\nwant\n%+v", got.CgroupInfo, want)
			}
			if (got.usageFile != "") != (want.Usage == UsageCPUStat || want.Usage == UsageCPUAcct) {
				t.Errorf("usage file %q for usage %q", got.usageFile, want.Usage)
			}
		})
	}
}

// TestDetectCgroupCPUAcctFile checks which cpuacct.usage the v1 cases read.
func TestDetectCgroupCPUAcctFile(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/self/cgroup":                        "3:cpuacct:/a/b\n2:cpu:/a/b\n",
		"proc/self/mountinfo":                     miRoot + miCPU + miCPUAcct,
		"sys/fs/cgroup/cpu/a/b/cpu.cfs_quota_us":  "-1\n",
		"sys/fs/cgroup/cpu/a/cpu.cfs_quota_us":    "50000\n",
		"sys/fs/cgroup/cpu/a/cpu.cfs_period_us":   "100000\n",
		"sys/fs/cgroup/cpuacct/a/b/cpuacct.usage": "1\n",
		"sys/fs/cgroup/cpuacct/a/cpuacct.usage":   "2\n",
	})
	got, err := detectCgroup(root)
	if err != nil {
		t.Fatal(err)
	}
	// The limit is on /a, so its use is that of /a in cpuacct.
	if want := filepath.Join(root, "sys/fs/cgroup/cpuacct/a/cpuacct.usage"); got.usageFile != want || got.Usage != UsageCPUAcct {
		t.Errorf("usage %s from %q, want %s from %q", got.Usage, got.usageFile, UsageCPUAcct, want)
	}
}

func TestParseProcCgroup(t *testing.T) {
	got, err := parseProcCgroup([]byte("12:cpu,cpuacct:/a b\n1:name=systemd:/\n0::/x:y\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []cgroupEntry{
		{controllers: []string{"cpu", "cpuacct"}, path: "/a b"},
		{controllers: []string{"name=systemd"}, path: "/"},
		{v2: true, path: "/x:y"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i].v2 != want[i].v2 || got[i].path != want[i].path || !slices.Equal(got[i].controllers, want[i].controllers) {
			t.Errorf("line %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"cpu:/", "x:cpu:/", "1:cpu:relative", "1:cpu"} {
		if _, err := parseProcCgroup([]byte(bad)); !errors.Is(err, errMalformed) {
			t.Errorf("parseProcCgroup(%q) error = %v, want malformed", bad, err)
		}
	}
}

func TestParseMountinfo(t *testing.T) {
	in := miRoot + miCoMount + miV2 +
		"50 27 0:40 /a\\134b /mnt/x\\011y rw shared:1 master:2 - cgroup cgroup rw,cpu\n"
	got, err := parseMountinfo([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d cgroup mounts, want 3: %+v", len(got), got)
	}
	if m := got[0]; m.v2 || m.point != "/sys/fs/cgroup/cpu,cpuacct" || m.root != "/" || !slices.Equal(m.opts, []string{"rw", "cpu", "cpuacct"}) {
		t.Errorf("co-mount = %+v", m)
	}
	if m := got[1]; !m.v2 || m.point != "/sys/fs/cgroup" {
		t.Errorf("v2 mount = %+v", m)
	}
	if m := got[2]; m.root != `/a\b` || m.point != "/mnt/x\ty" {
		t.Errorf("escaped mount = %+v", m)
	}
}

func TestMountRel(t *testing.T) {
	tests := []struct {
		root, cg, want string
		ok             bool
	}{
		{"/", "/", "/", true},
		{"/", "/a/b", "/a/b", true},
		{"/a", "/a", "/", true},
		{"/a", "/a/b", "/b", true},
		{"/a", "/ab", "", false},
		{"/a/b", "/a", "", false},
		{"/", "/..", "", false},
		{"/", "/../x", "", false},
		{"/", "/a/", "/a", true},
		{"/a", "/a/", "/", true},
		{"/../..", "/../../init", "/init", true},
		{"/..", "/../../init", "", false},
	}
	for _, tt := range tests {
		got, ok := cgroupMount{root: tt.root}.rel(tt.cg)
		if got != tt.want || ok != tt.ok {
			t.Errorf("mount root %q: rel(%q) = %q, %v; want %q, %v", tt.root, tt.cg, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseCPUMax(t *testing.T) {
	tests := []struct {
		in      string
		cpus    float64
		ok, err bool
	}{
		{"50000 100000\n", 0.5, true, false},
		{"150000 100000", 1.5, true, false},
		{"max 100000\n", 0, false, false},
		{"max", 0, false, false},
		{"", 0, false, true},
		{"50000\n", 0, false, true},
		{"0 100000", 0, false, true},
		{"50000 0", 0, false, true},
		{"-1 100000", 0, false, true},
		{"1 2 3", 0, false, true},
	}
	for _, tt := range tests {
		cpus, ok, err := parseCPUMax([]byte(tt.in))
		if cpus != tt.cpus || ok != tt.ok || (err != nil) != tt.err {
			t.Errorf("parseCPUMax(%q) = %v, %v, %v", tt.in, cpus, ok, err)
		}
	}
}

func TestParseCPUStat(t *testing.T) {
	st, err := parseCPUStat([]byte(statV2))
	if err != nil {
		t.Fatal(err)
	}
	if want := (cpuStat{usage: time.Millisecond, periods: 10, throttled: 2, hasUsage: true, hasPeriod: true}); st != want {
		t.Errorf("v2: %+v, want %+v", st, want)
	}
	st, err = parseCPUStat([]byte(statV1))
	if err != nil {
		t.Fatal(err)
	}
	if want := (cpuStat{periods: 10, throttled: 2, hasPeriod: true}); st != want {
		t.Errorf("v1: %+v, want %+v", st, want)
	}
	st, err = parseCPUStat([]byte("usage_usec 7\nuser_usec 1\n\nnr_periods 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (cpuStat{usage: 7 * time.Microsecond, hasUsage: true}); st != want {
		t.Errorf("no nr_throttled: %+v, want %+v", st, want)
	}
	for _, bad := range []string{"usage_usec x\n", "nr_periods -1\n", "nr_throttled 1.5\n"} {
		if _, err := parseCPUStat([]byte(bad)); !errors.Is(err, errMalformed) {
			t.Errorf("parseCPUStat(%q) error = %v, want malformed", bad, err)
		}
	}
}

func TestParseTaskStat(t *testing.T) {
	// utime 250, stime 50, cutime 7 and cstime 3 (not counted), starttime 12345.
	tail := " 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 7 3 20 0 1 0 12345 1000 100"
	tests := []struct {
		in           string
		ticks, start uint64
		ok           bool
	}{
		{"4242 (sh) S" + tail, 300, 12345, true},
		{"4243 (a) b (c)) R" + tail, 300, 12345, true},
		{"4244 (sh) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 7 3 20 0 1 0", 0, 0, false},
		{"4245 (sh) S 1 4242 4242 0 -1 4194304 100 0 0 0 x 50 7 3 20 0 1 0 12345", 0, 0, false},
		{"no paren", 0, 0, false},
	}
	for _, tt := range tests {
		ticks, start, pgrp, ok := parseTaskStat([]byte(tt.in))
		if ticks != tt.ticks || start != tt.start || ok != tt.ok || (ok && pgrp == 0) {
			t.Errorf("parseTaskStat(%q) = %d, %d, %v; want %d, %d, %v", tt.in, ticks, start, ok, tt.ticks, tt.start, tt.ok)
		}
	}
}

func TestParseProcs(t *testing.T) {
	got, err := parseProcs([]byte("12\n0\n  34 \n\n"))
	if err != nil || !slices.Equal(got, []int{12, 34}) {
		t.Errorf("parseProcs = %v, %v; want [12 34]", got, err)
	}
	if _, err := parseProcs([]byte("12\nabc\n")); !errors.Is(err, errMalformed) {
		t.Errorf("parseProcs(abc) error = %v, want malformed", err)
	}
}

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:         "/plain",
		`/a\040b`:        "/a b",
		`/a\011\012\134`: "/a\t\n\\",
		`/end\04`:        `/end\04`,
		`/bad\999`:       `/bad\999`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// meterAt makes a meter for a v2 or v1 cgroup with a file source under a
// fake root, after detectCgroup.
func meterAt(t *testing.T, files map[string]string) (*cgroupMeter, string) {
	t.Helper()
	root := tree(t, files)
	found, err := detectCgroup(root)
	if err != nil {
		t.Fatal(err)
	}
	m := newCgroupMeter(found, root, 100)
	if m == nil {
		t.Fatalf("no meter for %+v", found.CgroupInfo)
	}
	return m, root
}

func TestCgroupMeterCPUStat(t *testing.T) {
	m, root := meterAt(t, map[string]string{
		"proc/self/cgroup":         "0::/g\n",
		"proc/self/mountinfo":      miRoot + miV2,
		"sys/fs/cgroup/g/cpu.max":  "50000 100000\n",
		"sys/fs/cgroup/g/cpu.stat": "usage_usec 1000000\nnr_periods 100\nnr_throttled 10\n",
	})
	stat := filepath.Join(root, "sys/fs/cgroup/g/cpu.stat")
	t0 := time.Unix(1000, 0)
	steps := []struct {
		stat          string
		pct, throttle float64
		ok            bool
	}{
		{"usage_usec 1000000\nnr_periods 100\nnr_throttled 10\n", 0, 0, false},   // first reading
		{"usage_usec 1500000\nnr_periods 110\nnr_throttled 20\n", 100, 1, true},  // 0.5 s of 0.5 CPU over 1 s
		{"usage_usec 1625000\nnr_periods 120\nnr_throttled 22\n", 25, 0.2, true}, // 0.125 s
		{"usage_usec 2625000\nnr_periods 120\nnr_throttled 22\n", 100, 0, true},  // 200% clamped; no periods
		{"usage_usec 100\nnr_periods 5\nnr_throttled 1\n", 0, 0, true},           // reset: counters went down
		{"usage_usec 250100\nnr_periods 15\nnr_throttled 1\n", 50, 0, true},
		// ran in 5 of the 10 periods, out of quota in each: half the budget, not all
		{"usage_usec 500100\nnr_periods 20\nnr_throttled 6\n", 50, 0.5, true},
	}
	for i, st := range steps {
		writeTree(t, root, map[string]string{"sys/fs/cgroup/g/cpu.stat": st.stat})
		pct, thr, ok, err := m.sample(t0.Add(time.Duration(i) * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(pct-st.pct) > 1e-9 || math.Abs(thr-st.throttle) > 1e-9 || ok != st.ok {
			t.Errorf("step %d: sample = %v, %v, %v; want %v, %v, %v", i, pct, thr, ok, st.pct, st.throttle, st.ok)
		}
	}
	// The same instant again: no interval.
	if _, _, ok, err := m.sample(t0.Add(6 * time.Second)); ok || err != nil {
		t.Errorf("zero interval: ok %v, error %v", ok, err)
	}
	if err := os.Remove(stat); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := m.sample(t0.Add(7 * time.Second)); err == nil {
		t.Error("no error once cpu.stat is gone")
	}
}

func TestCgroupMeterCPUAcct(t *testing.T) {
	m, root := meterAt(t, map[string]string{
		"proc/self/cgroup":                      "2:cpuacct:/g\n1:cpu:/g\n",
		"proc/self/mountinfo":                   miRoot + miCPU + miCPUAcct,
		"sys/fs/cgroup/cpu/g/cpu.cfs_quota_us":  "200000\n",
		"sys/fs/cgroup/cpu/g/cpu.cfs_period_us": "100000\n",
		"sys/fs/cgroup/cpu/g/cpu.stat":          statV1,
		"sys/fs/cgroup/cpuacct/g/cpuacct.usage": "5000000000\n",
	})
	t0 := time.Unix(1000, 0)
	if _, _, ok, err := m.sample(t0); ok || err != nil {
		t.Fatalf("first sample: ok %v, error %v", ok, err)
	}
	writeTree(t, root, map[string]string{
		"sys/fs/cgroup/cpuacct/g/cpuacct.usage": "6000000000\n", // 1 s of 2 CPUs over 2 s
		"sys/fs/cgroup/cpu/g/cpu.stat":          "nr_periods 30\nnr_throttled 7\nthrottled_time 9\n",
	})
	pct, thr, ok, err := m.sample(t0.Add(2 * time.Second))
	if err != nil || !ok || pct != 25 || thr != 0.25 {
		t.Errorf("sample = %v, %v, %v, %v; want 25, 0.25, true, nil", pct, thr, ok, err)
	}
}

// procStat returns a /proc/PID/stat line with utime+stime ticks split in
// two and the given starttime.
func procStat(pid string, ticks, start int) string {
	u, s := strconv.Itoa(ticks/2), strconv.Itoa(ticks-ticks/2)
	return pid + " (sh) R 1 " + pid + " " + pid + " 0 -1 0 0 0 0 0 " + u + " " + s + " 99 99 20 0 1 0 " + strconv.Itoa(start) + " 1 1\n"
}

func TestCgroupMeterProcs(t *testing.T) {
	g := "sys/fs/cgroup/cpu/g/"
	m, root := meterAt(t, map[string]string{
		"proc/self/cgroup":                    "2:cpuacct:/\n1:cpu:/g\n",
		"proc/self/mountinfo":                 miRoot + miCPU + miCPUAcct,
		g + "cpu.cfs_quota_us":                "50000\n",
		g + "cpu.cfs_period_us":               "100000\n",
		g + "cpu.stat":                        statV1,
		g + "cgroup.procs":                    "10\n11\n",
		g + "sub/cgroup.procs":                "12\n",
		"proc/uptime":                         "1000.00 1900.00\n",
		"proc/10/stat":                        procStat("10", 500, 100),
		"proc/11/stat":                        procStat("11", 40, 200),
		"proc/12/stat":                        procStat("12", 7, 300),
		"sys/fs/cgroup/cpuacct/cpuacct.usage": "1\n",
	})
	if m.usage != UsageProcs {
		t.Fatalf("usage %q, want procs", m.usage)
	}
	t0 := time.Unix(1000, 0)
	// Ticks are 1/100 s, so 50 ticks in 1 s are the whole 0.5-CPU budget.
	steps := []struct {
		files map[string]string
		pct   float64
		ok    bool
	}{
		{nil, 0, false},
		// 10 +20, 11 +10, 12 (in a child cgroup) +5: 35 ticks.
		{map[string]string{"proc/10/stat": procStat("10", 520, 100), "proc/11/stat": procStat("11", 50, 200),
			"proc/12/stat": procStat("12", 12, 300), "proc/uptime": "1001.00 0\n"}, 70, true},
		// 11 ends (its last 10 ticks are lost, nothing is taken back), 13
		// is forked in the cgroup with 15 ticks, 14 moves in with 900
		// ticks used elsewhere: 10 +5, 13 +15, 14 +0.
		{map[string]string{g + "cgroup.procs": "10\n13\n14\n", "proc/10/stat": procStat("10", 525, 100),
			"proc/13/stat": procStat("13", 15, 100150), "proc/14/stat": procStat("14", 900, 500),
			"proc/uptime": "1002.00 0\n"}, 40, true},
		// 14 +10; 13 ends and its PID is reused by a new task with 3 ticks;
		// 12's cgroup is removed.
		{map[string]string{g + "cgroup.procs": "10\n13\n14\n", g + "sub/cgroup.procs": "", "proc/13/stat": procStat("13", 3, 100250),
			"proc/14/stat": procStat("14", 910, 500), "proc/uptime": "1003.00 0\n"}, 26, true},
		// A listed PID whose /proc entry has gone is skipped.
		{map[string]string{g + "cgroup.procs": "10\n99\n", "proc/10/stat": procStat("10", 575, 100),
			"proc/uptime": "1004.00 0\n"}, 100, true},
	}
	for i, st := range steps {
		writeTree(t, root, st.files)
		pct, _, ok, err := m.sample(t0.Add(time.Duration(i) * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(pct-st.pct) > 1e-9 || ok != st.ok {
			t.Errorf("step %d: sample = %v, %v; want %v, %v", i, pct, ok, st.pct, st.ok)
		}
	}
	writeTree(t, root, map[string]string{g + "cgroup.procs": "10\nx\n"})
	if _, _, _, err := m.sample(t0.Add(9 * time.Second)); !errors.Is(err, errMalformed) {
		t.Errorf("malformed cgroup.procs: error %v", err)
	}
	if err := os.RemoveAll(filepath.Join(root, g)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := m.sample(t0.Add(10 * time.Second)); err == nil {
		t.Error("no error once the cgroup is gone")
	}
}

func TestNewCgroupMeterNoLimit(t *testing.T) {
	if m := newCgroupMeter(cgroupFound{CgroupInfo: CgroupInfo{Version: 2, Path: "/"}}, "/", 100); m != nil {
		t.Errorf("a meter without a limit: %+v", m)
	}
}

// TestSystemSamplerCgroup feeds a fake cgroup and scripted own CPU totals.
func TestSystemSamplerCgroup(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/self/cgroup":        "0::/g\n",
		"proc/self/mountinfo":     miRoot + miV2,
		"sys/fs/cgroup/g/cpu.max": "50000 100000\n",
	})
	stat := filepath.Join(root, "sys/fs/cgroup/g/cpu.stat")
	steps := []struct {
		stat string
		own  float64 // cumulative own CPU-seconds
		want Sample
	}{
		{"usage_usec 0\nnr_periods 0\nnr_throttled 0\n", 10, Sample{CPU: 25}},
		// The quota used up, a quarter of a CPU of it by prsync.
		{"usage_usec 500000\nnr_periods 10\nnr_throttled 9\n", 10.25, Sample{CPU: 25, Own: 12.5, HasOwn: true,
			CgroupCPU: 100, CgroupOwn: 50, CgroupCPUs: 0.5, Throttled: 0.9, HasCgroup: true}},
		// 20% of the quota; prsync's 50% is clamped to it.
		{"usage_usec 600000\nnr_periods 20\nnr_throttled 9\n", 10.5, Sample{CPU: 25, Own: 12.5, HasOwn: true,
			CgroupCPU: 20, CgroupOwn: 20, CgroupCPUs: 0.5, HasCgroup: true}},
		{"usage_usec 700000\nnr_periods 30\nnr_throttled 9\n", 10.5, Sample{CPU: 25, Own: 0, HasOwn: true,
			CgroupCPU: 20, CgroupOwn: 0, CgroupCPUs: 0.5, HasCgroup: true}},
		// cpu.stat has gone: a warning, and the host alone from then on.
		{"", 10.5, Sample{CPU: 25, HasOwn: true}},
		{"usage_usec 900000\nnr_periods 40\nnr_throttled 9\n", 10.5, Sample{CPU: 25, HasOwn: true}},
	}
	writeTree(t, root, map[string]string{"sys/fs/cgroup/g/cpu.stat": steps[0].stat})
	found, err := detectCgroup(root)
	if err != nil {
		t.Fatal(err)
	}

	f := &fakeSources{cpu: 25}
	var warn bytes.Buffer
	s := f.sampler(Policy{Suspend: 80, Resume: 60}, &warn)
	s.info = found.CgroupInfo
	s.cgroup = newCgroupMeter(found, root, 100)
	var step int
	t0 := time.Unix(1000, 0)
	s.groups = func() []int { return nil }
	s.ownTime = func([]int) (cpuTimes, error) { return cpuTimes{own: steps[step].own}, nil }
	s.ncpu = 2
	s.now = func() time.Time { return t0.Add(time.Duration(step) * time.Second) }

	for i, st := range steps {
		step = i
		if st.stat == "" {
			os.Remove(stat)
		} else {
			writeTree(t, root, map[string]string{"sys/fs/cgroup/g/cpu.stat": st.stat})
		}
		got, err := s.Sample(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !sampleNear(got, st.want) {
			t.Errorf("sample %d = %+v, want %+v", i, got, st.want)
		}
	}
	if !strings.HasPrefix(warn.String(), "prsync: warning: cannot measure the cpu use of cgroup /g: ") || strings.Count(warn.String(), "\n") != 1 {
		t.Errorf("warnings %q, want one about the cgroup", warn.String())
	}
	if got := s.Source(); got != found.CgroupInfo {
		t.Errorf("Source() = %+v, want %+v", got, found.CgroupInfo)
	}
}

// sampleNear compares samples, with a little room for rounding.
func sampleNear(a, b Sample) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return near(a.CPU, b.CPU) && near(a.Own, b.Own) && near(a.Load, b.Load) && near(a.IOPressure, b.IOPressure) &&
		near(a.CgroupCPU, b.CgroupCPU) && near(a.CgroupOwn, b.CgroupOwn) && near(a.CgroupCPUs, b.CgroupCPUs) &&
		near(a.Throttled, b.Throttled) && near(a.CPUPressure, b.CPUPressure) &&
		a.HasOwn == b.HasOwn && a.HasLoad == b.HasLoad && a.HasIO == b.HasIO && a.HasCgroup == b.HasCgroup &&
		a.HasCPUPressure == b.HasCPUPressure
}

// TestNewSystemSamplerCgroupFiles: the sampler reads the PSI files and the
// cgroup detection found, and warns once if the detection failed.
func TestNewSystemSamplerCgroupFiles(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/self/cgroup":             "0::/g\n",
		"proc/self/mountinfo":          miRoot + miV2,
		"sys/fs/cgroup/g/cpu.max":      "bad\n",
		"sys/fs/cgroup/g/cpu.pressure": "some avg10=12.50 avg60=0 avg300=0 total=0\n",
		"sys/fs/cgroup/g/io.pressure":  "some avg10=3.25 avg60=0 avg300=0 total=0\n",
	})
	if runtime.GOOS != "linux" {
		t.Skip("PSI files are read only on Linux")
	}
	found, cgErr := detectCgroup(root)
	if cgErr == nil {
		t.Fatal("no error for a malformed cpu.max")
	}
	var warn bytes.Buffer
	s := newSystemSampler(Policy{Suspend: 80, Resume: 60, MaxCPUPressure: 50, MaxIOPressure: 50}, cmdline.Warner(&warn), nil, found, nil, cgErr)
	got, err := s.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !got.HasCPUPressure || got.CPUPressure != 12.5 || !got.HasIO || got.IOPressure != 3.25 || got.HasCgroup {
		t.Errorf("Sample() = %+v, want cgroup pressures 12.5 and 3.25 and no cgroup cpu", got)
	}
	wantWarn := "prsync: warning: cgroup: read " + filepath.Join(root, "sys/fs/cgroup/g/cpu.max") + `: malformed value "bad"; using the host's cpu use only` + "\n"
	if warn.String() != wantWarn {
		t.Errorf("warnings %q, want %q", warn.String(), wantWarn)
	}
	if src := s.Source(); src.PSI != PSICgroup || src.Version != 2 || src.CPUs != 0 {
		t.Errorf("Source() = %+v", src)
	}
}

// TestCgroupFloor: throttled periods prove a use of the quota less the CPUs' slices.
func TestCgroupFloor(t *testing.T) {
	tests := []struct {
		cpus          float64
		period, slack time.Duration
		throttled     float64
		want          float64
	}{
		{0.5, 100 * time.Millisecond, 10 * time.Millisecond, 1, 0.8}, // 2 CPUs, 5 ms slices
		{0.5, 100 * time.Millisecond, 10 * time.Millisecond, 0.5, 0.4},
		{2, 100 * time.Millisecond, 10 * time.Millisecond, 1, 0.95},
		{0.5, 100 * time.Millisecond, 80 * time.Millisecond, 1, 0}, // 16 CPUs: proves nothing
		{0.5, 0, 10 * time.Millisecond, 1, 0},                      // period unknown
	}
	for _, tt := range tests {
		m := &cgroupMeter{cpus: tt.cpus, period: tt.period, slack: tt.slack}
		if got := m.floor(tt.throttled); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("floor(%v) with %v CPUs, period %v, slack %v = %v, want %v", tt.throttled, tt.cpus, tt.period, tt.slack, got, tt.want)
		}
	}
}
