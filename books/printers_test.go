package books

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prsync/prsync/bw"
	"github.com/prsync/prsync/control"
	"github.com/prsync/prsync/event"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
	"github.com/prsync/prsync/throttle"
)

// sample is a snapshot with every figure set: a copy over half way, with the throttle
// and the bandwidth limit at work.
func sample() Snapshot {
	return Snapshot{
		Counts: Counts{Files: 1000, Bytes: 50e6, Transferred: 400, BytesTransferred: 20e6, UpToDate: 100,
			Failed: 3, Vanished: 2, NotDone: 1, Empty: 4, Queued: 300, QueuedBytes: 15e6, ChunkErrors: 1,
			ConfirmSeconds: 0.12345, Verified: 390, VerifyFailed: 10, VerifySeconds: 1.23456,
			Chunks: 12, ChunksFailed: 2, Retries: 3},
		Live: Live{PID: 4242, Elapsed: 12.3456, InFlight: 1e6, Running: 4, Suspended: 2, Jobs: 6, MaxJobs: 32,
			JobsAuto: true, Paused: false, InputDone: true, BWLimit: "08:00,20M 19:00,off", BWLimitNow: "20M", BWRate: 20e6,
			Sample: throttle.Sample{CPU: 91.25, Own: 40.04, Kernel: 1.56, HasOwn: true, Load: 3.5, HasLoad: true,
				CgroupCPU: 99.99, CgroupOwn: 50, HasCgroup: true},
			Suspensions: 5, SecondsSuspended: 7.00049},
		JobsMin: 2, JobsMax: 8, Refusals: 1, Phase: "copy", Hint: "a hint",
	}
}

// deleting is a run in its deletion pass, on a machine with no CPU figures but the total.
func deleting() Snapshot {
	return Snapshot{
		Counts: Counts{Files: 13, Bytes: 4000, Transferred: 10, BytesTransferred: 3000, UpToDate: 3,
			DirsChecked: 40, Deleted: 3},
		Live:  Live{PID: 1, Elapsed: 3, Running: 1, Jobs: 8, MaxJobs: 8, InputDone: true, BWLimit: "off", BWLimitNow: "off"},
		Phase: "delete", DeleteDirs: 90, JobsMin: 8, JobsMax: 8,
	}
}

var end = End{ExitCode: 23, InputComplete: true, DeletePass: "ran", DeleteSeconds: 0.25, CPUSeconds: 0.0504,
	RsyncCPUSeconds: 2.5, Shard: 1, Shards: 4, OwnCPUSeconds: 3.14159, HasOwnCPU: true}

func ended(s Snapshot, e End) Snapshot {
	s.End = &e
	return s
}

func encoder(buf *bytes.Buffer) JSON {
	enc := event.NewEncoder(buf)
	enc.Now = func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }
	return JSON{enc: enc}
}

// TestJSON pins the bytes of each event the JSON printer writes, given a snapshot.
func TestJSON(t *testing.T) {
	const at = `{"type":"%s","time":"2026-11-29T12:00:00Z",`
	tests := []struct {
		name  string
		print func(JSON)
		want  string
	}{
		{"progress", func(j JSON) { j.Update(sample()) }, fmt.Sprintf(at, "progress") +
			`"files_done":506,"bytes_done":21000000,"files_queued":300,"input_done":true,"rate_bps":13608087.1,"cpu_percent":91.3,"own_cpu_percent":40,"kernel_cpu_percent":1.6,"cgroup_cpu_percent":100,"cgroup_own_cpu_percent":50,"running":4,"suspended":2,"elapsed":12.346,"jobs":6,"phase":"copy","files_verified":390,"files_verify_failed":10}`},
		{"progress, deleting", func(j JSON) { j.Update(deleting()) }, fmt.Sprintf(at, "progress") +
			`"files_done":13,"bytes_done":3000,"files_queued":0,"input_done":true,"rate_bps":8000,"cpu_percent":0,"running":1,"suspended":0,"elapsed":3,"jobs":8,"phase":"delete","dirs_checked":40,"files_deleted":3}`},
		{"status", func(j JSON) { j.Status(sample(), "signal") }, fmt.Sprintf(at, "status") +
			`"by":"signal","jobs":6,"running":4,"suspended":2,"paused":false,"bwlimit":"08:00,20M 19:00,off","bwlimit_now":"20M","files_done":506,"bytes_done":21000000,"files_queued":300,"files_not_ok":6,"input_done":true,"rate_bps":13608087.1,"elapsed":12.346}`},
		{"summary", func(j JSON) { j.Finish(ended(sample(), end)) }, fmt.Sprintf(at, "summary") +
			`"files":1000,"bytes":50000000,"files_transferred":400,"bytes_transferred":20000000,"files_up_to_date":100,"files_failed":3,"files_vanished":2,"files_not_done":1,"empty_records":4,"chunks":12,"chunks_failed":2,"retries":3,"suspensions":5,"seconds_suspended":7,"seconds":12.346,"rate_bps":12960082.9,"cpu_seconds":0.05,"rsync_cpu_seconds":2.5,"exit_code":23,"shard":1,"shards":4,"input_complete":true,"chunk_errors":1,"confirm_seconds":0.123,"jobs_min":2,"jobs_max":8,"files_verified":390,"files_verify_failed":10,"verify_seconds":1.235,"files_deleted":0,"delete_pass":"ran","delete_dirs":0,"delete_seconds":0.25,"own_cpu_seconds":3.142}`},
		{"summary, deleting", func(j JSON) { j.Finish(ended(deleting(), End{DeletePass: "ran", DeleteSeconds: 0.5, Shards: 1})) }, fmt.Sprintf(at, "summary") +
			`"files":13,"bytes":4000,"files_transferred":10,"bytes_transferred":3000,"files_up_to_date":3,"files_failed":0,"files_vanished":0,"files_not_done":0,"empty_records":0,"chunks":0,"chunks_failed":0,"retries":0,"suspensions":0,"seconds_suspended":0,"seconds":3,"rate_bps":8000,"cpu_seconds":0,"rsync_cpu_seconds":0,"exit_code":0,"shard":0,"shards":1,"input_complete":false,"chunk_errors":0,"confirm_seconds":0,"jobs_min":8,"jobs_max":8,"files_verified":0,"files_verify_failed":0,"verify_seconds":0,"files_deleted":3,"delete_pass":"ran","delete_dirs":40,"delete_seconds":0.5}`},
		{"jobs, refused: the rate so far", func(j JSON) {
			j.JobsChanged(exec.LimitChanged{Old: 8, New: 2, Reason: "refused", Detail: "max"}, sample())
		},
			fmt.Sprintf(at, "jobs") + `"old":8,"new":2,"reason":"refused","detail":"max","rate_bps":13608087.1}`},
		{"jobs, tuned: the rate measured", func(j JSON) {
			j.JobsChanged(exec.LimitChanged{Old: 2, New: 3, Reason: "tune", RateBps: 1234.56}, sample())
		},
			fmt.Sprintf(at, "jobs") + `"old":2,"new":3,"reason":"tune","rate_bps":1234.6}`},
		{"throttle", func(j JSON) {
			j.Throttled(throttle.Event{Action: "suspend", Reason: "cgroup-cpu", Chunk: 2, PID: 7, Running: 1, Suspended: 1, Sample: sample().Sample})
		}, fmt.Sprintf(at, "throttle") +
			`"action":"suspend","reason":"cgroup-cpu","cpu_percent":91.3,"own_cpu_percent":40,"kernel_cpu_percent":1.6,"load":3.5,"cgroup_cpu_percent":100,"cgroup_own_cpu_percent":50,"chunk":2,"pid":7,"running":1,"suspended":1}`},
		{"start, with a time window", func(j JSON) { j.Started(run(true)) }, fmt.Sprintf(at, "start") +
			`"version":"v1.2.3","schema":1,"pid":4242,"jobs":4,"jobs_auto":true,"max_jobs":32,"dest":"host::mod/dst","root":"/src","rsync":"/usr/bin/rsync","rsync_version":"3.4.1","rsync_args":["-a"],"null":true,"dry_run":false,"chunk_files":1000,"chunk_bytes":1073741824,"chunk_time":2.5,"shard":1,"shards":4,"quick_check":true,"list_dest":false,"transport":"direct","source_remote":false,"sizes":false,"cgroup":{"version":2,"path":"/user.slice","cpus":1.5,"usage":"cpu.stat","psi":"cgroup"},"max_suspend":30,"control_socket":"/run/prsync/4242.sock","bwlimit":"20M","delete":true,"verify":"transferred","suspend_threshold":80,"resume_threshold":60,"max_load":8,"max_cpu_pressure":0,"max_io_pressure":40,"throttle_interval":0.5,"no_throttle":false,"max_duration":3600,"max_duration_grace":90}`},
		{"start, no window, no cgroup", func(j JSON) { j.Started(run(false)) }, fmt.Sprintf(at, "start") +
			`"version":"v1.2.3","schema":1,"pid":4242,"jobs":4,"jobs_auto":true,"max_jobs":32,"dest":"host::mod/dst","root":"/src","rsync":"/usr/bin/rsync","rsync_version":"3.4.1","rsync_args":["-a"],"null":true,"dry_run":false,"chunk_files":1000,"chunk_bytes":1073741824,"chunk_time":2.5,"shard":1,"shards":4,"quick_check":true,"list_dest":false,"transport":"direct","source_remote":false,"sizes":false,"max_suspend":30,"control_socket":"/run/prsync/4242.sock","bwlimit":"20M","delete":true,"verify":"transferred","suspend_threshold":80,"resume_threshold":60,"max_load":8,"max_cpu_pressure":0,"max_io_pressure":40,"throttle_interval":0.5,"no_throttle":false}`},
		{"chunk_start", func(j JSON) { j.ChunkStarted(exec.ChunkStarted{Chunk: sampleChunk(), Attempt: 2, PID: 77}) }, fmt.Sprintf(at, "chunk_start") +
			`"chunk":3,"attempt":2,"files":2,"bytes":300,"pid":77}`},
		{"chunk_end, retrying: no tally", func(j JSON) {
			j.ChunkEnded(exec.ChunkEnded{Chunk: sampleChunk(), Attempt: 1, Status: exec.ChunkRetrying, ExitCode: 12, Seconds: 1.5,
				BytesLogged: 50, Error: "rsync error: error in rsync protocol data stream (code 12)", Hint: "a hint"}, ChunkTally{Transferred: 9})
		}, fmt.Sprintf(at, "chunk_end") +
			`"chunk":3,"attempt":1,"files":2,"bytes":300,"files_transferred":0,"bytes_transferred":50,"files_failed":0,"files_vanished":0,"seconds":1.5,"exit_code":12,"status":"retrying","error":"rsync error: error in rsync protocol data stream (code 12)","hint":"a hint"}`},
		{"chunk_end, settled: the tally, the proof and the check", func(j JSON) {
			j.ChunkEnded(exec.ChunkEnded{Chunk: sampleChunk(), Attempt: 2, Status: exec.ChunkPartial, ExitCode: 23, Seconds: 2,
				BytesLogged: 50, Outcomes: []rsync.Outcome{}, Unexplained: "rsync: some error",
				Confirm: &exec.Confirmation{Method: "lstat", Paths: 2, Landed: 1, Seconds: 0.01},
				Verify:  &exec.Verification{Paths: 1, Failed: 0, Seconds: 0.2}}, ChunkTally{Transferred: 1, Failed: 1, BytesTransferred: 200})
		}, fmt.Sprintf(at, "chunk_end") +
			`"chunk":3,"attempt":2,"files":2,"bytes":300,"files_transferred":1,"bytes_transferred":200,"files_failed":1,"files_vanished":0,"seconds":2,"exit_code":23,"status":"partial","confirmed_by":"lstat","confirm_paths":2,"confirm_landed":1,"confirm_seconds":0.01,"unexplained":"rsync: some error","verify_paths":1,"verify_seconds":0.2}`},
		{"path_failed, a name that is not UTF-8", func(j JSON) {
			j.PathFailed(Failure{Input: []byte("bad\xff"), Status: rsync.Vanished, Reason: "file has vanished", Chunk: 3})
		}, fmt.Sprintf(at, "path_failed") + `"path":"bad\ufffd","path_b64":"YmFk/w==","status":"vanished","reason":"file has vanished","chunk":3}`},
		{"path_failed, settled by the splitter", func(j JSON) {
			j.PathFailed(Failure{Input: []byte("/out"), Status: rsync.Failed, Reason: "outside --root"})
		}, fmt.Sprintf(at, "path_failed") + `"path":"/out","status":"failed","reason":"outside --root"}`},
		{"would_transfer", func(j JSON) {
			j.WouldTransfer([]byte("a b"), rsync.Outcome{Status: rsync.Transferred, Change: ">f+++++++++", Bytes: 100}, 3)
		}, fmt.Sprintf(at, "would_transfer") + `"path":"a b","itemize":">f+++++++++","bytes":100,"chunk":3}`},
		{"deleted, dry run", func(j JSON) { j.Deleted(exec.Deleted{Path: []byte("old\n"), Kind: "file"}, true) }, fmt.Sprintf(at, "deleted") +
			`"path":"old\n","kind":"file","dry_run":true}`},
		{"error", func(j JSON) { j.Error("deletion pass: x") }, fmt.Sprintf(at, "error") + `"error":"deletion pass: x"}`},
		{"control", func(j JSON) { j.ControlChanged("jobs", "8", "2") }, fmt.Sprintf(at, "control") + `"what":"jobs","old":"8","new":"2"}`},
		{"bwlimit, until the next change", func(j JSON) {
			j.BWLimitChanged(bw.Change{Old: bw.Unlimited, New: 20e6, Next: time.Date(2026, 11, 29, 19, 0, 0, 0, time.FixedZone("CET", 3600))})
		}, fmt.Sprintf(at, "bwlimit") + `"old":"off","new":"` + bw.FormatRate(20e6) + `","next":"2026-11-29T18:00:00Z"}`},
		{"bwlimit, off", func(j JSON) { j.BWLimitChanged(bw.Change{Old: 20e6, New: bw.Unlimited, Unlimited: true}) }, fmt.Sprintf(at, "bwlimit") +
			`"old":"` + bw.FormatRate(20e6) + `","new":"off"}`},
		{"throttle, pressure but no own figures", func(j JSON) {
			j.Throttled(throttle.Event{Action: "resume", Sample: throttle.Sample{CPU: 12.04, IOPressure: 2.25, HasIO: true, CPUPressure: 7, HasCPUPressure: true,
				CgroupCPU: 10, CgroupOwn: 5, HasCgroup: true}})
		}, fmt.Sprintf(at, "throttle") +
			`"action":"resume","reason":"","cpu_percent":12,"io_pressure":2.3,"cpu_pressure":7,"cgroup_cpu_percent":10,"chunk":0,"pid":0,"running":0,"suspended":0}`},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		tt.print(encoder(&buf))
		if got := strings.TrimSuffix(buf.String(), "\n"); got != tt.want {
			t.Errorf("%s:\ngot  %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

// run is what a run starts with, with a time window or without (and then no cgroup).
func run(window bool) Run {
	r := Run{Version: "v1.2.3", PID: 4242, Jobs: 4, MaxJobs: 32, JobsAuto: true, Dest: "host::mod/dst", Root: "/src",
		Rsync: "/usr/bin/rsync", RsyncVersion: "3.4.1", RsyncArgs: []string{"-a"}, Null: true,
		ChunkFiles: 1000, ChunkBytes: 1 << 30, ChunkTime: 2500 * time.Millisecond, Shard: 1, Shards: 4, QuickCheck: true,
		Transport: "direct", ControlSocket: "/run/prsync/4242.sock", BWLimit: "20M", Delete: true, Verify: "transferred",
		Policy:           throttle.Policy{Suspend: 80, Resume: 60, MaxLoad: 8, MaxIOPressure: 40, MaxSuspend: 30 * time.Second},
		ThrottleInterval: 500 * time.Millisecond, MaxDurationGrace: 90 * time.Second,
	}
	if window {
		r.MaxDuration = time.Hour
		r.Cgroup = throttle.CgroupInfo{Version: 2, Path: "/user.slice", CPUs: 1.5, Usage: "cpu.stat", PSI: "cgroup"}
	}
	return r
}

// sampleChunk is chunk 3: two paths, 300 bytes.
func sampleChunk() *splitter.Chunk {
	return &splitter.Chunk{ID: 3, Inputs: [][]byte{[]byte("a"), []byte("b")}, Bytes: 300}
}

func TestLine(t *testing.T) {
	mod := func(f func(*Snapshot)) Snapshot {
		s := sample()
		f(&s)
		return s
	}
	tests := []struct {
		name string
		s    Snapshot
		want string
	}{
		// files 506 of 1000 done (100 up to date: a percentage of the paths), 12 s in
		{"everything", sample(),
			"prsync: 506/1000 files  50%  21.00 MB  1.70 MB/s  running 4  queued 300  verified 390 (10 differ)  paused 2 (cpu 91%)  failed 5  0:12  ETA 0:12"},
		{"a plain copy, input still coming: no percentage, no ETA", mod(func(s *Snapshot) {
			s.Verified, s.VerifyFailed, s.Suspended, s.Failed, s.Vanished, s.InputDone = 0, 0, 0, 0, 0, false
		}), "prsync: 501/1000 files  21.00 MB  1.70 MB/s  running 4  queued 300  0:12"},
		{"verified, none differ; not-done paths are not failed ones", mod(func(s *Snapshot) {
			s.VerifyFailed, s.Suspended, s.Failed, s.Vanished = 0, 0, 0, 0
		}), "prsync: 501/1000 files  50%  21.00 MB  1.70 MB/s  running 4  queued 300  verified 390  0:12  ETA 0:12"},
		{"no time yet: no ETA", mod(func(s *Snapshot) { s.Elapsed, s.Verified, s.VerifyFailed, s.Suspended = 0, 0, 0, 0 }),
			"prsync: 506/1000 files  50%  21.00 MB  0 B/s  running 4  queued 300  failed 5  0:00"},
		// a fresh copy (nothing up to date): the part of the bytes, 21 of 50 MB
		{"a fresh copy: of the bytes", mod(func(s *Snapshot) {
			s.UpToDate, s.Transferred, s.Verified, s.VerifyFailed, s.Suspended, s.Failed, s.Vanished, s.NotDone = 0, 506, 0, 0, 0, 0, 0, 0
		}), "prsync: 506/1000 files  42%  21.00 MB  1.70 MB/s  running 4  queued 300  0:12  ETA 0:17"},
		{"more transferred than read: 100%, ETA 0", mod(func(s *Snapshot) {
			s.UpToDate, s.Transferred, s.Bytes, s.Verified, s.VerifyFailed = 0, 500, 1, 0, 0
		}), "prsync: 506/1000 files  100%  21.00 MB  1.70 MB/s  running 4  queued 300  paused 2 (cpu 91%)  failed 5  0:12  ETA 0:00"},
		// the estimate from the first seconds of a long copy said 59:25 for a minute's work
		{"4 s in: no ETA yet", mod(func(s *Snapshot) {
			s.Elapsed, s.Verified, s.VerifyFailed, s.Suspended, s.Failed, s.Vanished = 4, 0, 0, 0, 0, 0
		}), "prsync: 501/1000 files  50%  21.00 MB  5.25 MB/s  running 4  queued 300  0:04"},
		{"1% done: no ETA yet", mod(func(s *Snapshot) {
			s.UpToDate, s.Transferred, s.Failed, s.Vanished, s.NotDone, s.Verified, s.VerifyFailed, s.Suspended = 0, 10, 0, 0, 0, 0, 0, 0
			s.BytesTransferred, s.InFlight = 400e3, 0
		}), "prsync: 10/1000 files  0%  400.00 kB  32.40 kB/s  running 4  queued 300  0:12"},
		{"deleting: its directories, no ETA", deleting(), "prsync: deleting: 40/90 dirs checked  3 deleted  running 1  0:03"},
		{"an hour in", mod(func(s *Snapshot) {
			s.Elapsed, s.Verified, s.VerifyFailed, s.Suspended, s.Failed, s.Vanished = 3725.4, 0, 0, 0, 0, 0
		}),
			"prsync: 501/1000 files  50%  21.00 MB  5.64 kB/s  running 4  queued 300  1:02:05  ETA 1:01:51"},
	}
	for _, tt := range tests {
		if got := Line(tt.s); got != tt.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

func TestSummaryLine(t *testing.T) {
	clean := deleting()
	clean.DirsChecked, clean.Deleted = 0, 0
	tests := []struct {
		name string
		s    Snapshot
		want string
	}{
		{"everything", sample(), "prsync: 1000 files, 20.00 MB, 1.62 MB/s, 12.3 s, 390 verified (3 failed, 2 vanished, 1 not done)"},
		{"deleted", deleting(), "prsync: 13 files, 3.00 kB, 1.00 kB/s, 3.0 s, 3 deleted in 40 dirs"},
		{"clean", clean, "prsync: 13 files, 3.00 kB, 1.00 kB/s, 3.0 s"},
		{"fast", Snapshot{Counts: Counts{Files: 1, BytesTransferred: 5e9}, Live: Live{Elapsed: 10}}, "prsync: 1 files, 5.00 GB, 500.00 MB/s, 10.0 s"},
	}
	for _, tt := range tests {
		if got := SummaryLine(tt.s); got != tt.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

func TestStatusLine(t *testing.T) {
	if got, want := StatusLine(sample()), "prsync: status: 506 files done (6 not ok), 21.00 MB, 1.70 MB/s, running 4, paused 2, queued 300, jobs 6, bwlimit 20M, 0:12"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got, want := StatusLine(deleting()), "prsync: status: 13 files done (0 not ok), 3.00 kB, 1.00 kB/s, running 1, paused 0, queued 0, jobs 8, bwlimit off, 0:03"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestText: the terminal printer redraws one line in place, clears it for the summary,
// and prints nothing when off.
func TestText(t *testing.T) {
	var buf bytes.Buffer
	p := &Text{W: &buf}
	p.Update(sample())
	p.Finish(ended(sample(), end))
	if buf.Len() != 0 {
		t.Errorf("off, it printed %q", buf.String())
	}
	p.On = true
	p.Finish(ended(deleting(), end))
	if want := SummaryLine(deleting()) + "\n"; buf.String() != want {
		t.Errorf("a summary with no line before:\ngot  %q\nwant %q", buf.String(), want)
	}
	buf.Reset()
	p.Update(sample())
	p.Update(deleting())
	p.Finish(ended(deleting(), end))
	want := "\r\033[K" + Line(sample()) + "\r\033[K" + Line(deleting()) + "\r\033[K" + SummaryLine(deleting()) + "\n"
	if buf.String() != want {
		t.Errorf("got  %q\nwant %q", buf.String(), want)
	}
}

func TestControlStatus(t *testing.T) {
	want := control.Status{PID: 4242, Jobs: 6, MaxJobs: 32, JobsAuto: true, Running: 4, Suspended: 2,
		BWLimit: "08:00,20M 19:00,off", BWLimitNow: "20M", FilesDone: 506, BytesDone: 21000000, FilesQueued: 300,
		FilesFailed: 6, InputDone: true, RateBps: 13608087.1, Elapsed: 12.346}
	if got := ControlStatus(sample()); got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	s := deleting()
	s.Paused = true
	want = control.Status{PID: 1, Jobs: 8, MaxJobs: 8, Running: 1, Paused: true, BWLimit: "off", BWLimitNow: "off",
		FilesDone: 13, BytesDone: 3000, InputDone: true, RateBps: 8000, Elapsed: 3}
	if got := ControlStatus(s); got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// TestTextNews: the lines the terminal printer writes on stderr besides the status line:
// the ones said terminal or not, and the ones only beside a progress line, which they
// clear first.
func TestTextNews(t *testing.T) {
	refused := exec.LimitChanged{Old: 8, New: 4, Reason: "refused", Detail: "@ERROR: max connections (4) reached"}
	once := sample() // Refusals: 1
	again := sample()
	again.Refusals = 2
	idle := deleting()
	idle.Running, idle.Suspended = 0, 0
	notice := throttle.Notice{Held: false, For: 12 * time.Second}
	msg, _ := notice.Message()
	tests := []struct {
		name    string
		tell    func(*Text)
		off, on string // printed with On false, and true
	}{
		{"a hint", func(p *Text) { p.Hint("convert it") }, "prsync: hint: convert it\n", "prsync: hint: convert it\n"},
		{"the first refusal", func(p *Text) { p.JobsChanged(refused, once) },
			"prsync: warning: the far side refused a session (@ERROR: max connections (4) reached); prsync runs fewer rsyncs at once, and says at the end how many\n",
			"prsync: warning: the far side refused a session (@ERROR: max connections (4) reached); prsync runs fewer rsyncs at once, and says at the end how many\n"},
		{"a later refusal, a change that is none", func(p *Text) {
			p.JobsChanged(refused, again)
			p.JobsChanged(exec.LimitChanged{Old: 4, New: 5, Reason: "tune"}, once)
		}, "", ""},
		{"the throttle's notice", func(p *Text) { p.ThrottleNotice(notice) }, "prsync: " + msg + "\n", "\r\033[Kprsync: " + msg + "\n"},
		{"the window, nothing running", func(p *Text) { p.WindowEnded("the time window ended (--max-duration 1h)", time.Minute, idle) },
			"prsync: the time window ended (--max-duration 1h): no rsync starts any more\n", "prsync: the time window ended (--max-duration 1h): no rsync starts any more\n"},
		{"a status by signal, and by socket", func(p *Text) { p.Status(sample(), "signal"); p.Status(sample(), "socket") },
			StatusLine(sample()) + "\n", StatusLine(sample()) + "\n"},
		{"a path a dry run would copy", func(p *Text) {
			p.WouldTransfer([]byte("a\nb"), rsync.Outcome{Status: rsync.Transferred, Change: ">f+++++++++"}, 1)
			p.WouldTransfer([]byte("c"), rsync.Outcome{Status: rsync.Transferred}, 1)
		}, "", "\r\033[K>f+++++++++ a\\#012b\n\r\033[K? c\n"},
		{"events only", func(p *Text) {
			p.Started(run(true))
			p.ChunkStarted(exec.ChunkStarted{Chunk: sampleChunk()})
			p.PathFailed(Failure{Input: []byte("a"), Status: rsync.Failed})
			p.ChunkEnded(exec.ChunkEnded{Chunk: sampleChunk()}, ChunkTally{})
			p.Deleted(exec.Deleted{Path: []byte("x")}, false)
			p.Error("x")
			p.Throttled(throttle.Event{Action: "suspend"})
			p.BWLimitChanged(bw.Change{})
			p.ControlChanged("jobs", "1", "2")
		}, "", ""},
	}
	for _, tt := range tests {
		for _, on := range []bool{false, true} {
			var buf bytes.Buffer
			tt.tell(&Text{W: &buf, On: on})
			want := tt.off
			if on {
				want = tt.on
			}
			if buf.String() != want {
				t.Errorf("%s, on %v:\ngot  %q\nwant %q", tt.name, on, buf.String(), want)
			}
		}
	}
	var buf bytes.Buffer // with rsyncs running: until when they may finish
	(&Text{W: &buf}).WindowEnded("the time window ended (--max-duration 1h)", time.Minute, sample())
	if !regexp.MustCompile(`^prsync: the time window ended \(--max-duration 1h\): no rsync starts any more; the 6 running have until \d\d:\d\d:\d\d to finish\n$`).MatchString(buf.String()) {
		t.Errorf("the window, 4 running and 2 paused: %q", buf.String())
	}
}
