package rsync

// ListEntry returns a path relative to the source as a --files-from entry: rsync reads an
// entry that starts with '#' or ';' as a comment and skips it, even with --from0, so such
// a name gets "./" in front, which rsync drops.
func ListEntry(rel string) string {
	if rel != "" && (rel[0] == '#' || rel[0] == ';') {
		return "./" + rel
	}
	return rel
}

// RootAlone is the option an rsync needs whose list holds the source directory itself,
// ".": rsync lists such an entry's contents one level deep (its --dirs), every top-level
// name, listed or not, and --exclude=/* keeps them out, so that it copies the root alone.
// It goes before every other option, so that no filter of the user's brings them back.
const RootAlone = "--exclude=/*"
