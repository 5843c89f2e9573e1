package throttle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

const psiIOPath = "/proc/pressure/io"

// readIOPressure returns the PSI io "some avg10" figure in percent.
func readIOPressure() (float64, error) {
	f, err := os.Open(psiIOPath)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%s is missing (PSI needs Linux 4.20 or later with CONFIG_PSI)", psiIOPath)
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	pct, err := parsePSI(f)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", psiIOPath, err)
	}
	return pct, nil
}
