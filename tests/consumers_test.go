package tests

// The metrics file as its real consumers read it: Debian's prometheus-node-exporter scrapes
// it through its textfile collector while a copy runs and after it has ended, and promtool
// (Debian's prometheus) checks it. The events' consumer, jq, is run by TestReadme (README's
// jq example) and by the shard tests (docs/scale-out.md's recipe).

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMetricsNodeExporter(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	exporter, promtool := consumerNeed(t, "prometheus-node-exporter", "prometheus-node-exporter"), consumerNeed(t, "promtool", "prometheus")
	w := t.TempDir()
	src, dst, textdir := filepath.Join(w, "src"), filepath.Join(w, "dst"), filepath.Join(w, "textfile")
	if err := os.Mkdir(textdir, 0o755); err != nil {
		t.Fatal(err)
	}
	// 1 MiB at 256 KiB/s: about 4 s of copying to look at
	writeFile(t, filepath.Join(src, "big"), strings.Repeat("0123456789abcdef", 1<<16), 0o644)
	var names []string
	for i := 0; i < 5; i++ {
		n := fmt.Sprintf("small/%d", i)
		writeFile(t, filepath.Join(src, n), strings.Repeat("x", 100*i), 0o644)
		names = append(names, n)
	}
	names = append(names, "big")

	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	startChildDaemon(t, "node-exporter", cleanEnv(), filepath.Join(w, "exporter.log"), exporter,
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory="+textdir)
	scrape := func() string {
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// waitFor scrapes until want holds (node_exporter writes 1049576 as 1.049576e+06: the
	// values are compared as numbers), and returns the scrape
	waitFor := func(what string, d time.Duration, want func(m map[string]float64) bool) (map[string]float64, string) {
		t.Helper()
		deadline := time.Now().Add(d)
		var s string
		for time.Now().Before(deadline) {
			if s = scrape(); s != "" {
				if m := parseExposition(s); want(m) {
					return m, s
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		log, _ := os.ReadFile(filepath.Join(w, "exporter.log"))
		t.Fatalf("%s: node exporter's /metrics never showed it within %v:\n%s\nits log:\n%s", what, d, s, log)
		return nil, ""
	}
	ok := func(m map[string]float64) bool {
		v, has := m["node_textfile_scrape_error"]
		return has && v == 0
	}
	waitFor("start", 30*time.Second, ok)

	mf := filepath.Join(textdir, "prsync.prom")
	p := start(t, startOpts{stdin: bytes.NewReader(nul(names...))}, "-0", "--root", src, "-j", "2",
		"--chunk-files", "1", "--throttle-interval", "100ms", "--no-throttle", "--metrics-file", mf, dst, "--", "--bwlimit=256")
	m, mid := waitFor("mid-run", time.Minute, func(m map[string]float64) bool {
		return ok(m) && m["prsync_up"] == 1 && m[`prsync_rsyncs{state="running"}`] >= 1 && m["prsync_input_done"] == 1
	})
	select {
	case <-p.readDone:
		t.Fatalf("the run had ended when the scrape saw it running:\n%s", mid)
	default:
	}
	for name, want := range map[string]float64{"prsync_exit_code": -1, "prsync_jobs_limit": 2, "prsync_files_read_total": 6,
		"prsync_bytes_read_total": 1<<20 + 1000, `prsync_rsyncs{state="paused"}`: 0} {
		if v, has := m[name]; !has || v != want {
			t.Errorf("mid-run: %s is %v (%v), want %v", name, v, has, want)
		}
	}
	if _, has := m["prsync_rate_bytes_per_second"]; !has || m[`prsync_files_total{status="transferred"}`] >= 6 {
		t.Errorf("mid-run: no rate, or every file already transferred:\n%s", mid)
	}
	r := p.wait(2 * time.Minute)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	checkIdentity(t, r.Summary(t), 6)
	sameTree(t, src, dst)
	waitFor("end", 30*time.Second, func(m map[string]float64) bool {
		return ok(m) && m["prsync_up"] == 0 && m["prsync_exit_code"] == 0 && m[`prsync_files_total{status="transferred"}`] == 6 &&
			m[`prsync_rsyncs{state="running"}`] == 0 && m["prsync_bytes_transferred_total"] == 1<<20+1000
	})

	f, err := os.Open(mf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = f
	if out, err := check.CombinedOutput(); err != nil {
		b, _ := os.ReadFile(mf)
		t.Errorf("promtool check metrics: %v\n%s\nthe file:\n%s", err, out, b)
	}
}

// parseExposition returns the samples of a Prometheus text exposition by their name and
// labels, as written (name{label="value",…}).
func parseExposition(s string) map[string]float64 {
	m := map[string]float64{}
	for _, l := range strings.Split(s, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			m[l[:i]] = v
		}
	}
	return m
}

// consumerNeed returns the path of prog, or skips the test (fails under
// PRSYNC_TEST_INSTALL, where scripts/test.sh installs pkg).
func consumerNeed(t *testing.T, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		if os.Getenv("PRSYNC_TEST_INSTALL") != "" {
			t.Fatalf("%s is not installed, though scripts/test.sh installs %s", prog, pkg)
		}
		t.Skipf("%s is not installed (Debian's %s)", prog, pkg)
	}
	return p
}
