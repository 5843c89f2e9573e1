package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/prsync/prsync/splitter"
)

// peekCRLF refuses a list with CRLF line ends before anything is created. In a
// newline-separated list from a local source, it reads ahead to the first record that is
// not empty (it waits for it, or for the input's end, or for a signal), and refuses the
// run when that record ends in CR and only the name without the CR exists
// (splitter.Config.CRLF). The bytes read stay first in the input, for the splitter. A
// later record of such a list fails on its own (splitter.CRLF). With -0 a CR is a byte of
// the name, and a remote source cannot be looked at.
func (r *runner) peekCRLF() error {
	f := &r.f
	if f.Null || r.srcRemote != "" {
		return nil
	}
	p := peek(r.input, '\n')
	r.input = p
	ctx, _ := r.sig.contexts()
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil // interrupted while waiting: Run ends the run as interrupted
	}
	cfg := splitter.Config{Sep: '\n', Root: r.root, Cwd: r.cwd, Sizes: f.Sizes}
	if p.rec == nil || !cfg.CRLF(p.rec) {
		return nil
	}
	return usage(fmt.Sprintf("the list has CRLF line ends: its first path %q ends in CR, and only the name without the CR exists", p.rec),
		`convert it with tr -d '\r' (a name that really ends in CR, and exists, is copied)`)
}

// peekMax bounds the read ahead: a first record that ends beyond it, longer than a path can
// be or after as many empty lines, is not looked at.
const peekMax = 64 << 10

// peeked is an input whose start was read ahead to its first record; that start is read
// again first, then the error the read ahead ended with (io.EOF at the input's end), else
// the rest of the input.
type peeked struct {
	in   io.ReadCloser
	done chan struct{} // closed when the read ahead has ended
	head []byte        // what was read ahead and not read again yet
	err  error         // what the read ahead ended with
	rec  []byte        // the first record that is not empty nor a lone CR; nil for none
}

// peek starts reading in ahead to its first record that is not empty nor a lone CR (an
// empty line of a CRLF list).
func peek(in io.ReadCloser, sep byte) *peeked {
	p := &peeked{in: in, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		var buf []byte
		start := 0 // where the record being read begins
		for {
			i := bytes.IndexByte(buf[start:], sep)
			if i < 0 && errors.Is(p.err, io.EOF) {
				i = len(buf) - start // the last record, with no separator after it
			}
			if i >= 0 {
				if rec := buf[start : start+i]; len(rec) > 0 && !bytes.Equal(rec, []byte("\r")) {
					if len(buf) <= peekMax {
						p.rec = rec
					}
					break
				}
				if start += i + 1; start >= len(buf) && p.err != nil {
					break
				}
				continue
			}
			if p.err != nil || len(buf) > peekMax {
				break
			}
			buf = slices.Grow(buf, 4096)
			var n int
			n, p.err = in.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
		}
		p.head = buf
	}()
	return p
}

func (p *peeked) Read(b []byte) (int, error) {
	<-p.done
	if len(p.head) > 0 {
		n := copy(b, p.head)
		p.head = p.head[n:]
		return n, nil
	}
	if p.err != nil {
		return 0, p.err
	}
	return p.in.Read(b)
}

func (p *peeked) Close() error { return p.in.Close() }
