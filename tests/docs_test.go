package tests

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docsMaxBytes bounds a Markdown file of the repository. The largest (README.md) is about
// 130 KB; a 38 MB bench/README.md, every line prefixed to a copy of one paragraph by a
// faulty edit, once landed on main unnoticed.
const docsMaxBytes = 512 << 10

// TestDocsSane checks every Markdown file of the repository for the damage a faulty
// scripted edit leaves: a file far beyond any document's size, or one paragraph line
// repeated many times.
func TestDocsSane(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "dist", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d Markdown files under %s, expected README.md, CHANGELOG.md, bench/README.md and more", len(files), root)
	}
	for _, p := range files {
		rel, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > docsMaxBytes {
			t.Errorf("%s: %d bytes, more than %d: a faulty edit?", rel, len(b), docsMaxBytes)
			continue
		}
		if line, n := mostRepeatedLine(b); n > 10 {
			t.Errorf("%s: the line %q appears %d times: a faulty edit?", rel, line, n)
		}
	}
}

// mostRepeatedLine returns the most frequent line of b that reads as prose (60 bytes or
// more, not a table row or code), and its count.
func mostRepeatedLine(b []byte) (string, int) {
	count := map[string]int{}
	best, n := "", 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if len(l) < 60 || strings.HasPrefix(l, "|") || strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "\t") {
			continue
		}
		count[l]++
		if count[l] > n {
			best, n = l, count[l]
		}
	}
	return best, n
}
