package rsync

import (
	"testing"

	"github.com/prsync/prsync/rsync/internal/corpus"
)

func TestListEntry(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"#c1", "./#c1"},
		{";c2", "./;c2"},
		{"a.txt", "a.txt"},
		{"a/#b", "a/#b"},
		{"./#c3", "./#c3"},
		{" #lead", " #lead"},
		{"", ""},
	} {
		if got := ListEntry(tt.in); got != tt.want {
			t.Errorf("ListEntry(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestListEntryCorpus holds ListEntry to the real rsync's recorded run of comment-like
// entries: it changes exactly the entries rsync dropped, and what it makes of them is an
// entry of the same run that landed.
func TestListEntryCorpus(t *testing.T) {
	cases := recorded(t)
	for _, c := range cases {
		if c.Name != "comment-entries" {
			continue
		}
		landed := map[string]bool{}
		for _, e := range c.List {
			tr, _ := c.TruthOf(e)
			landed[e] = tr.State == corpus.Landed
		}
		for _, e := range c.List {
			if changed := ListEntry(e) != e; changed == landed[e] {
				t.Errorf("%q: ListEntry makes %q, yet rsync %s it", e, ListEntry(e), map[bool]string{true: "copied", false: "dropped"}[landed[e]])
			}
		}
		if !landed["./#c3"] || ListEntry("#c3") != "./#c3" {
			t.Errorf("the recorded run copied ./#c3: %v; ListEntry(#c3) = %q", landed["./#c3"], ListEntry("#c3"))
		}
		return
	}
	t.Fatal("no recorded run comment-entries")
}
