package tests

import (
	"bytes"
	"os"
	"strconv"
	"testing"
	"time"
)

// hostCPU returns the machine's CPU use in percent over d, from /proc/stat (everything but
// idle and iowait), and false where there is no /proc/stat. Tests whose point is timing
// measure the load they run under with it, before they add their own: on a machine kept
// busy by others (a shared CI runner, make test-busy) some effects cannot be seen.
func hostCPU(t testing.TB, d time.Duration) (float64, bool) {
	t.Helper()
	read := func() (busy, total float64, ok bool) {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return 0, 0, false
		}
		line, _, _ := bytes.Cut(b, []byte{'\n'})
		f := bytes.Fields(line)
		if len(f) < 6 || string(f[0]) != "cpu" {
			return 0, 0, false
		}
		for i, v := range f[1:] {
			if i >= 8 { // guest and guest_nice are counted in user and nice already
				break
			}
			n, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return 0, 0, false
			}
			total += n
			if i != 3 && i != 4 { // idle, iowait
				busy += n
			}
		}
		return busy, total, true
	}
	b0, t0, ok := read()
	if !ok {
		return 0, false
	}
	time.Sleep(d)
	b1, t1, ok := read()
	if !ok || t1 <= t0 {
		return 0, false
	}
	return 100 * (b1 - b0) / (t1 - t0), true
}
