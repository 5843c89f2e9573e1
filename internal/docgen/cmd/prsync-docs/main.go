// Command prsync-docs writes prsync's man page and shell completions (make man, make completions).
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prsync/prsync/internal/docgen"
)

func main() {
	readme := flag.String("readme", "README.md", "the README.md to take the prose, the exit codes and the events from")
	man := flag.String("man", "", "write the man page to `FILE` (and FILE.gz beside it)")
	completions := flag.String("completions", "", "write prsync.bash, _prsync and prsync.fish into `DIR`")
	version := flag.String("version", "dev", "the version in the man page's footer")
	date := flag.String("date", "", "the date in the man page's footer: YYYY-MM-DD or RFC 3339 (default: $SOURCE_DATE_EPOCH, else today)")
	flag.Parse()
	if flag.NArg() > 0 || (*man == "" && *completions == "") {
		fmt.Fprintln(os.Stderr, "usage: prsync-docs [-readme README.md] [-version V] [-date D] [-man FILE] [-completions DIR]")
		os.Exit(2)
	}
	if err := run(*readme, *man, *completions, *version, *date); err != nil {
		fmt.Fprintf(os.Stderr, "prsync-docs: error: %v\n", err)
		os.Exit(1)
	}
}

func run(readme, man, completions, version, date string) error {
	src, err := docgen.Load(readme)
	if err != nil {
		return err
	}
	src.Version = version
	if src.Date, err = day(date); err != nil {
		return err
	}
	if man != "" {
		var b bytes.Buffer
		if err := docgen.Man(&b, src); err != nil {
			return err
		}
		if err := write(man, b.Bytes()); err != nil {
			return err
		}
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression) // no name, no time: reproducible
		zw.Write(b.Bytes())
		if err := zw.Close(); err != nil {
			return err
		}
		if err := write(man+".gz", z.Bytes()); err != nil {
			return err
		}
	}
	if completions != "" {
		for name, gen := range map[string]func(io.Writer, *docgen.Source) error{
			"prsync.bash": func(w io.Writer, s *docgen.Source) error { return docgen.Bash(w, s.App) },
			"_prsync":     func(w io.Writer, s *docgen.Source) error { return docgen.Zsh(w, s.App) },
			"prsync.fish": func(w io.Writer, s *docgen.Source) error { return docgen.Fish(w, s.App) },
		} {
			var b bytes.Buffer
			if err := gen(&b, src); err != nil {
				return err
			}
			if err := write(filepath.Join(completions, name), b.Bytes()); err != nil {
				return err
			}
		}
	}
	return nil
}

// day is the footer's date: -date, else SOURCE_DATE_EPOCH, else today (UTC).
func day(date string) (string, error) {
	t := time.Now().UTC()
	switch {
	case date != "":
		var err error
		if t, err = time.Parse(time.DateOnly, date); err != nil {
			if t, err = time.Parse(time.RFC3339, date); err != nil {
				return "", fmt.Errorf("-date %q: want YYYY-MM-DD or RFC 3339", date)
			}
		}
	case os.Getenv("SOURCE_DATE_EPOCH") != "":
		sec, err := strconv.ParseInt(strings.TrimSpace(os.Getenv("SOURCE_DATE_EPOCH")), 10, 64)
		if err != nil {
			return "", fmt.Errorf("SOURCE_DATE_EPOCH: %v", err)
		}
		t = time.Unix(sec, 0)
	}
	return t.UTC().Format(time.DateOnly), nil
}

// write writes a file, creating its directory.
func write(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
