//go:build tools

package main

import (
	_ "github.com/alecthomas/kong"
	_ "github.com/cespare/xxhash/v2"
	_ "github.com/mattn/go-isatty"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/shirou/gopsutil/v4/cpu"
	_ "github.com/shirou/gopsutil/v4/load"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sys/unix"
)
