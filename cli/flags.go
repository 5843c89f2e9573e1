package cli

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
)

// Flags is prsync's command line. Every flag also reads PRSYNC_<NAME> from the environment.
type Flags struct {
	Null         bool          `short:"0" help:"Input paths are NUL-separated (find -print0, fd -0, git ls-files -z)."`
	Jobs         Jobs          `short:"j" aliases:"max-procs" default:"auto" placeholder:"N|auto" help:"Concurrent rsync processes: auto finds the best number while copying, from the number of CPUs (at least 8); N pins it (0: that number)."`
	MaxJobs      int           `default:"0" placeholder:"N" help:"The most concurrent rsyncs -j auto (or live control) may reach (0: 4 x CPUs, at least 32)."`
	Root         string        `short:"C" placeholder:"DIR" help:"Source root: paths land in DEST relative to it; relative paths are taken relative to it. HOST:PATH, USER@HOST:PATH, rsync://HOST/MODULE/PATH or HOST::MODULE/PATH pull from a remote source."`
	Sizes        bool          `help:"Records are SIZE<TAB>PATH, as find -printf '%s\\t%P\\0' writes them: sizes come from the list, and the source is not lstat'ed (no quick check). A record with no path after its tab is the root (.), as find writes its starting point."`
	From         string        `placeholder:"FILE" help:"Read the path list from FILE instead of stdin."`
	ChunkFiles   int           `default:"10000" placeholder:"N" help:"The most paths in a chunk (2000 in a pull from a remote --root whose rsync options rule out anchors, such as -r; in a pull from a daemon with anchors a chunk's list also stops at 256 KiB unless this is given; see README); given without --chunk-time, chunks are cut at exactly this many."`
	ChunkBytes   Size          `default:"128M" placeholder:"SIZE" help:"The most bytes in a chunk (1G, 512M, 64K); a bigger file gets a chunk of its own. Given without --chunk-time, chunks are cut at exactly this many."`
	ChunkTime    time.Duration `default:"2s" placeholder:"DURATION" help:"Size chunks to last about this long, from what the chunks that finished cost, within --chunk-files and --chunk-bytes (0: cut them by those alone, as does giving either without --chunk-time)."`
	ChunkWait    time.Duration `default:"1s" placeholder:"DURATION" help:"Close a chunk when no new path arrived for this long."`
	Retries      int           `default:"2" placeholder:"N" help:"Re-run a chunk this many times after a transient rsync failure."`
	RetryDelay   time.Duration `default:"1s" placeholder:"DURATION" help:"First retry delay; doubled each retry, with jitter."`
	Rsync        string        `default:"rsync" placeholder:"PATH" help:"The rsync binary."`
	NoArchive    bool          `help:"Do not pass --archive to rsync."`
	Compress     bool          `short:"z" help:"Pass --compress to rsync."`
	DryRun       bool          `short:"n" help:"Plan and report; rsync runs with --dry-run."`
	Failed       string        `placeholder:"FILE" help:"Write every path that failed, vanished or was not done to FILE, separated as the input was."`
	PathsLog     string        `placeholder:"FILE" help:"Write one JSON line per input path to FILE as it settles: its status (transferred, up_to_date, vanished, failed, not_done), bytes, chunk, rsync's itemized change and, when not done, the reason."`
	Shard        string        `placeholder:"K/N" help:"Take only the paths in shard K of N (xxhash64 of the path bytes mod N)."`
	NoQuickCheck bool          `help:"Send every path to rsync, even when its local copy already matches."`

	Delete            bool   `help:"After the copy, delete what DEST has and the source lacks, in each directory the paths touched (each listed directory and each parent of a listed path); never anything the source has."`
	DeleteAfterErrors bool   `help:"Run the --delete pass even when paths failed or were not done (never after an interrupt)."`
	Verify            string `enum:"off,all,transferred" default:"off" placeholder:"all|transferred" help:"After each chunk, check by checksum that DEST matches the source: all paths (--verify, --verify=all; no quick check) or those this run transferred (--verify=transferred). A path that differs fails."`
	Transport         string `enum:"direct,pipe" default:"pipe" placeholder:"pipe|direct" help:"How a local copy's rsyncs run: pipe (rsync's pull form over a local pipe: reads the list in blocks, logs what it wrote) or direct (its push form)."`
	RemoteLists       string `enum:"auto,on,off" default:"auto" placeholder:"auto|on|off" help:"In a push, put the chunks' lists on the far side, which sends them to rsync in blocks (--files-from=:NAME): auto (to a daemon, when the lists waiting pay for an upload), on (for every chunk, over ssh too), off (each rsync reads its list from prsync)."`

	BWLimit     string `name:"bwlimit" placeholder:"RATE|TIMETABLE" help:"One bandwidth limit for all rsyncs together: a rate (20M, 512K; a bare number is KiB/s, as rsync's) or a timetable such as '08:00,20M 19:00,200M 23:00,off'. --bwlimit after -- is rsync's own, per rsync."`
	NoControl   bool   `help:"Open no control socket (prsync ctl cannot reach this run)."`
	MetricsFile string `placeholder:"PATH" help:"Keep a Prometheus text-format file of the run's figures up to date at PATH (for node_exporter's textfile collector)."`
	// the labels of the metrics file's series (metricsLabels)
	MetricsLabel []string `sep:"none" placeholder:"NAME=VALUE" help:"Give every series of --metrics-file this label (repeatable), instead of dest=DEST; two runs writing into one textfile directory must differ in their labels."`

	// the time window (window.go)
	MaxDuration      time.Duration `placeholder:"DURATION" help:"A time window: start no rsync later than DURATION after prsync started; the rsyncs running then get --max-duration-grace to finish, then are stopped, and what is left is not done (in --failed; exit 124). 0: no limit."`
	MaxDurationGrace time.Duration `default:"1m" placeholder:"DURATION" help:"How long the rsyncs running when --max-duration ends may go on before they are stopped (TERM, then CONT: rsync removes its temp file); 0: at once."`

	Progress   bool `help:"Show human progress on stderr (default: when stderr is a terminal)." xor:"progress"`
	NoProgress bool `help:"Never show human progress." xor:"progress"`

	SuspendThreshold float64       `default:"80" placeholder:"PCT" help:"Pause rsyncs while system CPU use is above PCT."`
	ResumeThreshold  float64       `default:"60" placeholder:"PCT" help:"Resume them once CPU use is below PCT."`
	ThrottleInterval time.Duration `default:"1s" placeholder:"DURATION" help:"CPU sampling and progress period."`
	MaxLoad          float64       `placeholder:"N" help:"Also pause while the 1-minute load average is above N (0: off)."`
	MaxIOPressure    float64       `name:"max-io-pressure" placeholder:"PCT" help:"Also pause while Linux PSI io 'some avg10' is above PCT (0: off); the cgroup's own io.pressure when there is one."`
	MaxCPUPressure   float64       `name:"max-cpu-pressure" placeholder:"PCT" help:"Also pause while Linux PSI cpu 'some avg10' is above PCT (0: off); the cgroup's own cpu.pressure when there is one."`
	MaxSuspend       time.Duration `default:"30s" placeholder:"DURATION" help:"The longest every rsync stays paused while the machine stays busy; then one runs until it cools (0: for ever)."`
	NoThrottle       bool          `help:"Never pause rsyncs."`

	Version kong.VersionFlag `help:"Print the version and exit."`

	Dest      string   `arg:"" name:"DEST" help:"Any rsync destination: DIR, HOST:PATH, rsync://HOST/MODULE/PATH, HOST::MODULE/PATH."`
	RsyncArgs []string `arg:"" optional:"" name:"RSYNC_OPTION" help:"Options for every rsync, after --."`

	shard, shards int
}

// defaultJobs is the default -j: the number of CPUs, at least 8. rsync waits on the disk
// (a cold cache) and on the network (per-stream latency and caps) more than on the CPU:
// on the 2-CPU bench machine, -j 8 copied the 50k-file tree cold in 6.8 s against 8.3 s
// at -j 2, and on a shaped link 8 streams beat 4 (bench/RESULTS.md).
//
// With DEST a directory on a network filesystem (netDest), at least 16: there each rsync
// spends its time waiting on round trips for DEST's attributes, so more of them at once
// hide more of the latency, at little CPU. An incremental pass into sshfs with a 2 ms
// round trip (bench scenario 2, 1,000 changed of 20,000) took 13.8 s at -j 16 against
// 18.2 s at -j 8 (prsync --chunk-files 2000; GNU parallel and fpsync the same), and a
// fresh copy there took the same at both (scenario 1).
func defaultJobs(netDest bool) int {
	if netDest {
		return max(runtime.NumCPU(), 16)
	}
	return max(runtime.NumCPU(), 8)
}

// Jobs is -j: a number of concurrent rsyncs, or auto.
type Jobs struct {
	N    int
	Auto bool
}

// UnmarshalText reads N, 0 (defaultJobs, pinned) or "auto" (the default).
func (j *Jobs) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if strings.EqualFold(s, "auto") {
		*j = Jobs{Auto: true}
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return &JobsError{Value: s}
	}
	*j = Jobs{N: n}
	return nil
}

// JobsError is a -j value that is neither a number of rsyncs nor auto.
type JobsError struct {
	Value string
	Env   string // the environment variable it came from, or ""
}

func (e *JobsError) Error() string {
	what := "-j " + e.Value
	if e.Env != "" {
		what = e.Env + "=" + e.Value
	}
	return what + ": want a number of rsyncs at least 1, or auto (0: the CPUs, at least 8)"
}

// jobsHint is the hint of a JobsError.
const jobsHint = "as in -j 8 or -j auto; without -j prsync finds the number while copying (-j auto), from the CPUs, at least 8; -j 0 pins that number"

// negativeJobs rewrites "-j -3" (and --jobs, --max-procs) as --jobs=-3, so that the value
// reaches Jobs.UnmarshalText, which refuses it: kong takes a lone -3 for a short flag.
func negativeJobs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "-j" || a == "--jobs" || a == "--max-procs") && i+1 < len(args) && isNegative(args[i+1]) {
			out = append(out, "--jobs="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

func isNegative(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil && strings.HasPrefix(s, "-")
}

// jobsGiven reports whether args (before --) set -j.
func jobsGiven(args []string) bool {
	for _, a := range args {
		switch {
		case a == "--":
			return false
		case a == "-j", a == "--jobs", a == "--max-procs",
			strings.HasPrefix(a, "--jobs="), strings.HasPrefix(a, "--max-procs="),
			strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsRune(a, 'j'):
			return true
		}
	}
	return false
}

// parseError is the usage error of a command line kong could not parse: a bad -j in
// words of its own, else kong's message.
func parseError(err error, args []string, hint string) error {
	var je *JobsError
	if errors.As(err, &je) {
		return usage(je.Error(), jobsHint)
	}
	// kong does not wrap the error of a value from the environment
	if v, ok := os.LookupEnv("PRSYNC_JOBS"); ok && !jobsGiven(args) && strings.Contains(err.Error(), "PRSYNC_JOBS") {
		var j Jobs
		if errors.As(j.UnmarshalText([]byte(v)), &je) {
			je.Env = "PRSYNC_JOBS"
			return usage(je.Error(), jobsHint)
		}
	}
	return usage(err.Error(), hint)
}

// defaultMaxJobs is the default --max-jobs: 4 × CPUs, at least 32.
func defaultMaxJobs() int { return max(4*runtime.NumCPU(), 32) }

// Size is a byte count written as 1G, 512M, 64K or 1000.
type Size int64

// UnmarshalText parses a size with an optional K, M, G or T suffix (powers of 1024).
func (s *Size) UnmarshalText(b []byte) error {
	str := strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(string(b))), "B")
	mult := int64(1)
	if n := len(str); n > 0 {
		switch str[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			str = str[:n-1]
		}
	}
	v, err := strconv.ParseFloat(str, 64)
	if err != nil || v <= 0 {
		return fmt.Errorf("bad size %q: want a positive number with an optional K, M, G or T", string(b))
	}
	*s = Size(v * float64(mult))
	return nil
}

// parseShard reads "K/N"; "" means no sharding.
func parseShard(s string) (k, n int, err error) {
	if s == "" {
		return 0, 1, nil
	}
	a, b, ok := strings.Cut(s, "/")
	k, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || k < 0 || k >= n {
		return 0, 0, usage(fmt.Sprintf("bad --shard %q", s), "write --shard K/N with 0 <= K < N, for example --shard 0/4")
	}
	return k, n, nil
}
