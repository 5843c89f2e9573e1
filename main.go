// Command prsync copies the paths it reads on stdin with many rsync processes at once.
package main

import (
	"os"

	"github.com/prsync/prsync/cli"
)

func main() { os.Exit(cli.Main()) }
