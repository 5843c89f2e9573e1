package tests

// GNU parallel over ssh (docs/scale-out.md): `parallel --sshlogin` runs `prsync --shard {}/2`
// on two "hosts" into one destination. The hosts are two aliases, h0 and h1, of a private
// sshd on 127.0.0.1, named in an ssh config file of the test's own: parallel sees two hosts
// with one job slot each. Nothing of the system's ssh setup or root's ~/.ssh is read or
// changed; the one shared thing is /run/sshd, sshd's privilege-separation directory, which is
// created when missing and then removed again.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// privsepDir is /run/sshd, which the tests' sshds share: the first to start creates it
// when it is missing, and the last to stop removes what was created.
var privsepDir privsep

type privsep struct {
	mu      sync.Mutex
	users   int
	created bool
}

func (d *privsep) hold() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.users == 0 {
		if _, err := os.Stat("/run/sshd"); os.IsNotExist(err) {
			if err := os.Mkdir("/run/sshd", 0o755); err != nil {
				return err
			}
			d.created = true
		}
	}
	d.users++
	return nil
}

func (d *privsep) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.users--; d.users == 0 && d.created {
		os.Remove("/run/sshd")
		d.created = false
	}
}

// startSSHD starts sshd on a free port of 127.0.0.1 with its own host key, config (plus
// the lines of extra) and authorized key, and returns an ssh config file whose hosts h0
// and h1 both reach it.
func startSSHD(t *testing.T, extra string) (sshConfig, parallel string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sshd: needs root (a private sshd logs in as root with a test key)")
	}
	bins := scaleNeed(t, "parallel --sshlogin", "openssh-server openssh-client parallel", "sshd", "ssh", "ssh-keygen", "parallel")
	d := t.TempDir()
	for _, k := range []string{"hostkey", "clientkey"} {
		if out, err := exec.Command(bins["ssh-keygen"], "-q", "-t", "ed25519", "-N", "", "-C", "prsync-test", "-f", filepath.Join(d, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(d, "clientkey.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := privsepDir.hold(); err != nil {
		t.Skipf("sshd: cannot create its privilege-separation directory /run/sshd: %v", err)
	}
	t.Cleanup(privsepDir.release)
	port := freePort(t)
	cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %[2]s/hostkey
PidFile %[2]s/sshd.pid
AuthorizedKeysFile %[2]s/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
X11Forwarding no
AllowTcpForwarding no
SetEnv SHLVL=1
`, port, d)
	if !strings.Contains(extra, "MaxStartups") {
		cfg += "MaxStartups 20\n"
	}
	cfg += extra
	sc := filepath.Join(d, "sshd_config")
	if err := os.WriteFile(sc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bins["sshd"], "-t", "-f", sc).CombinedOutput(); err != nil {
		t.Skipf("sshd -t: %v: %s", err, out)
	}
	// -D: no fork, so the PID is ours to stop; -e: log to stderr (its log file)
	startChildDaemon(t, "sshd", cleanEnv(), filepath.Join(d, "sshd.log"), bins["sshd"], "-D", "-e", "-f", sc)
	up := false
	for i := 0; i < 100 && !up; i++ {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			c.Close()
			up = true
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !up {
		log, _ := os.ReadFile(filepath.Join(d, "sshd.log"))
		t.Fatalf("sshd did not listen on 127.0.0.1:%d\n%s", port, log)
	}
	sshConfig = filepath.Join(d, "ssh_config")
	client := fmt.Sprintf(`Host h0 h1
  HostName 127.0.0.1
  Port %d
  User root
  IdentityFile %[2]s/clientkey
  IdentitiesOnly yes
  UserKnownHostsFile %[2]s/known_hosts
  StrictHostKeyChecking accept-new
  BatchMode yes
  LogLevel ERROR
  ConnectTimeout 10
`, port, d)
	if err := os.WriteFile(sshConfig, []byte(client), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bins["ssh"], "-F", sshConfig, "h0", "true").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(d, "sshd.log"))
		t.Fatalf("ssh h0 true: %v\n%s\nsshd log:\n%s", err, out, log)
	}
	return sshConfig, bins["parallel"]
}

func TestSSHLoginParallel(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	sshConfig, parallel := startSSHD(t, "")
	w := newWork(t)
	src, dest, logs := w.Src, w.Dst, filepath.Join(w.Dir, "logs")
	list, paths := scaleTree(t, src, 120)
	lf := writeList(t, w.Dir, list)
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	joblog := filepath.Join(w.Dir, "joblog")

	// the recipe of docs/scale-out.md, with the hosts of the test's ssh config
	// (--max-suspend 2s as PRSYNC_MAX_SUSPEND gives the other tests' runs: ssh does not pass
	// the variable, and a busy machine would pause each shard up to 30 s)
	remote := fmt.Sprintf("%s -0 --from %s --root %s --shard {}/2 --max-suspend 2s --failed %s/failed.{} %s > %s/prsync.{}.jsonl",
		bin(t), lf, src, logs, dest, logs)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // parallel and ssh start slowly on a busy machine
	defer cancel()
	cmd := exec.CommandContext(ctx, parallel, "--joblog", joblog, "--ssh", "ssh -F "+sshConfig,
		"--sshlogin", "1/h0,1/h1", remote, ":::", "0", "1")
	cmd.Env = cleanEnv("PARALLEL_HOME=" + filepath.Join(w.Dir, "parallel-home")) // not root's ~/.parallel
	cmd.Dir = w.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		jl, _ := os.ReadFile(joblog)
		t.Fatalf("parallel: %v\n%s\n%s", err, out, jl)
	}

	// the joblog: shard 0 and shard 1 ran, on two different hosts, with exit 0
	jl, err := os.ReadFile(joblog)
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]bool{}
	rows := strings.Split(strings.TrimSpace(string(jl)), "\n")[1:]
	for _, row := range rows {
		f := strings.Split(row, "\t")
		if len(f) < 9 {
			t.Fatalf("joblog row %q", row)
		}
		hosts[f[1]] = true
		if strings.TrimSpace(f[6]) != "0" {
			t.Errorf("joblog: %s exited %s", f[8], f[6])
		}
	}
	if len(rows) != 2 || !hosts["h0"] || !hosts["h1"] {
		t.Errorf("joblog: want shards 0 and 1 on h0 and h1:\n%s", jl)
	}

	var files int64
	for k := 0; k < 2; k++ {
		data, err := os.ReadFile(filepath.Join(logs, fmt.Sprintf("prsync.%d.jsonl", k)))
		if err != nil {
			t.Fatal(err)
		}
		r := &Run{Events: parseEvents(t, data)}
		s := r.Identity(t, len(scaleWant(paths, k, 2)))
		checkShardFields(t, r, k, 2)
		if num(s, "exit_code") != 0 {
			t.Errorf("shard %d: exit_code %d", k, num(s, "exit_code"))
		}
		files += num(s, "files")
	}
	if files != int64(len(paths)) {
		t.Errorf("summaries add up to %d files, want %d", files, len(paths))
	}
	sameTree(t, src, dest)
	noProcsLeft(t, w.Dir)
}
