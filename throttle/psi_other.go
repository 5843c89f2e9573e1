//go:build !linux

package throttle

import "errors"

// readIOPressure fails: pressure stall information exists only on Linux.
func readIOPressure() (float64, error) {
	return 0, errors.New("io pressure (PSI) is only available on Linux")
}
