package rsync

import "testing"

// TestEscape: names as rsync -i writes them on a terminal, and back.
func TestEscape(t *testing.T) {
	tests := []struct{ name, want string }{
		{"plain/file.db", "plain/file.db"},
		{" lead and trail ", " lead and trail "},
		{"-e touch PWNED", "-e touch PWNED"},
		{"new\nline", `new\#012line`},
		{"cr\r", `cr\#015`},
		{"bad\xffutf8", `bad\#377utf8`},
		{`\#012literal`, `\#134#012literal`},
		{`back\slash`, `back\slash`},
		{"bidi\u202eevil", `bidi\#342\#200\#256evil`},
		{"naïve/日本", "naïve/日本"},
		{"tab\tdel\x7f", `tab\#011del\#177`},
	}
	for _, tt := range tests {
		got := Escape([]byte(tt.name))
		if got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.name, got, tt.want)
		}
		if back := string(Unescape([]byte(got))); back != tt.name {
			t.Errorf("Unescape(Escape(%q)) = %q", tt.name, back)
		}
	}
}

// FuzzEscape: whatever the name, Escape writes one line that Unescape reads back.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"a", "new\nline", "\xff\xfe", `\#`, `\\#377`, "\u202e"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, name []byte) {
		e := Escape(name)
		for _, c := range []byte(e) {
			if c < 0x20 || c == 0x7f {
				t.Fatalf("Escape(%q) = %q holds a control byte", name, e)
			}
		}
		if back := Unescape([]byte(e)); string(back) != string(name) {
			t.Fatalf("Unescape(Escape(%q)) = %q", name, back)
		}
	})
}
