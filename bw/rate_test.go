package bw

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		err  string // a part of the error; "" for none
	}{
		{in: "20M", want: 20 << 20},
		{in: "20m", want: 20 << 20},
		{in: "20MiB", want: 20 << 20},
		{in: "20mib", want: 20 << 20},
		{in: "20MB", want: 20e6},
		{in: "20M/s", want: 20 << 20},
		{in: "1.5G", want: 1.5 * (1 << 30)},
		{in: "2T", want: 2 << 40},
		{in: "1TB", want: 1e12},
		{in: "512K", want: 512 << 10},
		{in: "512k", want: 512 << 10},
		{in: "512KB", want: 512e3},
		{in: "100", want: 100 << 10}, // a bare number is KiB/s, as in rsync
		{in: "0.5", want: 512},
		{in: "512b", want: 512},
		{in: "600B", want: 600},
		{in: " 20M ", want: 20 << 20},
		{in: "off", want: Unlimited},
		{in: "OFF", want: Unlimited},
		{in: "0", want: Unlimited},
		{in: "0M", want: Unlimited},
		{in: "0.0", want: Unlimited},
		{in: "", err: "want a number"},
		{in: "M", err: "want a number"},
		{in: "-1M", err: "want a number"},
		{in: "+1M", err: "want a number"},
		{in: "1e6", err: `unknown unit "e6"`},
		{in: "1.2.3M", err: "want a number"},
		{in: ".", err: "want a number"},
		{in: "20X", err: `unknown unit "x"`},
		{in: "20MX", err: `unknown unit "mx"`},
		{in: "20 M", err: `unknown unit " m"`},
		{in: "0.4", err: "too small"},
		{in: "511b", err: "too small"},
		{in: "10M:100k", err: "unknown unit"},
		{in: "inf", err: "want a number"},
		{in: strings.Repeat("9", 400) + "T", err: "too large"},
	} {
		got, err := ParseRate(tc.in)
		if tc.err != "" {
			var se *SyntaxError
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &se) || se.Text != tc.in {
				t.Errorf("ParseRate(%q) = %v, %v; want a *SyntaxError with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestSyntaxErrorText(t *testing.T) {
	_, err := ParseRate("20X")
	want := `bad bandwidth limit "20X": unknown unit "x" (want B, K, M, G, T, KiB…, or KB… for powers of 1000)`
	if err == nil || err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestFormatRate(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		want string
	}{
		{Unlimited, "off"},
		{20 << 20, "20M"},
		{200 << 20, "200M"},
		{1.5 * (1 << 30), "1.5G"},
		{512 << 10, "512K"},
		{1e6, "1MB"},
		{20e6, "20MB"},
		{600, "600B"},
		{1 << 40, "1T"},
		{1536, "1.5K"},
	} {
		got := FormatRate(tc.rate)
		if got != tc.want {
			t.Errorf("FormatRate(%v) = %q, want %q", tc.rate, got, tc.want)
		}
		if back, err := ParseRate(got); err != nil || back != tc.rate {
			t.Errorf("ParseRate(FormatRate(%v)) = %v, %v", tc.rate, back, err)
		}
	}
}

func FuzzRateRoundTrip(f *testing.F) {
	for _, s := range []string{"20M", "1.5G", "512k", "100", "0.5", "1MB", "off", "600b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			return
		}
		if r != Unlimited && r < MinRate {
			t.Fatalf("ParseRate(%q) = %v, below MinRate", s, r)
		}
		back, err := ParseRate(FormatRate(r))
		if err != nil || back != r {
			t.Fatalf("ParseRate(FormatRate(%v)) = %v, %v; from %q", r, back, err, s)
		}
	})
}

func TestRsyncArg(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		want string
	}{
		{Unlimited, ""},
		{20 << 20, "20480"},
		{20e6, "19532"}, // 19531.25 KiB/s, rounded up so one rsync can reach the limit
		{512, "1"},
		{1025, "2"},
	} {
		if got := RsyncArg(tc.rate); got != tc.want {
			t.Errorf("RsyncArg(%v) = %q, want %q", tc.rate, got, tc.want)
		}
	}
}
