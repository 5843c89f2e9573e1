package event

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestGolden pins the exact bytes of every event type: the schema is a public contract.
func TestGolden(t *testing.T) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	enc.Now = func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.FixedZone("x", 3600)) }
	load, psi, own := 3.5, 12.25, 40.5
	p, b64 := PathFields([]byte("dir/bad\xffname"))
	events := []Event{
		&Start{Version: "v1.0.0", Schema: Schema, PID: 42, Jobs: 4, Dest: "backup/", Root: "/var/lib",
			Rsync: "/usr/bin/rsync", RsyncVersion: "3.5.0", RsyncArgs: []string{"--archive"}, Null: true,
			ChunkFiles: 2000, ChunkBytes: 1 << 30, Shard: 1, Shards: 4, Transport: "pipe",
			SuspendThreshold: 80, ResumeThreshold: 60, MaxLoad: 8, ThrottleInterval: 1},
		&ChunkStart{Chunk: 1, Attempt: 1, Files: 3, Bytes: 3000, PID: 1234},
		&ChunkEnd{Chunk: 1, Attempt: 1, Files: 3, Bytes: 3000, FilesTransferred: 2, BytesTransferred: 2000,
			FilesVanished: 1, Seconds: 0.5, ExitCode: 24, Status: "vanished", Error: "file has vanished: \"/var/lib/./x\"\n"},
		&ChunkEnd{Chunk: 2, Attempt: 1, Files: 1, ExitCode: 10, Status: "retrying", Error: "connection refused", Hint: "check the daemon"},
		&ChunkEnd{Chunk: 3, Attempt: 1, Files: 2, Bytes: 10, FilesTransferred: 1, BytesTransferred: 5, FilesFailed: 1, Seconds: 0.25,
			ExitCode: 23, Status: "partial", Error: "rsync: [receiver] mkstemp …", ConfirmedBy: "lstat", ConfirmPaths: 2, ConfirmLanded: 1, ConfirmSeconds: 0.001},
		&Jobs{Old: 8, New: 2, Reason: "refused", Detail: "@ERROR: max connections (2) reached -- try again later", RateBps: 1e6},
		&Throttle{Action: "suspend", Reason: "cpu", CPU: CPU{CPUPercent: 91.5, OwnCPUPercent: &own}, Load: &load, IOPressure: &psi, Chunk: 2, PID: 1235, Running: 1, Suspended: 1},
		&Progress{FilesDone: 10, BytesDone: 1000, FilesQueued: 5, InputDone: true, RateBps: 8000, CPU: CPU{CPUPercent: 50}, Running: 2, Elapsed: 1.5, Jobs: 8, Phase: "copy"},
		&PathFailed{Path: p, PathB64: b64, Status: "failed", Reason: "lstat: permission denied", Chunk: 0},
		&PathFailed{Path: "<html>&", Status: "vanished", Reason: "x", Chunk: 3},
		&Error{Error: "read input: input/output error"},
		&WouldTransfer{Path: "dir/new file", Itemize: ">f+++++++++", Bytes: 3000, Chunk: 5},
		&WouldTransfer{Path: p, PathB64: b64, Itemize: "cd+++++++++", Chunk: 5},
		&ChunkEnd{Chunk: 4, Attempt: 1, Files: 2, Bytes: 20, FilesFailed: 1, Seconds: 0.3, Status: "partial",
			VerifyPaths: 2, VerifyFailed: 1, VerifySeconds: 0.1},
		&Progress{FilesDone: 13, InputDone: true, Running: 1, Elapsed: 3, Jobs: 8, Phase: "delete", FilesVerified: 12, FilesVerifyFailed: 1, DirsChecked: 40, FilesDeleted: 3},
		&Deleted{Path: "old/dir", Kind: "dir"},
		&Deleted{Path: p, PathB64: b64, Kind: "file", DryRun: true},
		&Summary{Files: 13, Bytes: 4000, FilesTransferred: 10, BytesTransferred: 3000, FilesUpToDate: 1,
			FilesFailed: 1, FilesVanished: 1, Chunks: 2, ChunksFailed: 1, Retries: 1, Suspensions: 2,
			SecondsSuspended: 1.25, Seconds: 3.5, RateBps: 6857.1, CPUSeconds: 0.05, RsyncCPUSeconds: 2.5, ExitCode: 23, Shard: 1, Shards: 4,
			InputComplete: true, ChunkErrors: 1, ConfirmSeconds: 0.002, JobsMin: 2, JobsMax: 8,
			FilesVerified: 12, FilesVerifyFailed: 1, VerifySeconds: 0.4, FilesDeleted: 3, DeletePass: "ran", DeleteDirs: 40, DeleteSeconds: 0.25},
	}
	for _, ev := range events {
		enc.Emit(ev)
	}
	if err := enc.Err(); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "events.golden.jsonl")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("events differ from %s (run go test ./event -update after a deliberate change)\ngot:\n%s\nwant:\n%s", golden, buf.Bytes(), want)
	}
}

func TestPathFields(t *testing.T) {
	if p, b := PathFields([]byte("ok/path")); p != "ok/path" || b != "" {
		t.Errorf("valid UTF-8: %q %q", p, b)
	}
	if _, b := PathFields([]byte("a\xffb")); b != "Yf9i" {
		t.Errorf("invalid UTF-8: b64 %q", b)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

func TestWriteErrorSticks(t *testing.T) {
	enc := NewEncoder(failWriter{})
	enc.Emit(&Error{Error: "x"})
	enc.Emit(&Error{Error: "y"})
	if enc.Err() == nil {
		t.Fatal("no error after a failed write")
	}
}

// TestCPUFieldOrder: the embedded CPU and CgroupCPU keep every field where it stood in
// the throttle and progress events (the golden file leaves the cgroup ones out).
func TestCPUFieldOrder(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	cpu, cg := CPU{1, f(2), f(3)}, CgroupCPU{f(7), f(8)}
	tests := []struct {
		ev   any
		want string
	}{
		{&Throttle{Action: "suspend", Reason: "cpu", CPU: cpu, Load: f(4), IOPressure: f(5), CPUPressure: f(6), CgroupCPU: cg, Chunk: 9, PID: 10, Running: 11, Suspended: 12},
			`{"type":"","time":"","action":"suspend","reason":"cpu","cpu_percent":1,"own_cpu_percent":2,"kernel_cpu_percent":3,"load":4,"io_pressure":5,"cpu_pressure":6,"cgroup_cpu_percent":7,"cgroup_own_cpu_percent":8,"chunk":9,"pid":10,"running":11,"suspended":12}`},
		{&Progress{FilesDone: 1, RateBps: 4, CPU: cpu, CgroupCPU: cg, Running: 10, Elapsed: 12, Phase: "copy"},
			`{"type":"","time":"","files_done":1,"bytes_done":0,"files_queued":0,"input_done":false,"rate_bps":4,"cpu_percent":1,"own_cpu_percent":2,"kernel_cpu_percent":3,"cgroup_cpu_percent":7,"cgroup_own_cpu_percent":8,"running":10,"suspended":0,"elapsed":12,"jobs":0,"phase":"copy"}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.ev)
		if err != nil || string(got) != tt.want {
			t.Errorf("%T:\ngot  %s (%v)\nwant %s", tt.ev, got, err, tt.want)
		}
	}
}
