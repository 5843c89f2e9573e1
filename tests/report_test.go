package tests

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReport: a real copy writes its events to a file; prsync report turns them into a
// page, and a copy cut short in the middle of a line into a page that says the run had not
// ended. With Chromium installed, a real browser draws both.
func TestReport(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	makeOddTree(t, w.Src)
	for i := range 300 {
		writeFile(t, filepath.Join(w.Src, fmt.Sprintf("d%d", i%3), fmt.Sprintf("f%03d", i)), strings.Repeat("x", 1000*i), 0o644)
	}
	list, n := listTree(t, w.Src)
	gone := filepath.Join(w.Src, "gone <b>\n\"name\"")
	list = append(list, nul(gone)...)
	r := runPrsync(t, w.Dir, list, "-0", "--root", w.Src, "-j", "3", "--chunk-files", "20", "--throttle-interval", "100ms", "--no-throttle", w.Dst)
	r.Exit(t, 24)
	sameTree(t, w.Src, w.Dst)
	r.Identity(t, n+1)
	events := filepath.Join(w.Dir, "events.jsonl")
	if err := os.WriteFile(events, []byte(r.Stdout), 0o644); err != nil {
		t.Fatal(err)
	}

	// a copy cut in the middle of a line, two thirds of the way in: a run still being written
	cut := len(r.Stdout) * 2 / 3
	for r.Stdout[cut-1] == '\n' || r.Stdout[cut] == '\n' {
		cut++
	}
	partial := filepath.Join(w.Dir, "partial.jsonl")
	if err := os.WriteFile(partial, []byte(r.Stdout[:cut]), 0o644); err != nil {
		t.Fatal(err)
	}

	report := func(t *testing.T, events, out string) string {
		t.Helper()
		cmd := exec.Command(bin(t), "report", events, "-o", out)
		cmd.Env = cleanEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("prsync report: %v\n%s", err, stderr.String())
		}
		if stdout.Len() > 0 {
			t.Errorf("stdout %q", stdout.String())
		}
		page, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		wellFormed(t, page)
		return stderr.String()
	}
	whole, cutShort := filepath.Join(w.Dir, "report.html"), filepath.Join(w.Dir, "partial.html")

	t.Run("whole", func(t *testing.T) {
		if stderr := report(t, events, whole); stderr != "" {
			t.Errorf("stderr %q", stderr)
		}
		page, _ := os.ReadFile(whole)
		for _, want := range []string{
			"exit 24: 0 paths failed, 1 vanished, 0 not done",
			fmt.Sprintf(">files</th><td>%d</td>", n+1),
			// the vanished path, as text: its markup escaped, its newline shown as \n
			"gone &lt;b&gt;\\n&#34;name&#34;",
		} {
			if !strings.Contains(string(page), want) {
				t.Errorf("the page lacks %q", want)
			}
		}
		if strings.Contains(string(page), "had not ended") {
			t.Errorf("a whole run's page says it had not ended")
		}
	})
	t.Run("partial", func(t *testing.T) {
		stderr := report(t, partial, cutShort)
		for _, want := range []string{"has no summary event: the run had not ended", "the last line is cut short"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr %q lacks %q", stderr, want)
			}
		}
		page, _ := os.ReadFile(cutShort)
		for _, want := range []string{"The run had not ended when this file was written", "last line was cut short", ">not ended<"} {
			if !strings.Contains(string(page), want) {
				t.Errorf("the page lacks %q", want)
			}
		}
	})
	t.Run("chromium", func(t *testing.T) {
		chromium := "/usr/bin/chromium"
		if _, err := os.Stat(chromium); err != nil {
			t.Skip("no /usr/bin/chromium (Debian's chromium package): the page is checked for structure only")
		}
		for _, c := range []struct {
			page   string
			banner bool
		}{{whole, false}, {cutShort, true}} {
			img := screenshot(t, chromium, c.page)
			if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 2000 {
				t.Errorf("%s: a screenshot of %v", c.page, b)
			}
			// the charts are drawn: the rate's blue line; the banner's yellow only when the run had not ended
			if got := pixels(img, 0x1f, 0x77, 0xb4); got < 100 {
				t.Errorf("%s: %d pixels of the charts' blue, want a line", c.page, got)
			}
			if got := pixels(img, 0xff, 0xf8, 0xe1); (got > 1000) != c.banner {
				t.Errorf("%s: %d pixels of the banner's yellow; want a banner: %v", c.page, got, c.banner)
			}
		}
	})
}

// wellFormed fails the test unless page parses as XML (the page is written well-formed)
// and refers to nothing outside itself.
func wellFormed(t *testing.T, page []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	svgs := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the page is not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "svg":
				svgs++
			case "script", "img", "link", "iframe", "a":
				t.Errorf("the page has a <%s>", se.Name.Local)
			}
		}
	}
	if svgs != 7 {
		t.Errorf("%d charts, want 7", svgs)
	}
	if m := regexp.MustCompile(`(?i)(https?:|//[a-z0-9]|@import|url\()`).Find(page); m != nil {
		t.Errorf("the page refers to something outside it: %q", m)
	}
}

// screenshot has headless Chromium draw the page at 1200x2000, with no network and a
// profile of its own, and returns the picture.
func screenshot(t *testing.T, chromium, page string) image.Image {
	t.Helper()
	dir, err := os.MkdirTemp("", "prsync-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) }) // Chromium's profile; best effort
	shot := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+shot, "--window-size=1200,2000",
		"file://"+page)
	cmd.Env = append(cleanEnv(), "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) } // Chromium's own children too
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, out)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// pixels counts the pixels of img within 8 of the colour r, g, b.
func pixels(img image.Image, r, g, b uint8) int {
	near := func(v uint32, want uint8) bool { d := int(v>>8) - int(want); return d >= -8 && d <= 8 }
	n := 0
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(pr, r) && near(pg, g) && near(pb, b) {
				n++
			}
		}
	}
	return n
}
