package tests

import (
	"os/exec"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the CLI scripts in testdata/*.txtar with prsync on $PATH.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata",
		Condition: func(cond string) (bool, error) {
			if cond == "root" {
				return isRoot(), nil
			}
			return false, nil
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("PRSYNC_RETRY_DELAY", "10ms")
			if p, err := exec.LookPath("rsync"); err == nil {
				env.Setenv("RSYNC", p)
			}
			return nil
		},
	})
}
