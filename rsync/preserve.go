package rsync

import "strings"

// Preserved says which of the file attributes that --archive leaves out the rsync
// options keep: hard links (-H), ACLs (-A), extended attributes (-X) and holes (-S).
type Preserved struct {
	HardLinks, ACLs, Xattrs, Sparse bool
}

// preserveFlags are the options of Preserved: the short letter, the long name, and the
// short and long names that turn it off.
var preserveFlags = []struct {
	short      byte
	long       string
	set        func(*Preserved, bool)
	noLong     string
	noShortArg string
}{
	{'H', "--hard-links", func(p *Preserved, v bool) { p.HardLinks = v }, "--no-hard-links", "--no-H"},
	{'A', "--acls", func(p *Preserved, v bool) { p.ACLs = v }, "--no-acls", "--no-A"},
	{'X', "--xattrs", func(p *Preserved, v bool) { p.Xattrs = v }, "--no-xattrs", "--no-X"},
	{'S', "--sparse", func(p *Preserved, v bool) { p.Sparse = v }, "--no-sparse", "--no-S"},
}

// Preserves reads args, rsync's options, for -H, -A, -X and -S: alone, in a cluster such
// as -aHAX, or long (--hard-links, --acls, --xattrs, --sparse), the last of an option and
// its --no- form winning. --archive (-a) includes none of them. The values of options
// (-e 'ssh -A', --exclude -H) are not options.
func Preserves(args []string) Preserved {
	var p Preserved
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(a, "=")
		switch {
		case a == "--":
			return p
		case strings.HasPrefix(a, "--"):
			for _, f := range preserveFlags {
				switch name {
				case f.long:
					f.set(&p, true)
				case f.noLong, f.noShortArg:
					f.set(&p, false)
				}
			}
			if (quickSafeValue[name] || longValue[name]) && !hasValue {
				i++ // the value is the next argument
			}
		default:
			fl := ShortFlags(a)
			for _, c := range []byte(fl) {
				for _, f := range preserveFlags {
					if c == f.short {
						f.set(&p, true)
					}
				}
			}
			if fl != "" && len(fl) == len(a)-1 && strings.ContainsRune(shortValue, rune(fl[len(fl)-1])) {
				i++ // -e ssh: the value is the next argument
			}
		}
	}
	return p
}
