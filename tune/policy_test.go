package tune

import (
	"math"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := DefaultPolicy(2)
	with := func(f func(*Policy)) Policy {
		p := ok
		f(&p)
		return p
	}
	tests := []struct {
		name string
		p    Policy
		want string // "" means valid
	}{
		{"default", ok, ""},
		{"one job", with(func(p *Policy) { p.Min, p.Max, p.Start = 1, 1, 1 }), ""},
		{"no penalty", with(func(p *Policy) { p.K = 1 }), ""},
		{"bytes only", with(func(p *Policy) { p.FileCost = 0 }), ""},
		{"no settle", with(func(p *Policy) { p.Settle = 0 }), ""},
		{"min zero", with(func(p *Policy) { p.Min = 0 }), "min 0 must be at least 1"},
		{"max below min", with(func(p *Policy) { p.Min, p.Max = 8, 4 }), "max 4 must be at least min 8"},
		{"start below min", with(func(p *Policy) { p.Min, p.Start = 6, 4 }), "start 4 must be between min 6 and max 32"},
		{"start above max", with(func(p *Policy) { p.Max = 3 }), "start 4 must be between min 1 and max 3"},
		{"penalty below 1", with(func(p *Policy) { p.K = 0.99 }), "penalty 0.99 must be at least 1 and below 2"},
		{"penalty 2", with(func(p *Policy) { p.K = 2 }), "penalty 2 must be at least 1 and below 2"},
		{"penalty NaN", with(func(p *Policy) { p.K = math.NaN() }), "penalty NaN must be at least 1 and below 2"},
		{"file cost negative", with(func(p *Policy) { p.FileCost = -1 }), "file cost -1 must be 0 or a positive number"},
		{"file cost Inf", with(func(p *Policy) { p.FileCost = math.Inf(1) }), "file cost +Inf must be 0 or a positive number"},
		{"step zero", with(func(p *Policy) { p.Step = 0 }), "step 0 must be above 0 and at most 1"},
		{"step above 1", with(func(p *Policy) { p.Step = 1.5 }), "step 1.5 must be above 0 and at most 1"},
		{"z zero", with(func(p *Policy) { p.Z = 0 }), "significance 0 must be a positive number"},
		{"climb z NaN", with(func(p *Policy) { p.ClimbZ = math.NaN() }), "climb significance NaN must be a positive number"},
		{"noise zero", with(func(p *Policy) { p.Noise = 0 }), "noise 0 must be above 0 and below 1"},
		{"noise 1", with(func(p *Policy) { p.Noise = 1 }), "noise 1 must be above 0 and below 1"},
		{"settle negative", with(func(p *Policy) { p.Settle = -1 }), "settle -1 must be 0 or more windows"},
		{"base windows zero", with(func(p *Policy) { p.BaseWindows = 0 }), "base windows 0 must be between 1 and 12"},
		{"min windows above ring", with(func(p *Policy) { p.MinWindows, p.MaxWindows = 13, 13 }), "min windows 13 must be between 1 and 12"},
		{"max windows below min", with(func(p *Policy) { p.MaxWindows = 2 }), "max windows 2 must be between min windows 3 and 12"},
		{"hold zero", with(func(p *Policy) { p.Hold = 0 }), "hold 0 must be at least 1 window"},
		{"max hold below hold", with(func(p *Policy) { p.MaxHold = 3 }), "max hold 3 must be at least hold 4"},
		{"ceiling zero", with(func(p *Policy) { p.Ceiling = 0 }), "ceiling 0 must be at least 1 window"},
		{"recover zero", with(func(p *Policy) { p.Recover = 0 }), "recover 0 must be between 1 window and ceiling 15"},
		{"recover above ceiling", with(func(p *Policy) { p.Recover = 16 }), "recover 16 must be between 1 window and ceiling 15"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && err == nil:
				t.Fatalf("Validate() = nil, want %q", tt.want)
			case tt.want != "" && err.Error() != tt.want:
				t.Fatalf("Validate() = %q, want %q", err, tt.want)
			}
			if _, nerr := New(tt.p); (nerr == nil) != (err == nil) {
				t.Fatalf("New() error %v, Validate() error %v", nerr, err)
			}
		})
	}
}

func TestDefaultPolicy(t *testing.T) {
	for _, tt := range []struct{ cpus, max int }{{1, 32}, {2, 32}, {8, 32}, {9, 36}, {16, 64}, {64, 256}} {
		p := DefaultPolicy(tt.cpus)
		if p.Max != tt.max || p.Min != 1 || p.Start != 4 || p.K != 1.02 {
			t.Errorf("DefaultPolicy(%d): Min %d Max %d Start %d K %g, want 1, %d, 4, 1.02", tt.cpus, p.Min, p.Max, p.Start, p.K, tt.max)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("DefaultPolicy(%d).Validate() = %v", tt.cpus, err)
		}
	}
}

func TestStepAt(t *testing.T) {
	p := DefaultPolicy(2)
	for n, want := range map[int]int{1: 1, 4: 1, 9: 1, 14: 1, 15: 2, 20: 2, 24: 2, 25: 3, 32: 3, 100: 10} {
		if got := p.StepAt(n); got != want {
			t.Errorf("StepAt(%d) = %d, want %d", n, got, want)
		}
	}
}
