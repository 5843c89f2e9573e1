package throttle

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// parsePSI returns the "some avg10" figure of a Linux pressure stall file
// such as /proc/pressure/io, whose first line looks like
//
//	some avg10=1.23 avg60=0.50 avg300=0.10 total=123456
func parsePSI(r io.Reader) (float64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "some" {
			continue
		}
		for _, f := range fields[1:] {
			v, ok := strings.CutPrefix(f, "avg10=")
			if !ok {
				continue
			}
			pct, err := strconv.ParseFloat(v, 64)
			if err != nil || !(pct >= 0 && pct <= 100) {
				return 0, fmt.Errorf("bad avg10 value %q", v)
			}
			return pct, nil
		}
		return 0, errors.New(`no avg10 in the "some" line`)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New(`no "some" line`)
}

// ReadPressure returns the "some avg10" figure, in percent, of the PSI file name (a
// CgroupInfo's CPUPressureFile or IOPressureFile), as the sampler reads it: an error
// says why the matching --max-*-pressure limit would be dropped (prsync doctor).
func ReadPressure(name string) (float64, error) { return readPressure(name) }
