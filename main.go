// Command prsync copies the paths it reads on stdin with many rsync processes at once.
package main

import (
	"os"
	"runtime/pprof"

	"github.com/prsync/prsync/cli"
)

func main() {
	args := os.Args[1:]
	// PRSYNC_CPUPROFILE=FILE writes a Go CPU profile of prsync itself, for development
	// (not of its pipe helpers: the profiling timer would survive their exec of rsync)
	if p := os.Getenv("PRSYNC_CPUPROFILE"); p != "" && !cli.PipeHelper(args) {
		if f, err := os.Create(p); err == nil {
			pprof.StartCPUProfile(f)
			code := cli.Main(args, os.Stdin, os.Stdout, os.Stderr)
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
	}
	os.Exit(cli.Main(args, os.Stdin, os.Stdout, os.Stderr))
}
