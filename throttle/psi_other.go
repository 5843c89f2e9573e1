//go:build !linux

package throttle

import "errors"

// readPressure fails: pressure stall information exists only on Linux.
func readPressure(string) (float64, error) {
	return 0, errors.New("pressure stall information (PSI) is only available on Linux")
}
