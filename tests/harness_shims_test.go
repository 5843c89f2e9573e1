package tests

// Old names of the harness, while the tests move onto it; this file goes when they have.

import (
	"testing"
)

func checkIdentity(t testing.TB, s map[string]any, want int64)      { t.Helper(); identity(t, s, want) }
func fltNums(t testing.TB, e map[string]any, want map[string]int64) { t.Helper(); counts(t, e, want) }
func fltOpenUp(t testing.TB, dir string)                            { t.Helper(); openUp(t, dir) }
func fltChownNobody(t testing.TB, dir string)                       { t.Helper(); nobodysDir(t, dir) }
func fltNobody(t testing.TB, base string) []string {
	t.Helper()
	o := asNobody(t, base)
	return append(o.wrap, o.bin)
}
func checkTruth(t testing.TB, r *Run, src, dst string, rels []string, failedList string, sep byte) map[string]bool {
	t.Helper()
	return r.DestHolds(t, src, dst, rels)
}
func checkRefused(t testing.TB, r *Run, code int, names ...string) {
	t.Helper()
	r.Refused(t, code, names...)
}
