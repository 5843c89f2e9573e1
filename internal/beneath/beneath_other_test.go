//go:build !linux

package beneath

import "testing"

// forceWalk: every look walks already.
func forceWalk(*testing.T) bool { return false }

func hasOpenat2() bool { return false }
