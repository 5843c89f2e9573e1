package human

import "testing"

func TestBytes(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {999, "999 B"}, {1000, "1.00 kB"}, {2_500_000, "2.50 MB"}, {1_090_000_000, "1.09 GB"}} {
		if got := Bytes(tt.n); got != tt.want {
			t.Errorf("Bytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestClock(t *testing.T) {
	for _, tt := range []struct {
		sec  float64
		want string
	}{{0, "0:00"}, {59.4, "0:59"}, {61, "1:01"}, {3600, "1:00:00"}, {3725.6, "1:02:06"}} {
		if got := Clock(tt.sec); got != tt.want {
			t.Errorf("Clock(%v) = %q, want %q", tt.sec, got, tt.want)
		}
	}
}
