package beneath

import "testing"

// forceWalk makes every look walk the path one name at a time, as where openat2 is
// missing, until the test ends.
func forceWalk(t *testing.T) bool {
	was := noOpenat2.Load()
	noOpenat2.Store(true)
	t.Cleanup(func() { noOpenat2.Store(was) })
	return true
}

func hasOpenat2() bool { return !noOpenat2.Load() }
