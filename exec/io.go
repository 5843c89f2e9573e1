package exec

import (
	"bytes"
	"io"
)

// entryReader yields the entries NUL-terminated, without building one big buffer.
type entryReader struct {
	entries [][]byte
	off     int
}

func (r *entryReader) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		if len(r.entries) == 0 {
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
		e := r.entries[0]
		if r.off < len(e) {
			k := copy(b[n:], e[r.off:])
			r.off += k
			n += k
			continue
		}
		b[n] = 0
		n++
		r.entries = r.entries[1:]
		r.off = 0
	}
	return n, nil
}

// capWriter keeps the first max bytes written to it.
type capWriter struct {
	max  int
	buf  []byte
	more bool
}

func (w *capWriter) Write(b []byte) (int, error) {
	room := w.max - len(w.buf)
	if room >= len(b) {
		w.buf = append(w.buf, b...)
	} else {
		if room > 0 {
			w.buf = append(w.buf, b[:room]...)
		}
		w.more = true
	}
	return len(b), nil
}

func (w *capWriter) String() string {
	if w.more {
		return string(w.buf) + "…(cut)"
	}
	return string(w.buf)
}

// lineWriter calls fn for each complete line written to it.
type lineWriter struct {
	buf []byte
	fn  func(line []byte)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\n\r")
		if i < 0 {
			w.buf = append(w.buf, b...)
			break
		}
		line := b[:i]
		if len(w.buf) > 0 {
			w.buf = append(w.buf, line...)
			line = w.buf
		}
		if len(line) > 0 {
			w.fn(line)
		}
		w.buf = w.buf[:0]
		b = b[i+1:]
	}
	return n, nil
}

// flush hands over a last line that had no terminator.
func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.fn(w.buf)
		w.buf = w.buf[:0]
	}
}
