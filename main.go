// Command prsync copies the paths it reads on stdin with many rsync processes at once.
package main

import (
	"os"

	"github.com/prsync/prsync/cli"
)

// main does nothing before cli.Main, whose first act is to route the signals: a SIGINT
// while prsync starts must end the run with its code, not kill the process.
func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
