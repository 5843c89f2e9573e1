//go:build !linux

package tests

import (
	"errors"
	"os"
)

// openPTY is Linux-only here: the tests that need a terminal skip elsewhere.
func openPTY() (master, slave *os.File, err error) {
	return nil, nil, errors.New("no pseudo-terminal helper on this system")
}
