#!/usr/bin/env bash
# Demo: generate a small Cassandra-like tree, copy it with prsync, check the copy, copy again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/need-rsync.sh
[ -x ./prsync ] || go build -o prsync .
w=$(mktemp -d "${TMPDIR:-/tmp}/prsync-demo.XXXXXX")
src=$w/cassandra/data dst=$w/backup
echo "demo: making a tree in $src"
for ks in 1 2 3; do
  for t in 1 2 3 4; do
    d=$src/ks$ks/table$t-0123456789abcdef
    mkdir -p "$d"
    for g in $(seq 1 40); do
      # printf is bash's own: 3,360 files without a process each (seconds on a busy machine)
      for part in TOC.txt Digest.crc32 Filter.db Statistics.db Summary.db Index.db; do
        printf '%s %*s\n' "$ks.$t.$g.$part.$RANDOM" $((RANDOM % 4096 + 64)) '' >"$d/nb-$g-big-$part"
      done
      printf '%s %*s\n' "$ks.$t.$g.Data.$RANDOM" $((RANDOM * 8)) '' >"$d/nb-$g-big-Data.db"
    done
  done
done
n=$(find "$src" -type f | wc -l)
echo "demo: $n files; copying with: find $src -type f -print0 | ./prsync -0 --root $src $dst/"
find "$src" -type f -print0 | ./prsync -0 --root "$src" "$dst/" >"$w/events.jsonl"
echo "demo: last event: $(tail -n 1 "$w/events.jsonl")"
diff -r "$src" "$dst" && echo "demo: the copy is identical (diff -r)"
echo "demo: again, nothing to copy:"
find "$src" -type f -print0 | ./prsync -0 --root "$src" "$dst/" | tail -n 1
rm -rf "$w"
