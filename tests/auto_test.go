package tests

// -j auto (issue 11) end to end: a real daemon whose max connections caps the total, and
// --bwlimit after -- capping each stream. The tuner starts at the default -j, the daemon refuses the
// fourth session, and the limit settles at the 3 the daemon accepts; everything is copied.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestAutoSettlesAtConnectionLimit(t *testing.T) {
	needRsync(t)
	w := t.TempDir()
	src, mod := filepath.Join(w, "src"), filepath.Join(w, "mod")
	os.MkdirAll(mod, 0o755)
	var names []string
	for i := 0; i < 36; i++ {
		n := fmt.Sprintf("d%d/f%02d", i%4, i)
		writeFile(t, filepath.Join(src, n), strings.Repeat(fmt.Sprint(i%10), 150_000), 0o644)
		names = append(names, n)
	}
	user := ""
	if isRoot() {
		user = "uid = root\ngid = root\n"
	}
	d := startDaemonConf(t, mod, 0, user+"max connections = 3")
	failed := filepath.Join(w, "failed")
	r := start(t, startOpts{stdin: bytes.NewReader(nul(names...))}, "-0", "--root", src, "-j", "auto",
		"--chunk-files", "1", "--failed", failed, "--no-throttle", "--retries", "5", d.URL(), "--", "--bwlimit=150k").wait(3 * time.Minute)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	checkTruth(t, r, src, mod, names, failed, 0)
	if st := r.Events[0]; st["jobs_auto"] != true || num(st, "jobs") != int64(max(runtime.NumCPU(), 8)) {
		t.Errorf("start: jobs_auto %v, jobs %v; want true, the default -j", st["jobs_auto"], st["jobs"])
	}
	// from the default -j, refusals bring the limit down to the 3 the daemon accepts
	all := r.OfType("jobs")
	k := 0
	for k < len(all) && all[k]["reason"] == "refused" && num(all[k], "new") > 3 {
		k++
	}
	if k == len(all) || all[k]["reason"] != "refused" || num(all[k], "new") != 3 {
		t.Fatalf("the first jobs events should be refusals bringing the limit to the 3 the daemon accepts: %v", all)
	}
	jobs := all[k:]
	for _, j := range jobs[1:] {
		if num(j, "new") > 3 {
			t.Errorf("the limit rose above what the daemon accepted: %v", j)
		}
	}
	var over int
	for _, p := range r.OfType("progress") {
		if num(p, "jobs") > 3 && p["time"].(string) > jobs[0]["time"].(string) {
			over++
		}
		// before the first refusal, the first wave runs (on a busy machine a refusal can
		// take a second to come)
		if num(p, "running") > 3 && p["time"].(string) > jobs[0]["time"].(string) {
			t.Errorf("%d rsyncs running at once against a daemon that takes 3, after it refused", num(p, "running"))
		}
	}
	s := r.Summary(t)
	if num(s, "jobs_max") != int64(max(runtime.NumCPU(), 8)) || num(s, "jobs_min") < 1 || num(s, "jobs_min") > 3 {
		t.Errorf("summary jobs range %v..%v", s["jobs_min"], s["jobs_max"])
	}
	last := r.OfType("progress")
	if n := len(last); n > 0 && num(last[n-1], "jobs") != 3 {
		t.Errorf("the limit ended at %v, want 3", last[n-1]["jobs"])
	}
}
