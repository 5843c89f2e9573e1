package tests

// The metrics file as its real consumers read it: Debian's prometheus-node-exporter scrapes
// it through its textfile collector while a copy runs and after it has ended, and promtool
// (Debian's prometheus) checks it. The events' consumer, jq, is run by TestReadme (README's
// jq example) and by the shard tests (docs/scale-out.md's recipe).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMetricsNodeExporter(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	exporter, promtool := needProg(t, "prometheus-node-exporter", "prometheus-node-exporter"), needProg(t, "promtool", "prometheus")
	w := newWork(t)
	src, dst, textdir := w.Src, w.Dst, filepath.Join(w.Dir, "textfile")
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
	startChildDaemon(t, "node-exporter", cleanEnv(), filepath.Join(w.Dir, "exporter.log"), exporter,
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
		log, _ := os.ReadFile(filepath.Join(w.Dir, "exporter.log"))
		t.Fatalf("%s: node exporter's /metrics never showed it within %v:\n%s\nits log:\n%s", what, d, s, log)
		return nil, ""
	}
	ok := func(m map[string]float64) bool {
		v, has := m["node_textfile_scrape_error"]
		return has && v == 0
	}
	waitFor("start", 30*time.Second, ok)

	// the series carry dest, DEST's absolute path (no --metrics-label given)
	k := func(name string, label ...string) string {
		return name + "{" + strings.Join(append([]string{fmt.Sprintf("dest=%q", dst)}, label...), ",") + "}"
	}
	mf := filepath.Join(textdir, "prsync.prom")
	p := start(t, startOpts{in: nul(names...)}, "-0", "--root", src, "-j", "2",
		"--chunk-files", "1", "--throttle-interval", "100ms", "--no-throttle", "--metrics-file", mf, dst, "--", "--bwlimit=256")
	m, mid := waitFor("mid-run", time.Minute, func(m map[string]float64) bool {
		return ok(m) && m[k("prsync_up")] == 1 && m[k("prsync_rsyncs", `state="running"`)] >= 1 && m[k("prsync_input_done")] == 1
	})
	if p.ended() {
		t.Fatalf("the run had ended when the scrape saw it running:\n%s", mid)
	}
	for name, want := range map[string]float64{k("prsync_exit_code"): -1, k("prsync_jobs_limit"): 2, k("prsync_files_read_total"): 6,
		k("prsync_bytes_read_total"): 1<<20 + 1000, k("prsync_rsyncs", `state="paused"`): 0} {
		if v, has := m[name]; !has || v != want {
			t.Errorf("mid-run: %s is %v (%v), want %v", name, v, has, want)
		}
	}
	if _, has := m[k("prsync_rate_bytes_per_second")]; !has || m[k("prsync_files_total", `status="transferred"`)] >= 6 {
		t.Errorf("mid-run: no rate, or every file already transferred:\n%s", mid)
	}
	r := p.wait(2 * time.Minute)
	r.Exit(t, 0)
	r.Identity(t, 6)
	sameTree(t, src, dst)
	waitFor("end", 30*time.Second, func(m map[string]float64) bool {
		return ok(m) && m[k("prsync_up")] == 0 && m[k("prsync_exit_code")] == 0 && m[k("prsync_files_total", `status="transferred"`)] == 6 &&
			m[k("prsync_rsyncs", `state="running"`)] == 0 && m[k("prsync_bytes_transferred_total")] == 1<<20+1000
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

// TestMetricsNodeExporterTwoRuns: the metrics files of four runs in one textfile directory,
// as cron jobs write them: two into two DESTs, and the two shards (--shard 0/2, 1/2) of one
// list into a third, side by side. node_exporter serves the series of all four files, told
// apart by their labels (dest, and shard), with node_textfile_scrape_error 0 and no
// "collected before with the same name and label values" in its log (without labels it
// served one file's series and logged 18 such errors per scrape); promtool check metrics
// passes on each file.
func TestMetricsNodeExporterTwoRuns(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	exporter, promtool := needProg(t, "prometheus-node-exporter", "prometheus-node-exporter"), needProg(t, "promtool", "prometheus")
	w := t.TempDir()
	src, textdir := filepath.Join(w, "src"), filepath.Join(w, "textfile")
	if err := os.Mkdir(textdir, 0o755); err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := 0; i < 12; i++ {
		n := fmt.Sprintf("d%d/f%02d", i%3, i)
		writeFile(t, filepath.Join(src, n), strings.Repeat("x", 100*i), 0o644)
		names = append(names, n)
	}
	port := freePort(t)
	log := filepath.Join(w, "exporter.log")
	startChildDaemon(t, "node-exporter", cleanEnv(), log, exporter,
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory="+textdir)

	type job struct {
		file, dest string
		args       []string
		labels     string // of its series, as node_exporter writes them
		files      float64
	}
	dst := func(n int) string { return filepath.Join(w, fmt.Sprintf("dst%d", n)) }
	jobs := []job{
		{file: "a.prom", dest: dst(1), labels: fmt.Sprintf("dest=%q", dst(1)), files: 12},
		{file: "b.prom", dest: dst(2), labels: fmt.Sprintf("dest=%q", dst(2)), files: 12},
		{file: "c.prom", dest: dst(3), args: []string{"--shard", "0/2"}, labels: fmt.Sprintf("dest=%q,shard=\"0/2\"", dst(3))},
		{file: "d.prom", dest: dst(3), args: []string{"--shard", "1/2"}, labels: fmt.Sprintf("dest=%q,shard=\"1/2\"", dst(3))},
	}
	procs := make([]*proc, len(jobs))
	for i, j := range jobs {
		args := append([]string{"-0", "--root", src, "--no-throttle", "--metrics-file", filepath.Join(textdir, j.file)}, j.args...)
		procs[i] = start(t, startOpts{in: nul(names...)}, append(args, j.dest)...)
	}
	var shardFiles float64
	for i, p := range procs {
		r := p.wait(2 * time.Minute)
		if r.Code != 0 {
			t.Fatalf("%s: exit %d\n%s", jobs[i].file, r.Code, r.Stderr)
		}
		s := r.Identity(t, -1)
		if jobs[i].files == 0 {
			jobs[i].files = float64(num(s, "files"))
			shardFiles += jobs[i].files
		}
	}
	if shardFiles != 12 {
		t.Fatalf("the two shards read %v paths, want 12 together", shardFiles)
	}
	for n := 1; n <= 3; n++ {
		sameTree(t, src, dst(n))
	}

	var m map[string]float64
	var scrape string
	deadline := time.Now().Add(30 * time.Second)
	for {
		scrape = ""
		c := http.Client{Timeout: 5 * time.Second}
		if resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port)); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			scrape = string(b)
		}
		m = parseExposition(scrape)
		if _, ok := m["node_textfile_scrape_error"]; ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v, ok := m["node_textfile_scrape_error"]; !ok || v != 0 {
		t.Errorf("node_textfile_scrape_error %v (%v), want 0", v, ok)
	}
	for _, j := range jobs {
		if _, ok := m[fmt.Sprintf("node_textfile_mtime_seconds{file=%q}", filepath.Join(textdir, j.file))]; !ok {
			t.Errorf("node_exporter did not read %s", j.file)
		}
		for name, want := range map[string]float64{
			"prsync_up{" + j.labels + "}": 0, "prsync_exit_code{" + j.labels + "}": 0,
			"prsync_files_read_total{" + j.labels + "}":                 j.files,
			"prsync_files_total{" + j.labels + `,status="transferred"}`: j.files,
			"prsync_rsyncs{" + j.labels + `,state="running"}`:           0,
			"prsync_update_interval_seconds{" + j.labels + "}":          1,
		} {
			if v, ok := m[name]; !ok || v != want {
				t.Errorf("%s: %s is %v (served: %v), want %v", j.file, name, v, ok, want)
			}
		}
		if v := m["prsync_last_update_timestamp_seconds{"+j.labels+"}"]; v < float64(time.Now().Add(-5*time.Minute).Unix()) {
			t.Errorf("%s: prsync_last_update_timestamp_seconds %v, not a time of this run", j.file, v)
		}
		check := exec.Command(promtool, "check", "metrics")
		check.Stdin = bytes.NewReader(mustRead(t, filepath.Join(textdir, j.file)))
		if out, err := check.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics %s: %v\n%s", j.file, err, out)
		}
	}
	if t.Failed() {
		t.Logf("the scrape:\n%s", scrape)
	}
	if b, _ := os.ReadFile(log); bytes.Contains(b, []byte("collected before")) || bytes.Contains(b, []byte("level=error")) {
		t.Errorf("node_exporter logged errors:\n%s", b)
	}
}

// TestMetricsStallAlert runs README's stall alert (the yaml block of its Metrics section)
// with promtool test rules over the metrics file of a prsync killed with SIGKILL mid-copy,
// which never wrote its last state (prsync_up stays 1, the input was read to its end): as
// node_exporter keeps serving that file, the alert fires once the file is older than the
// rule allows, for 10 minutes. For a run that still writes its file (its
// prsync_last_update_timestamp_seconds moves with every scrape, its rate 0 between two
// files), and for one that ended (prsync_up 0), it does not. The killed run's values go
// in as the file holds them, its clock moved so that it was killed at promtool's time 0.
func TestMetricsStallAlert(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	promtool := needProg(t, "promtool", "prometheus")
	rule := readmeAlert(t)
	w := t.TempDir()
	src, dst, mf := filepath.Join(w, "src"), filepath.Join(w, "dst"), filepath.Join(w, "prsync.prom")
	// 1 MiB at 64 KiB/s: 16 s of copying, in which prsync is killed
	writeFile(t, filepath.Join(src, "big"), strings.Repeat("0123456789abcdef", 1<<16), 0o644)
	p := start(t, startOpts{in: nul("big")}, "-0", "--root", src, "--transport", "direct", "--no-throttle",
		"--throttle-interval", "100ms", "--metrics-file", mf, dst, "--", "--bwlimit=64")
	cs := p.mustWaitFor("chunk_start", time.Minute, is("chunk_start"))
	t.Cleanup(func() { syscall.Kill(-int(num(cs, "pid")), syscall.SIGKILL) }) // the rsyncs outlive a killed prsync
	var samples map[string]float64
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := os.ReadFile(mf)
		samples = parseExposition(string(b))
		l := fmt.Sprintf("{dest=%q}", dst)
		if samples["prsync_up"+l] == 1 && samples["prsync_input_done"+l] == 1 && samples[`prsync_rsyncs{dest=`+strconv.Quote(dst)+`,state="running"}`] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics file never showed the copy running with its input read:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.signal(syscall.SIGKILL)
	p.wait(time.Minute)
	if err := syscall.Kill(-int(num(cs, "pid")), syscall.SIGKILL); err != nil {
		t.Logf("kill the rsync group: %v", err)
	}
	noProcsLeft(t, dst)
	b, err := os.ReadFile(mf)
	if err != nil {
		t.Fatal(err)
	}
	left := parseExposition(string(b))
	killedAt := 0.0
	for s, v := range left {
		if strings.HasPrefix(s, "prsync_last_update_timestamp_seconds{") {
			killedAt = v
		}
	}
	if killedAt == 0 || left[fmt.Sprintf("prsync_up{dest=%q}", dst)] != 1 {
		t.Fatalf("the killed run's file has no last update, or does not say prsync_up 1:\n%s", b)
	}

	// the input series, one sample a minute for 30 minutes, as node_exporter serves them
	// (with the instance and job labels of the scrape)
	type series struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	var in []series
	withLabels := func(s, more string) string {
		name, labels, _ := strings.Cut(strings.TrimSuffix(s, "}"), "{")
		return name + "{" + labels + "," + more + "}"
	}
	const killed, live, ended = `instance="killed:9100",job="node"`, `instance="live:9100",job="node"`, `instance="ended:9100",job="node"`
	for s, v := range left {
		if !strings.HasPrefix(s, "prsync_") {
			continue
		}
		if strings.HasPrefix(s, "prsync_last_update_timestamp_seconds{") {
			v -= killedAt // killed at promtool's time 0
		}
		in = append(in, series{withLabels(s, killed), fmt.Sprintf("%vx30", v)})
	}
	d := fmt.Sprintf("dest=%q", dst)
	in = append(in,
		series{"prsync_up{" + d + "," + live + "}", "1x30"},
		series{"prsync_input_done{" + d + "," + live + "}", "0x30"},
		series{"prsync_rate_bytes_per_second{" + d + "," + live + "}", "0 65536 0 65536 0 65536 0 65536 0 65536 0 65536 0 65536 0 65536 0 65536 0 65536 0 65536 0 65536 0 65536 0 65536 0 65536 0"},
		series{"prsync_update_interval_seconds{" + d + "," + live + "}", "0.1x30"},
		series{"prsync_last_update_timestamp_seconds{" + d + "," + live + "}", "0+60x30"}, // written just before each scrape
		series{"prsync_up{" + d + "," + ended + "}", "0x30"},
		series{"prsync_input_done{" + d + "," + ended + "}", "1x30"},
		series{"prsync_rate_bytes_per_second{" + d + "," + ended + "}", "0x30"},
		series{"prsync_update_interval_seconds{" + d + "," + ended + "}", "0.1x30"},
		series{"prsync_last_update_timestamp_seconds{" + d + "," + ended + "}", "0x30"},
	)
	annotations := map[string]string{}
	for k, v := range rule.annotations {
		annotations[k] = strings.ReplaceAll(v, "{{ $labels.instance }}", "killed:9100")
	}
	type alert struct {
		Labels      map[string]string `json:"exp_labels"`
		Annotations map[string]string `json:"exp_annotations"`
	}
	type alertTest struct {
		EvalTime  string  `json:"eval_time"`
		AlertName string  `json:"alertname"`
		Alerts    []alert `json:"exp_alerts"`
	}
	fired := []alert{{Labels: map[string]string{"dest": dst, "instance": "killed:9100", "job": "node"}, Annotations: annotations}}
	test := map[string]any{
		"rule_files":          []string{"rules.yml"},
		"evaluation_interval": "1m",
		"tests": []map[string]any{{
			"interval":     "1m",
			"input_series": in,
			"alert_rule_test": []alertTest{
				{EvalTime: "5m", AlertName: rule.name, Alerts: []alert{}},
				{EvalTime: "25m", AlertName: rule.name, Alerts: fired},
			},
		}},
	}
	tb, err := json.MarshalIndent(test, "", "  ") // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	rules := "groups:\n- name: prsync\n  rules:\n" + indent(rule.yaml, "  ")
	if err := os.WriteFile(filepath.Join(w, "rules.yml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w, "test.yml"), tb, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "test.yml")
	cmd.Dir = w
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s\nthe rule:\n%s\nthe killed run's file:\n%s", err, out, rules, b)
	}
}

// readmeRule is README's stall alert: its yaml, name and annotations.
type readmeRule struct {
	yaml, name  string
	annotations map[string]string
}

// readmeAlert returns the first yaml block of README.md's Metrics section: the stall
// alert, a list of one rule with a name and one-line annotations.
func readmeAlert(t *testing.T) readmeRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## Metrics\n")
	j := strings.Index(s[i+1:], "\n## ")
	sec := s[i : i+1+j]
	k := strings.Index(sec, "```yaml\n")
	if i < 0 || j < 0 || k < 0 {
		t.Fatal("README.md's Metrics section has no yaml block")
	}
	y := sec[k+len("```yaml\n"):]
	y = y[:strings.Index(y, "```")]
	r := readmeRule{yaml: y, annotations: map[string]string{}}
	inAnn := false
	for _, l := range strings.Split(y, "\n") {
		switch {
		case strings.HasPrefix(l, "- alert: "):
			r.name = strings.TrimPrefix(l, "- alert: ")
		case l == "  annotations:":
			inAnn = true
		case inAnn && strings.HasPrefix(l, "    "):
			k, v, _ := strings.Cut(strings.TrimSpace(l), ": ")
			if uq, err := strconv.Unquote(v); err == nil {
				v = uq
			}
			r.annotations[k] = v
		default:
			inAnn = false
		}
	}
	if r.name == "" {
		t.Fatalf("README's alert has no name:\n%s", y)
	}
	return r
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = by + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
