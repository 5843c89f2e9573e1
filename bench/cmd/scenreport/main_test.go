package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const header = "scenario,name,method,tool,chunk,jobs,rep,wall_s,user_s,sys_s,maxrss_kb,exit,verify,chunks,suspended_s,retries\n"

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		csv  string
		want []string // substrings of the markdown
		not  []string
	}{
		{
			name: "nas goals, medians of three",
			csv: header +
				"1,NAS,rsync,rsync,,,1,100,1,1,0,0,ok,,,\n" +
				"1,NAS,rsync,rsync,,,2,90,1,1,0,0,ok,,,\n" +
				"1,NAS,rsync,rsync,,,3,200,1,1,0,0,ok,,,\n" +
				"1,NAS,parallel-c250-j8,parallel,250,8,1,50,1,1,0,0,ok,,,\n" +
				"1,NAS,prsync-c250-j8,prsync,250,8,1,45,1,1,0,0,ok,4,0,0\n" +
				"1,NAS,prsync-default,prsync-default,,,1,40,1,1,0,0,ok,4,0.5,0\n",
			want: []string{"| 1 | NAS fresh | 100.00 s |", "50.00 s (parallel -f/-N 250 -j 8)", "| 0.40 | 0.80 | 0.89 |",
				"≤ 0.30× rsync -a: **missed**", "≤ 0.95× best peer: **met**", "≤ 1.05× best fixed: **met**"},
		},
		{
			name: "a fast wrong copy is not the best peer",
			csv: header +
				"3,local,rsync,rsync,,,1,10,1,1,0,0,ok,,,\n" +
				"3,local,fpsync-c250-j4,fpsync,250,4,1,1,1,1,0,0,FAIL: checksum,,,\n" +
				"3,local,parallel-c250-j4,parallel,250,4,1,8,1,1,0,0,ok,,,\n" +
				"3,local,prsync-c250-j4,prsync,250,4,1,7,1,1,0,0,ok,40,0,0\n" +
				"3,local,prsync-default,prsync-default,,,1,9,1,1,0,0,ok,5,0,0\n",
			want: []string{"| — | 7.00 s (prsync -f/-N 250 -j 4) | 9.00 s | 0.90 | 1.12 | 1.29 |", "≤ 0.95× best peer: **missed**",
				"≤ 1.05× best fixed: **missed**", "≤ 0.95× rsync -a: **met**", "FAIL 1/1: FAIL: checksum"},
		},
		{
			name: "one failed repetition fails the method; defaults that fail",
			csv: header +
				"7,pull,rsync,rsync,,,1,10,1,1,0,0,ok,,,\n" +
				"7,pull,prsync-default,prsync-default,,,1,9,1,1,0,0,ok,1,0,0\n" +
				"7,pull,prsync-default,prsync-default,,,2,9,1,1,0,23,ok,1,0,0\n",
			want: []string{"| 7 | pull from a daemon | 10.00 s | — | — | — | FAIL |", "≤ 1.2× rsync -a: **n/a**"},
			not:  []string{"**met**"},
		},
		{
			name: "-j auto against the best fixed",
			csv: header +
				"3,local,rsync,rsync,,,1,10,1,1,0,0,ok,,,\n" +
				"3,local,prsync-c2000-j8,prsync,2000,8,1,8,1,1,0,0,ok,40,0,0\n" +
				"3,local,prsync-default,prsync-default,,,1,9,1,1,0,0,ok,5,0,0\n" +
				"3,local,prsync-auto,prsync-auto,,,1,8.2,1,1,0,0,ok,5,0,0\n" +
				"6,daemon,rsync,rsync,,,1,10,1,1,0,0,ok,,,\n" +
				"6,daemon,prsync-c2000-j8,prsync,2000,8,1,4,1,1,0,0,ok,40,0,0\n" +
				"6,daemon,prsync-default,prsync-default,,,1,5,1,1,0,0,ok,5,0,0\n" +
				"6,daemon,prsync-auto,prsync-auto,,,1,5,1,1,0,0,ok,5,0,0\n",
			want: []string{"| 3 | local, cold cache | 8.20 s | 8.00 s (prsync -f/-N 2000 -j 8) | 9.00 s | 1.02 | 0.91 | yes |",
				"| 6 | daemon, max connections | 5.00 s | 4.00 s (prsync -f/-N 2000 -j 8) | 5.00 s | 1.25 | 1.00 | no |"},
		},
		{
			name: "one rsync fed the list against rsync -a",
			csv: header +
				"6,daemon,rsync,rsync,,,1,1.25,1,1,0,0,ok,,,\n" +
				"6,daemon,rsync-list,rsync-list,,,1,2.5,1,1,0,0,ok,,,\n" +
				"6,daemon,prsync-default,prsync-default,,,1,1.5,1,1,0,0,ok,9,0,0\n",
			want: []string{"| 6 | daemon, max connections | 1.25 s | 2.50 s | 2.00 | 1.50 s | 1.20 | 0.60 |"},
		},
		{
			name: "a large variant: issue 45's goal of 1.0x rsync -a",
			csv: header +
				"9,daemon large,rsync,rsync,,,1,20,1,1,0,0,ok,,,\n" +
				"9,daemon large,prsync-c2000-j4,prsync,2000,4,1,18,1,1,0,0,ok,40,0,0\n" +
				"9,daemon large,prsync-default,prsync-default,,,1,21,1,1,0,0,ok,5,0,0\n",
			want: []string{"| 9 | daemon, max connections, large |", "≤ 1.0× rsync -a: **missed**", "≤ 1.05× best fixed: **missed**"},
		},
		{
			name: "no -j auto runs, no -j auto table",
			csv: header +
				"3,local,rsync,rsync,,,1,10,1,1,0,0,ok,,,\n" +
				"3,local,prsync-default,prsync-default,,,1,9,1,1,0,0,ok,5,0,0\n",
			not: []string{"auto ÷ best fixed", "list ÷ rsync -a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := readRows(strings.NewReader(tc.csv))
			if err != nil {
				t.Fatal(err)
			}
			md := render(summarize(rows), []string{"CPUs: 2", "label: before"}, "plots/x")
			for _, w := range tc.want {
				if !strings.Contains(md, w) {
					t.Errorf("missing %q in\n%s", w, md)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(md, w) {
					t.Errorf("unexpected %q in\n%s", w, md)
				}
			}
		})
	}
}

func TestSplice(t *testing.T) {
	p := filepath.Join(t.TempDir(), "RESULTS.md")
	if err := os.WriteFile(p, []byte("# Results\n\nold text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"first\n", "second\n"} {
		if err := spliceInto(p, text); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(p)
	got := string(b)
	want := "# Results\n\n" + beginMark + "\n\nsecond\n\n" + endMark + "\n\nold text\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// TestScenarioLess: the large variants (8 to 10) come after the seven, by number.
func TestScenarioLess(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{{"2", "10", true}, {"10", "2", false}, {"9", "10", true}, {"7", "7", false}} {
		if got := scenarioLess(c.a, c.b); got != c.want {
			t.Errorf("scenarioLess(%s, %s) = %v", c.a, c.b, got)
		}
	}
}
