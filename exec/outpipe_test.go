package exec

import (
	"bytes"
	"fmt"
	osexec "os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer that two drain goroutines may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestOutPipes: a child's stdout and stderr arrive whole and in order through the polled
// pipes, however much it writes and however slowly; a grandchild that keeps them open
// holds the wait for grace, no longer; a child that never started ends them at once.
func TestOutPipes(t *testing.T) {
	var big strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&big, "line %d\n", i)
	}
	tests := []struct {
		name        string
		script      string
		wantOut     string
		wantErr     string
		wantDrained bool
		maxWait     time.Duration
	}{
		{"small", `echo one; echo two >&2; echo three`, "one\nthree\n", "two\n", true, time.Second},
		{"more than a buffer at once", `i=0; while [ $i -lt 20000 ]; do echo "line $i"; i=$((i+1)); done`, big.String(), "", true, 30 * time.Second},
		{"slow", `echo a; sleep 0.3; echo b; sleep 0.3; echo c >&2`, "a\nb\n", "c\n", true, 3 * time.Second},
		{"a grandchild holds the pipes", `sleep 30 & echo hi`, "hi\n", "", false, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb syncBuffer
			ps, err := newOutPipes(&out, &errb)
			if err != nil {
				t.Fatal(err)
			}
			cmd := osexec.Command("/bin/sh", "-c", tt.script)
			cmd.Stdout, cmd.Stderr = ps.out.w, ps.err.w
			setProcAttr(cmd)
			err = cmd.Start()
			ps.started()
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			cmd.Wait()
			drained := ps.wait(500 * time.Millisecond)
			if d := time.Since(t0); d > tt.maxWait {
				t.Errorf("took %v", d)
			}
			killGroup(cmd.Process.Pid)
			if drained != tt.wantDrained {
				t.Errorf("drained %v, want %v", drained, tt.wantDrained)
			}
			if got := out.String(); got != tt.wantOut {
				t.Errorf("stdout: %d bytes, want %d (%.60q)", len(got), len(tt.wantOut), got)
			}
			if got := errb.String(); got != tt.wantErr {
				t.Errorf("stderr %q, want %q", got, tt.wantErr)
			}
		})
	}
	t.Run("never started", func(t *testing.T) {
		var out, errb syncBuffer
		ps, err := newOutPipes(&out, &errb)
		if err != nil {
			t.Fatal(err)
		}
		cmd := osexec.Command("/nonexistent/rsync")
		cmd.Stdout, cmd.Stderr = ps.out.w, ps.err.w
		if err := cmd.Start(); err == nil {
			t.Fatal("started")
		}
		ps.started()
		t0 := time.Now()
		if !ps.wait(5 * time.Second) {
			t.Error("not drained")
		}
		if d := time.Since(t0); d > time.Second {
			t.Errorf("took %v", d)
		}
	})
}

// TestAligned: a nap ends on the next multiple of its length since the epoch, so that
// pipes napping as long wake together; never at once, never later than one nap.
func TestAligned(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		since, d, want time.Duration
	}{
		{0, 25 * ms, 25 * ms},
		{7 * ms, 25 * ms, 18 * ms},
		{25 * ms, 25 * ms, 25 * ms},
		{24*ms + 999*time.Microsecond, 25 * ms, time.Microsecond},
		{1030 * ms, 100 * ms, 70 * ms},
		{1030 * ms, 10 * ms, 10 * ms},
		{5 * ms, 0, 0},
	}
	for _, tt := range tests {
		if got := aligned(epoch.Add(tt.since), tt.d); got != tt.want {
			t.Errorf("aligned(epoch+%v, %v) = %v, want %v", tt.since, tt.d, got, tt.want)
		}
	}
}
