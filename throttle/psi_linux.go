package throttle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// readPressure returns the "some avg10" figure, in percent, of the PSI file
// name, such as /proc/pressure/io or a cgroup's cpu.pressure.
func readPressure(name string) (float64, error) {
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%s is missing (PSI needs Linux 4.20 or later with CONFIG_PSI)", name)
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	pct, err := parsePSI(f)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	return pct, nil
}
