package doctor

import (
	"errors"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/prsync/prsync/throttle"
)

// Check names of what the throttle and live control will see.
const (
	NameCgroup  = "throttle-cgroup"
	NamePSI     = "throttle-psi"
	NameControl = "control-socket"
)

// ThrottleFacts is what the throttle would find: the cgroup (throttle.DetectCgroup) and
// the PSI files read once (throttle.ReadPressure), with the limits asked for.
type ThrottleFacts struct {
	Info           throttle.CgroupInfo
	Err            error // of DetectCgroup
	CPUPressureErr error // of reading Info.CPUPressureFile
	IOPressureErr  error
	Policy         throttle.Policy
	Off            bool // --no-throttle
}

// LookThrottle detects the cgroup and reads the PSI files as the throttle would.
func LookThrottle(p throttle.Policy, off bool) ThrottleFacts {
	f := ThrottleFacts{Policy: p, Off: off}
	f.Info, f.Err = throttle.DetectCgroup()
	f.CPUPressureErr, f.IOPressureErr = errors.New("no PSI file"), errors.New("no PSI file")
	if f.Info.CPUPressureFile != "" {
		_, f.CPUPressureErr = throttle.ReadPressure(f.Info.CPUPressureFile)
	}
	if f.Info.IOPressureFile != "" {
		_, f.IOPressureErr = throttle.ReadPressure(f.Info.IOPressureFile)
	}
	return f
}

// Throttle checks what the CPU throttle and the pressure limits will measure.
func Throttle(f ThrottleFacts) []Check {
	var out []Check
	i := f.Info
	switch {
	case f.Off:
		out = append(out, ok(NameCgroup, "--no-throttle: rsyncs are never paused"))
	case f.Err != nil:
		out = append(out, warn(NameCgroup, "", "the cgroup could not be read (%v): the throttle measures the whole machine's CPU", f.Err))
	case i.CPUs > 0:
		out = append(out, ok(NameCgroup, "cgroup v%d %s limits CPU to %.2f CPUs (set by %s): --suspend-threshold %g%% is of that quota, read from %s",
			i.Version, i.Path, i.CPUs, i.LimitDir, f.Policy.Suspend, i.Usage))
	case i.Version > 0:
		out = append(out, ok(NameCgroup, "cgroup v%d %s has no CPU limit: the throttle measures the whole machine's CPU", i.Version, i.Path))
	default:
		out = append(out, ok(NameCgroup, "no cgroup CPU controller: the throttle measures the whole machine's CPU"))
	}
	psi := func(limit float64, flag string, file string, err error) {
		switch {
		case limit > 0 && err != nil:
			out = append(out, warn(NamePSI, "drop "+flag+", or run on Linux 4.20 or later with PSI on (CONFIG_PSI, no psi=0)",
				"%s %g is set, but %v: the run warns once and ignores it", flag, limit, err))
		case limit > 0:
			out = append(out, ok(NamePSI, "%s %g reads %s", flag, limit, file))
		}
	}
	if !f.Off {
		psi(f.Policy.MaxCPUPressure, "--max-cpu-pressure", i.CPUPressureFile, f.CPUPressureErr)
		psi(f.Policy.MaxIOPressure, "--max-io-pressure", i.IOPressureFile, f.IOPressureErr)
	}
	if f.Off || (f.Policy.MaxCPUPressure <= 0 && f.Policy.MaxIOPressure <= 0) {
		switch {
		case f.CPUPressureErr == nil && f.IOPressureErr == nil:
			out = append(out, ok(NamePSI, "PSI is readable (%s, %s): --max-io-pressure and --max-cpu-pressure can be used", i.IOPressureFile, i.CPUPressureFile))
		default:
			out = append(out, ok(NamePSI, "no PSI here (%v): --max-io-pressure and --max-cpu-pressure would be ignored; neither is set", firstErr(f.IOPressureErr, f.CPUPressureErr)))
		}
	}
	return out
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// ControlFacts is what live control would find: the socket directory
// (control.LookupDir) and whether it, or the directory it would be made in, is
// writable.
type ControlFacts struct {
	Off      bool // --no-control
	Dir      string
	Err      error // of LookupDir: a missing directory is fs.ErrNotExist
	Writable error // access(2) W_OK|X_OK of Dir, or of its parent when Dir is missing
}

// LookControl fills ControlFacts from lookup (control.LookupDir).
func LookControl(off bool, lookup func() (string, error)) ControlFacts {
	f := ControlFacts{Off: off}
	if off {
		return f
	}
	f.Dir, f.Err = lookup()
	dir := f.Dir
	if errors.Is(f.Err, fs.ErrNotExist) {
		dir = filepath.Dir(f.Dir)
	}
	if dir != "" && (f.Err == nil || errors.Is(f.Err, fs.ErrNotExist)) {
		if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
			f.Writable = &fs.PathError{Op: "access", Path: dir, Err: err}
		}
	}
	return f
}

// Control checks the control socket's directory.
func Control(f ControlFacts) Check {
	switch {
	case f.Off:
		return ok(NameControl, "--no-control: no socket; prsync ctl cannot reach the run")
	case f.Writable != nil:
		return warn(NameControl, "set XDG_RUNTIME_DIR to a private directory of yours (mode 0700)",
			"the run cannot make its socket: %v; it runs without live control (prsync ctl)", f.Writable)
	case errors.Is(f.Err, fs.ErrNotExist):
		return ok(NameControl, "the socket goes in %s, which the run creates (mode 0700)", f.Dir)
	case f.Err != nil:
		fix := "set XDG_RUNTIME_DIR to a private directory of yours (mode 0700)"
		var h interface{ HintText() string }
		if errors.As(f.Err, &h) && h.HintText() != "" {
			fix = h.HintText()
		}
		return warn(NameControl, fix, "%v: the run goes without live control (prsync ctl)", f.Err)
	}
	return ok(NameControl, "the socket goes in %s (yours, mode 0700)", f.Dir)
}
