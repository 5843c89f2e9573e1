package exec

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestEntryReader(t *testing.T) {
	for _, size := range []int{1, 2, 3, 7, 4096} {
		r := &entryReader{entries: [][]byte{[]byte("/a/./b"), []byte(""), []byte("/c\nd")}}
		var got bytes.Buffer
		buf := make([]byte, size)
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if err == io.EOF {
				break
			}
		}
		if got.String() != "/a/./b\x00\x00/c\nd\x00" {
			t.Errorf("size %d: %q", size, got.String())
		}
	}
}

func TestLineWriter(t *testing.T) {
	var lines []string
	w := &lineWriter{fn: func(l []byte) { lines = append(lines, string(l)) }}
	for _, part := range []string{"ab", "c\nde", "f\r\n", "\nlast"} {
		w.Write([]byte(part))
	}
	w.flush()
	if got := strings.Join(lines, "|"); got != "abc|def|last" {
		t.Errorf("lines %q", got)
	}
}
