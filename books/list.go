package books

import (
	"bufio"
	"fmt"
	"io"
)

// List is the --failed list: the input paths not done, each followed by the separator,
// in the input's own bytes, so that it can be fed back to prsync. After the first error
// it writes nothing more, and Close returns that error. A nil *List lists nothing.
type List struct {
	w   *bufio.Writer
	c   io.Closer
	sep byte
	err error
}

// NewList returns a List writing to w.
func NewList(w io.WriteCloser, sep byte) *List {
	return &List{w: bufio.NewWriter(w), c: w, sep: sep}
}

// Add lists one path.
func (l *List) Add(input []byte) {
	if l == nil || l.err != nil {
		return
	}
	l.w.Write(input)
	if err := l.w.WriteByte(l.sep); err != nil {
		l.err = fmt.Errorf("write --failed list: %w", err)
	}
}

// Flush writes out the buffered part of the list, so that a crash still leaves a
// usable list.
func (l *List) Flush() {
	if l == nil || l.err != nil {
		return
	}
	if err := l.w.Flush(); err != nil {
		l.err = fmt.Errorf("write --failed list: %w", err)
	}
}

// Close flushes and closes the list, and returns its first error.
func (l *List) Close() error {
	if l == nil {
		return nil
	}
	l.Flush()
	if err := l.c.Close(); err != nil && l.err == nil {
		l.err = fmt.Errorf("close --failed list: %w", err)
	}
	return l.err
}
