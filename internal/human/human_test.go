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

func TestCount(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {-1234567, "-1,234,567"}, {100000, "100,000"}} {
		if got := Count(tt.n); got != tt.want {
			t.Errorf("Count(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	if got := Count(12345); got != "12,345" {
		t.Errorf("Count(int 12345) = %q", got)
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "999.50": "999.50", "1000.5": "1,000.5", "-1234567.25": "-1,234,567.25", "123456": "123,456", "-12": "-12", "": "",
	} {
		if got := Thousands(in); got != want {
			t.Errorf("Thousands(%q) = %q, want %q", in, got, want)
		}
	}
}
