package tests

// Scale-out (issue 6): --shard K/N, --from FILE, and hard links across shards and chunks.
// Helpers here are prefixed "scale" so they do not collide with other files of the package.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prsync/prsync/splitter"
)

// scaleTree writes n regular files under src: odd names first, then files of varied sizes
// spread over nested directories. It returns the NUL-separated list of their absolute paths.
func scaleTree(t *testing.T, src string, n int) (list []byte, paths []string) {
	t.Helper()
	for i := 0; i < n; i++ {
		var rel string
		if i < len(oddNames) {
			rel = filepath.Join("odd", oddNames[i])
		} else {
			rel = filepath.Join(fmt.Sprintf("d%d", i%9), fmt.Sprintf("s%d", i%4), fmt.Sprintf("file-%03d.dat", i))
		}
		writeFile(t, filepath.Join(src, rel), strings.Repeat(fmt.Sprintf("%d:", i), 1+i*7%300), os.FileMode(0o600+i%3*0o40))
		paths = append(paths, filepath.Join(src, rel))
	}
	return nul(paths...), paths
}

// scaleWant says which of the paths shard k of n takes: the documented hash of the record bytes.
func scaleWant(paths []string, k, n int) map[string]bool {
	m := map[string]bool{}
	for _, p := range paths {
		if splitter.Shard([]byte(p), n) == k {
			m[p] = true
		}
	}
	return m
}

// scaleFiles returns the regular files under dir, relative, with their contents.
func scaleFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for rel, v := range snapshot(t, dir) {
		if strings.HasPrefix(v, "file ") {
			out[rel] = v
		}
	}
	return out
}

// scaleShards runs the n shards of one copy at once, each prsync ARGS --shard K/n
// dest(K), to their ends (the args after "--" go after DEST): shard onStdin reads list on
// stdin, the others --from lf (every one, when onStdin is -1).
func scaleShards(t *testing.T, n, onStdin int, list []byte, lf string, dest func(k int) string, args ...string) []*Run {
	t.Helper()
	cut := len(args)
	if i := slices.Index(args, "--"); i >= 0 {
		cut = i
	}
	var procs []*proc
	for k := 0; k < n; k++ {
		a := append(append([]string(nil), args[:cut]...), "--shard", fmt.Sprintf("%d/%d", k, n))
		o := startOpts{in: list}
		if k != onStdin {
			a, o = append(a, "--from", lf), startOpts{}
		}
		procs = append(procs, start(t, o, append(append(a, dest(k)), args[cut:]...)...))
	}
	var runs []*Run
	for _, p := range procs {
		runs = append(runs, p.wait(5*time.Minute))
	}
	return runs
}

func checkShardFields(t *testing.T, r *Run, k, n int) {
	t.Helper()
	for _, typ := range []string{"start", "summary"} {
		evs := r.OfType(typ)
		if len(evs) != 1 {
			t.Errorf("shard %d/%d: %d %s events, want 1", k, n, len(evs), typ)
			continue
		}
		if _, ok := evs[0]["shard"]; !ok {
			t.Errorf("shard %d/%d: %s event has no shard field: %v", k, n, typ, evs[0])
		}
		if num(evs[0], "shard") != int64(k) || num(evs[0], "shards") != int64(n) {
			t.Errorf("%s event: shard %v shards %v, want %d and %d", typ, evs[0]["shard"], evs[0]["shards"], k, n)
		}
	}
}

// Three shards at the same time, into separate destinations: each path copied exactly once.
func TestShardThreeSeparate(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	list, paths := scaleTree(t, w.Src, 300)
	dest := func(k int) string { return filepath.Join(w.Dir, fmt.Sprintf("dest%d", k)) }
	// shard 1 reads stdin, the others --from
	runs := scaleShards(t, 3, 1, list, writeList(t, w.Dir, list), dest, "-0", "--root", w.Src, "-j", "4", "--chunk-files", "16", "--no-throttle")
	srcFiles := scaleFiles(t, w.Src)
	seen := map[string]int{}
	var total int64
	for k, r := range runs {
		r.Exit(t, 0)
		want := scaleWant(paths, k, 3)
		s := r.Identity(t, len(want))
		checkShardFields(t, r, k, 3)
		r.Counts(t, map[string]int64{"files_transferred": int64(len(want))})
		total += num(s, "files")
		got := scaleFiles(t, dest(k))
		for rel, v := range got {
			seen[rel]++
			if !want[filepath.Join(w.Src, rel)] {
				t.Errorf("shard %d/3 copied %q, which hashes to shard %d", k, rel, splitter.Shard([]byte(filepath.Join(w.Src, rel)), 3))
			}
			if srcFiles[rel] != v {
				t.Errorf("shard %d/3: %q differs from the source", k, rel)
			}
		}
		if len(got) != len(want) {
			t.Errorf("shard %d/3: %d files in its destination, want %d", k, len(got), len(want))
		}
	}
	if total != 300 {
		t.Errorf("summaries add up to %d files, want 300", total)
	}
	for rel := range srcFiles {
		if seen[rel] != 1 {
			t.Errorf("%q copied %d times, want exactly once", rel, seen[rel])
		}
	}
	if len(seen) != len(srcFiles) {
		t.Errorf("union has %d files, source %d", len(seen), len(srcFiles))
	}
	noProcsLeft(t, w.Dir)
}

// jqTotals is the merge recipe of docs/scale-out.md; the test runs it on real logs, so the
// doc must carry it verbatim.
const jqTotals = `jq -s '[.[] | select(.type == "summary")] | {
    tasks: length,
    shards: (map(.shard) | sort),
    files: (map(.files) | add),
    bytes: (map(.bytes) | add),
    files_transferred: (map(.files_transferred) | add),
    files_up_to_date: (map(.files_up_to_date) | add),
    files_failed: (map(.files_failed) | add),
    files_vanished: (map(.files_vanished) | add),
    files_not_done: (map(.files_not_done) | add),
    bytes_transferred: (map(.bytes_transferred) | add),
    exit_code: (map(.exit_code) | max)
  }'`

// runJqTotals runs the doc's jq recipe over logs and returns its output.
func runJqTotals(t *testing.T, logs ...string) map[string]any {
	t.Helper()
	doc, err := os.ReadFile("../docs/scale-out.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte(jqTotals)) {
		t.Errorf("docs/scale-out.md does not carry the jq totals recipe this test runs:\n%s", jqTotals)
	}
	if _, err := exec.LookPath("jq"); err != nil {
		if os.Getenv("PRSYNC_TEST_INSTALL") != "" {
			t.Fatal("jq is not installed, though the suite installs it")
		}
		t.Log("jq is not installed: the jq recipe was not run")
		return nil
	}
	cmd := exec.Command("bash", "-c", jqTotals+` "$@"`, "jq")
	cmd.Args = append(cmd.Args, logs...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("jq recipe: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("jq recipe output %q: %v", out, err)
	}
	return m
}

// The same three shards into one shared destination: a byte-identical tree.
func TestShardThreeSharedDest(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	list, paths := scaleTree(t, w.Src, 300)
	runs := scaleShards(t, 3, 2, list, writeList(t, w.Dir, list), func(int) string { return w.Dst },
		"-0", "--root", w.Src, "-j", "4", "--chunk-files", "10", "--no-throttle")
	var files, transferred int64
	var logs []string
	for k, r := range runs {
		r.Exit(t, 0)
		s := r.Identity(t, len(scaleWant(paths, k, 3)))
		checkShardFields(t, r, k, 3)
		files += num(s, "files")
		transferred += num(s, "files_transferred")
		lp := filepath.Join(w.Dir, fmt.Sprintf("prsync.%d.jsonl", k))
		if err := os.WriteFile(lp, []byte(r.Stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, lp)
	}
	if files != 300 || transferred != 300 {
		t.Errorf("summaries add up to files %d, transferred %d; want 300 and 300", files, transferred)
	}
	sameTree(t, w.Src, w.Dst)
	if m := runJqTotals(t, logs...); m != nil {
		if num(m, "tasks") != 3 || num(m, "files") != 300 || num(m, "files_transferred") != 300 || num(m, "exit_code") != 0 {
			t.Errorf("jq totals: %v", m)
		}
		if fmt.Sprint(m["shards"]) != "[0 1 2]" {
			t.Errorf("jq totals: shards %v, want [0 1 2]", m["shards"])
		}
	}
	noProcsLeft(t, w.Dir)
}

func TestShardSpecs(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	list, paths := scaleTree(t, w.Src, 300)
	lf := writeList(t, w.Dir, list)

	bad := []struct {
		args []string
		env  []string
	}{
		{args: []string{"--shard", "3/3"}},
		{args: []string{"--shard", "a/b"}},
		{args: []string{"--shard", "0/0"}},
		{args: []string{"--shard=-1/2"}},
		{args: []string{"--shard", "-1/2"}},
		{args: []string{"--shard", "1/2/3"}},
		{args: []string{"--shard", "2"}},
		{args: []string{"--shard", "1/"}},
		{env: []string{"PRSYNC_SHARD=3/3"}},
		{env: []string{"PRSYNC_SHARD=/4"}}, // what an unset $SLURM_ARRAY_TASK_ID gives
	}
	t.Run("bad", func(t *testing.T) {
		for i, c := range bad {
			t.Run(strings.Join(append(c.env, c.args...), " "), func(t *testing.T) {
				t.Parallel()
				dest := filepath.Join(w.Dir, fmt.Sprintf("bad%d", i))
				args := append(append([]string{"-0", "--from", lf, "--root", w.Src}, c.args...), dest)
				r := start(t, startOpts{env: c.env}, args...).wait(5 * time.Minute)
				r.Refused(t, 1) // no events, one error line
				absent(t, "", dest)
			})
		}
	})

	// PRSYNC_SHARD from the environment, as an array job sets it
	dest := filepath.Join(w.Dir, "env")
	r := start(t, startOpts{env: []string{"PRSYNC_SHARD=1/2"}}, "-0", "--from", lf, "--root", w.Src, "--no-throttle", dest).wait(5 * time.Minute)
	want := scaleWant(paths, 1, 2)
	r.Exit(t, 0)
	r.Identity(t, len(want))
	checkShardFields(t, r, 1, 2)
	if got := scaleFiles(t, dest); len(got) != len(want) || len(want) == 0 || len(want) == 300 {
		t.Errorf("PRSYNC_SHARD=1/2 copied %d files, want %d", len(got), len(want))
	}

	// --shard 0/1 is the same as no flag
	for i, extra := range [][]string{{"--shard", "0/1"}, nil} {
		dest := filepath.Join(w.Dir, fmt.Sprintf("all%d", i))
		args := append(append([]string{"-0", "--root", w.Src, "--no-throttle"}, extra...), dest)
		r := start(t, startOpts{in: list}, args...).wait(5 * time.Minute)
		r.Exit(t, 0)
		r.Identity(t, 300)
		checkShardFields(t, r, 0, 1)
		sameTree(t, w.Src, dest)
	}
	noProcsLeft(t, w.Dir)
}

// The --failed lists of all shards, concatenated, are one retry run (docs/scale-out.md).
func TestShardFailedListsRetry(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	base := t.TempDir()
	src, dest := filepath.Join(base, "src"), filepath.Join(base, "dest")
	list, paths := scaleTree(t, src, 60)
	// eight paths are missing during the first run: they vanish, and go to the --failed lists
	type saved struct {
		data string
		mode os.FileMode
	}
	late := map[string]saved{}
	for i := 20; i < 60; i += 5 {
		data, err := os.ReadFile(paths[i])
		fi, err2 := os.Stat(paths[i])
		if err != nil || err2 != nil {
			t.Fatal(err, err2)
		}
		late[paths[i]] = saved{string(data), fi.Mode().Perm()}
		os.Remove(paths[i])
	}
	lf := writeList(t, base, list)
	var procs []*proc
	for k := 0; k < 3; k++ {
		procs = append(procs, start(t, startOpts{}, "-0", "--from", lf, "--root", src, "-j", "2", "--no-throttle",
			"--shard", fmt.Sprintf("%d/3", k), "--failed", filepath.Join(base, fmt.Sprintf("failed.%d", k)), dest))
	}
	var vanished int64
	for k, p := range procs {
		r := p.wait(5 * time.Minute)
		s := r.Identity(t, len(scaleWant(paths, k, 3)))
		vanished += num(s, "files_vanished")
		if want := map[bool]int{true: 24, false: 0}[num(s, "files_vanished") > 0]; r.Code != want {
			t.Errorf("shard %d/3: exit %d, want %d\n%s", k, r.Code, want, r.Stderr)
		}
	}
	if vanished != int64(len(late)) {
		t.Fatalf("%d vanished over all shards, want %d", vanished, len(late))
	}
	for p, f := range late {
		writeFile(t, p, f.data, f.mode)
	}
	// the recipe: cat failed.* | prsync -0 --root SRC DEST
	r := start(t, startOpts{wrap: []string{"bash", "-c", `cat "$1"/failed.* | "$0" -0 --root "$2" --no-throttle "$3"`}},
		base, src, dest).wait(time.Minute)
	r.Exit(t, 0)
	r.Identity(t, len(late))
	r.Counts(t, map[string]int64{"files_transferred": int64(len(late))}) // the retry
	sameTree(t, src, dest)
	noProcsLeft(t, base)
}

// scaleLinkTree writes groups of hard links spread across directories, plain files, and
// one group with a link outside SRC (never in the list: rsync can only link what it gets).
// It returns the list (links of one group far apart) and the groups as relative paths.
func scaleLinkTree(t *testing.T, base string) (list []byte, groups [][]string, n int) {
	t.Helper()
	src := filepath.Join(base, "src")
	var plain []string
	for i := 0; i < 150; i++ {
		rel := filepath.Join(fmt.Sprintf("p%d", i%6), fmt.Sprintf("plain-%03d", i))
		writeFile(t, filepath.Join(src, rel), fmt.Sprintf("plain %d\n", i), 0o644)
		plain = append(plain, filepath.Join(src, rel))
	}
	sizes := []int{2, 3, 4, 5, 2, 3, 6, 2, 4, 3, 2, 7}
	var abs [][]string
	for g, size := range sizes {
		var rels, ps []string
		for j := 0; j < size; j++ {
			rel := filepath.Join(fmt.Sprintf("h%d", (g+j*5)%8), fmt.Sprintf("sub%d", j%2), fmt.Sprintf("g%02d-l%d", g, j))
			p := filepath.Join(src, rel)
			if j == 0 {
				writeFile(t, p, strings.Repeat(fmt.Sprintf("group %d ", g), 50+g), 0o640)
			} else {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Link(ps[0], p); err != nil {
					t.Skipf("hard links: %v", err)
				}
			}
			rels, ps = append(rels, rel), append(ps, p)
		}
		groups, abs = append(groups, rels), append(abs, ps)
	}
	// group 3 has one more link, outside SRC: its 5 listed links wait for a 6th until EOF
	if err := os.Link(abs[3][0], filepath.Join(base, "outside-link")); err != nil {
		t.Fatal(err)
	}
	// link j of every group, then 15 plain files: links of one group are ~30 records apart
	var order []string
	for j, pi := 0, 0; ; j++ {
		more := false
		for _, ps := range abs {
			if j < len(ps) {
				order = append(order, ps[j])
				more = true
			}
		}
		for i := 0; i < 15 && pi < len(plain); i++ {
			order = append(order, plain[pi])
			pi++
		}
		if !more && pi >= len(plain) {
			break
		}
	}
	return nul(order...), groups, len(order)
}

// checkLinkGroups fails unless each group is one inode in dest with exactly the group's links.
func checkLinkGroups(t *testing.T, dest string, groups [][]string, wantLinked bool) (broken int) {
	t.Helper()
	inodes := map[uint64]int{}
	for g, rels := range groups {
		var first syscall.Stat_t
		ok := true
		for j, rel := range rels {
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(dest, rel), &st); err != nil {
				t.Errorf("group %d: %v", g, err)
				ok = false
				break
			}
			if j == 0 {
				first = st
				continue
			}
			if st.Ino != first.Ino || st.Dev != first.Dev {
				ok = false
			}
		}
		if ok && int(first.Nlink) != len(rels) {
			ok = false
		}
		if !ok {
			broken++
			if wantLinked {
				t.Errorf("group %d (%q) is not one hard-link group of %d in %s", g, rels, len(rels), dest)
			}
		}
		if prev, dup := inodes[first.Ino]; dup && ok {
			t.Errorf("groups %d and %d share inode %d", prev, g, first.Ino)
		}
		inodes[first.Ino] = g
	}
	return broken
}

func TestShardHardLinks(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	list, groups, n := scaleLinkTree(t, w.Dir)
	lf := writeList(t, w.Dir, list)
	common := []string{"-0", "--root", w.Src, "-j", "4", "--chunk-files", "6", "--no-throttle"} // groups of up to 7 links span chunks

	t.Run("one instance", func(t *testing.T) {
		t.Parallel()
		dest := filepath.Join(w.Dir, "dest1")
		r := start(t, startOpts{in: list}, append(common, dest, "--", "-H")...).wait(5 * time.Minute)
		r.Exit(t, 0)
		r.Identity(t, n)
		sameTree(t, w.Src, dest)
		checkLinkGroups(t, dest, groups, true)
	})

	t.Run("three shards into one DEST", func(t *testing.T) {
		t.Parallel()
		dest := filepath.Join(w.Dir, "dest3")
		runs := scaleShards(t, 3, -1, nil, lf, func(int) string { return dest }, append(common, "--", "--hard-links")...)
		var files int64
		perShard := map[int]int64{}
		for k, r := range runs {
			r.Exit(t, 0)
			s := r.Identity(t, -1)
			checkShardFields(t, r, k, 3)
			files += num(s, "files")
			perShard[k] = num(s, "files")
		}
		if files != int64(n) {
			t.Errorf("summaries add up to %d files, want %d (%v)", files, n, perShard)
		}
		sameTree(t, w.Src, dest)
		checkLinkGroups(t, dest, groups, true)
	})

	// the control: without -H the same run does not keep the links, so the checks above can fail
	t.Run("control without -H", func(t *testing.T) {
		t.Parallel()
		dest := filepath.Join(w.Dir, "dest0")
		r := start(t, startOpts{in: list}, append(common, dest)...).wait(5 * time.Minute)
		r.Exit(t, 0)
		r.Identity(t, n)
		if b := checkLinkGroups(t, dest, groups, false); b != len(groups) {
			t.Errorf("without -H, %d of %d groups were broken; want all", b, len(groups))
		}
	})
	t.Cleanup(func() { noProcsLeft(t, w.Dir) }) // after the parallel cases
}

// The Kubernetes recipe cannot run here (no cluster); its manifest must at least parse, be an
// Indexed Job, and hand PRSYNC_SHARD an index out of as many shards as completions.
func TestShardDocsKubernetesManifest(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	doc, err := os.ReadFile("../docs/scale-out.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/scale-out.md has no ```yaml block")
	}
	y := string(m[1])
	for _, want := range []string{"kind: Job", "completionMode: Indexed", "JOB_COMPLETION_INDEX", "PRSYNC_SHARD"} {
		if !strings.Contains(y, want) {
			t.Errorf("manifest lacks %q", want)
		}
	}
	cm := regexp.MustCompile(`(?m)^\s*completions: (\d+)`).FindStringSubmatch(y)
	sm := regexp.MustCompile(`\$\(JOB_COMPLETION_INDEX\)/(\d+)`).FindStringSubmatch(y)
	if cm == nil || sm == nil || cm[1] != sm[1] {
		t.Errorf("completions %v and PRSYNC_SHARD's N %v must be one number", cm, sm)
	}
	py := "/usr/bin/python3" // Debian's, where apt's python3-yaml lands
	if _, err := os.Stat(py); err != nil {
		if py, err = exec.LookPath("python3"); err != nil {
			t.Skip("python3 is not installed: the manifest was not parsed")
		}
	}
	if exec.Command(py, "-c", "import yaml").Run() != nil {
		t.Skip("python3 has no yaml module: the manifest was not parsed")
	}
	cmd := exec.Command(py, "-c", `import sys, json, yaml; print(json.dumps(list(yaml.safe_load_all(sys.stdin))))`)
	cmd.Stdin = strings.NewReader(y)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("manifest does not parse as YAML: %v", err)
	}
	var docs []map[string]any
	if err := json.Unmarshal(out, &docs); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range docs {
		kinds = append(kinds, fmt.Sprint(d["kind"]))
		if d["kind"] != "Job" {
			continue
		}
		spec, _ := d["spec"].(map[string]any)
		if spec["completionMode"] != "Indexed" || fmt.Sprint(spec["completions"]) != sm[1] {
			t.Errorf("Job spec: completionMode %v, completions %v; want Indexed and %s", spec["completionMode"], spec["completions"], sm[1])
		}
	}
	sort.Strings(kinds)
	if !strings.Contains(strings.Join(kinds, " "), "Job") {
		t.Errorf("manifest kinds %v: no Job", kinds)
	}
}
