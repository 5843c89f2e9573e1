package tests

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the CLI scripts in testdata/*.txtar with prsync on $PATH: the race-built
// prsync the other tests run.
func TestScripts(t *testing.T) {
	t.Parallel()                // a correctness test: it runs beside the others, after the timing tests ran alone
	dir := filepath.Dir(bin(t)) // holds prsync alone
	testscript.Run(t, testscript.Params{
		Dir: "testdata",
		Condition: func(cond string) (bool, error) {
			if cond == "root" {
				return isRoot(), nil
			}
			return false, nil
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", dir+string(filepath.ListSeparator)+env.Getenv("PATH"))
			env.Setenv("PRSYNC_RETRY_DELAY", "10ms")
			env.Setenv("PRSYNC_MAX_SUSPEND", "2s") // as for the other tests (cleanEnv): a busy suite pauses copies
			if p, err := exec.LookPath("rsync"); err == nil {
				env.Setenv("RSYNC", p)
			}
			return nil
		},
	})
}
