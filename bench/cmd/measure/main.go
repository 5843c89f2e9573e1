// Command measure runs a command and reports its wall time, CPU time and peak
// RSS, counting every descendant the command waited for (wait4 rusage, as
// /usr/bin/time does). It prints one line:
//
//	wall_s user_s sys_s maxrss_kb exit_code
//
// Peak RSS is the largest single process in the tree, not a sum.
//
// Usage: measure [-o FILE] -- COMMAND [ARG...]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	out := flag.String("o", "", "write the result line to FILE instead of stdout")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: measure [-o FILE] -- COMMAND [ARG...]")
		os.Exit(2)
	}
	// The terminal delivers ^C to the whole foreground group; let the child
	// decide what to do and still report what it cost.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)

	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	err := cmd.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "measure:", err)
		os.Exit(127)
	}
	// A TERM or HUP (the bench stopped by its process group) goes on to the child: timeout,
	// which runs the method in a group of its own, passes it to that group; without this
	// the method went on running after the bench had gone.
	fwd := make(chan os.Signal, 1)
	signal.Notify(fwd, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for s := range fwd {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	signal.Stop(fwd)
	wall := time.Since(start)
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "measure:", err)
		code = 127
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	var user, sys float64
	var rss int64
	if ru != nil {
		user = time.Duration(syscall.TimevalToNsec(ru.Utime)).Seconds()
		sys = time.Duration(syscall.TimevalToNsec(ru.Stime)).Seconds()
		rss = ru.Maxrss
	}
	line := fmt.Sprintf("%.3f %.3f %.3f %d %d\n", wall.Seconds(), user, sys, rss, code)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(line), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "measure:", err)
			os.Exit(1)
		}
	} else {
		fmt.Print(line)
	}
	os.Exit(code)
}
