package results

import (
	"strings"
	"testing"
)

const sample = `profile,scenario,method,label,case,rep,jobs,extrapolated,scale,wall_s,user_s,sys_s,maxrss_kb,exit,verify,files,bytes
small,local,rsync,rsync -a,fresh,1,1,0,1,6.0,0.5,5.0,7000,0,ok,100,1000000
small,local,prsync-j2,prsync -j 2,fresh,1,2,0,1,4.0,0.5,5.0,9000,0,ok,100,1000000
small,local,rsync,rsync -a,fresh,2,1,0,1,5.0,0.5,4.0,7100,0,ok,100,1000000
small,local,rsync,rsync -a,fresh,3,1,0,1,9.0,0.5,6.0,7200,23,FAIL: bytes,100,1000000
small,local,prsync-default,prsync,fresh,1,2,0,1,3.0,0.5,5.0,9000,0,ok,100,1000000
small,local,prsync-j10,prsync -j 10,fresh,1,10,0,1,3.0,0.5,5.0,9000,0,ok,100,1000000
small,local,rsync,rsync -a,rerun,1,1,0,1,1.0,0.1,0.2,7000,0,ok,100,1000000
`

func TestSummarize(t *testing.T) {
	runs, err := Read(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	ss := Summarize(runs)
	Sort(ss)
	var order []string
	for _, s := range ss {
		order = append(order, s.Method+"/"+s.Case)
	}
	want := "rsync/fresh rsync/rerun prsync-j2/fresh prsync-j10/fresh prsync-default/fresh"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("order = %q, want %q", got, want)
	}
	r, ok := Find(ss, "local", "rsync", "fresh")
	if !ok {
		t.Fatal("rsync/fresh missing")
	}
	if r.N != 3 || r.WallMedian != 6 || r.WallMin != 5 || r.WallMax != 9 {
		t.Errorf("wall: n=%d median=%v min=%v max=%v", r.N, r.WallMedian, r.WallMin, r.WallMax)
	}
	if r.CPUMedian != 5.5 {
		t.Errorf("cpu median = %v, want 5.5", r.CPUMedian)
	}
	if r.Failed != 1 || len(r.Exits) != 1 || r.Exits[0] != 23 || r.OK() {
		t.Errorf("failures not counted: %+v", r)
	}
	if got := r.MBPerSec(); got < 0.1666 || got > 0.1667 {
		t.Errorf("MB/s = %v", got)
	}
}

func TestMedianEven(t *testing.T) {
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median = %v", m)
	}
}
