package exec

import (
	"context"
	osexec "os/exec"
	"time"

	"github.com/prsync/prsync/rsync"
)

// Version runs the rsync at path with the options args and --version (rsync.VersionArgs),
// as a run does before it starts and prsync doctor does to check one, and returns its
// answer. ctx bounds it.
func Version(ctx context.Context, path string, args []string) rsync.VersionReply {
	cmd := osexec.CommandContext(ctx, path, rsync.VersionArgs(args)...)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	return rsync.VersionReply{Out: out, Code: code, Err: err}
}
