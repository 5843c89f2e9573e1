package cli

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestPeek: the read ahead to the first record finds it, and the input reads the same
// afterwards, byte for byte, whatever its reads return: no record is lost or read twice,
// and a read error comes back after the bytes read before it.
func TestPeek(t *testing.T) {
	long := strings.Repeat("x", peekMax+10)
	broken := errors.New("broken pipe")
	tests := []struct {
		name, in string
		err      error // what the input ends with instead of io.EOF
		rec      string
		none     bool // no record found
	}{
		{name: "empty", in: "", none: true},
		{name: "one line", in: "a/f1\r\na/f2\r\n", rec: "a/f1\r"},
		{name: "no separator at the end", in: "a/f1\r", rec: "a/f1\r"},
		{name: "empty lines first", in: "\n\r\n\na\r\nb\n", rec: "a\r"},
		{name: "only empty lines", in: "\n\r\n\n", none: true},
		{name: "a record longer than peekMax", in: long + "\nb\n", none: true},
		{name: "a record longer than peekMax at the end", in: long, none: true},
		{name: "a read error", in: "a\r", err: broken, none: true},
		{name: "a read error after the record", in: "a\r\nb", err: broken, rec: "a\r"},
	}
	for _, tt := range tests {
		for _, one := range []bool{false, true} {
			var in io.Reader = strings.NewReader(tt.in)
			if tt.err != nil {
				in = io.MultiReader(in, iotest.ErrReader(tt.err))
			}
			if one {
				in = iotest.OneByteReader(in)
			}
			p := peek(io.NopCloser(in), '\n')
			<-p.done
			if tt.none != (p.rec == nil) || !tt.none && string(p.rec) != tt.rec {
				t.Errorf("%s (one byte a read: %v): record of %d bytes %.20q, want %.20q (none: %v)", tt.name, one, len(p.rec), p.rec, tt.rec, tt.none)
			}
			var got bytes.Buffer
			_, err := io.Copy(&got, p)
			if got.String() != tt.in || !errors.Is(err, tt.err) {
				t.Errorf("%s (one byte a read: %v): read %d bytes, %v; want the %d of the input, %v", tt.name, one, got.Len(), err, len(tt.in), tt.err)
			}
		}
	}
}
