// Command prsync copies the paths it reads on stdin with many rsync processes at once.
package main

import (
	"os"
	"runtime/pprof"

	"github.com/prsync/prsync/cli"
)

func main() {
	// PRSYNC_CPUPROFILE=FILE writes a Go CPU profile of prsync itself, for development
	// (not of its pipe helpers: the profiling timer would survive their exec of rsync)
	if p := os.Getenv("PRSYNC_CPUPROFILE"); p != "" && !cli.PipeHelper(os.Args) {
		if f, err := os.Create(p); err == nil {
			pprof.StartCPUProfile(f)
			code := cli.Main()
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
	}
	os.Exit(cli.Main())
}
