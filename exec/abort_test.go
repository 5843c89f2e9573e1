package exec

import (
	"fmt"
	"testing"

	"github.com/prsync/prsync/internal/cmdline"
)

// TestAbortExitCode: an AbortError answers the exit code a run that stopped for it ends
// with, as every other error that carries one does (cmdline.Code): rsync's own code, or
// 23 when it has none.
func TestAbortExitCode(t *testing.T) {
	for _, tt := range []struct {
		err  *AbortError
		want int
	}{
		{&AbortError{Chunk: 1, Code: 11, Msg: "No space left on device"}, 11},
		{&AbortError{Chunk: 2, Code: LostExitCode, Msg: "DEST is no longer the storage it was", Lost: true}, 3},
		{&AbortError{Chunk: 3, Msg: "no code"}, 23},
	} {
		if got := cmdline.Code(fmt.Errorf("wrapped: %w", tt.err), 1); got != tt.want {
			t.Errorf("%v: exit code %d, want %d", tt.err, got, tt.want)
		}
	}
}
