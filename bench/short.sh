#!/usr/bin/env bash
# bench/short.sh: short local copies, a case of their own: lists of 2,000 and 5,000 files of
# the small tree, each copied fresh into an empty DEST with a warm and with a cold page
# cache, by prsync's defaults (and another build's, --prsync-base), against one rsync -a fed
# the same list (rsync-list). A copy this short measures starts and the opening (the probe,
# and into how many parts the rest is cut), not the steady state; scenarios.sh holds the
# long ones.
#
#   bench/short.sh                                  # 7 repetitions, 2000 and 5000, warm and cold
#   bench/short.sh --reps 3 --sizes 2000 --prsync-base /tmp/prsync-old
set -euo pipefail
export LC_ALL=C

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$BENCH_DIR/.." && pwd -P)
ME=short.sh
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"

REPS=${BENCH_REPS:-7}
SIZES=${BENCH_SIZES:-"2000 5000"}
CACHES=${BENCH_CACHES:-"warm cold"}
SEED=${BENCH_SEED:-1}
WORK=${BENCH_WORK:-/var/tmp/prsync-bench}
OUT=${BENCH_OUT:-}
PRSYNC=${PRSYNC:-}
PRSYNC_BASE=${BENCH_PRSYNC_BASE:-}
DROP=${BENCH_DROP_CACHES:-auto}

usage() {
	cat <<EOF
usage: bench/short.sh [options]

  --reps N            repetitions, interleaved (default 7)               [BENCH_REPS]
  --sizes LIST        files a list (default "2000 5000")                 [BENCH_SIZES]
  --caches LIST       of warm, cold (default both)                       [BENCH_CACHES]
  --seed N            tree seed (default 1)                              [BENCH_SEED]
  --out DIR           results (default /tmp/prsync-bench/short-DATE)     [BENCH_OUT]
  --work DIR          trees (shared with run.sh) and DEST                [BENCH_WORK]
  --prsync PATH       prsync binary (default: built from the repo)       [PRSYNC]
  --prsync-base PATH  another prsync build, run with its defaults too    [BENCH_PRSYNC_BASE]
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--reps) REPS=$2; shift ;;
	--sizes) SIZES=$2; shift ;;
	--caches) CACHES=$2; shift ;;
	--seed) SEED=$2; shift ;;
	--out) OUT=$2; shift ;;
	--work) WORK=$2; shift ;;
	--prsync) PRSYNC=$2; shift ;;
	--prsync-base) PRSYNC_BASE=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done

case "$REPS" in '' | *[!0-9]* | 0) die "--reps must be a positive integer" ;; esac
for n in $SIZES; do case "$n" in '' | *[!0-9]* | 0) die "--sizes: $n is not a positive integer" ;; esac; done
for c in $CACHES; do case "$c" in warm | cold) ;; *) die "--caches: unknown $c" ;; esac; done
[ -x /usr/bin/time ] || die "needs /usr/bin/time (Debian: apt-get install time)"
RSYNC=$(command -v rsync) || die "needs rsync"

OUT=${OUT:-/tmp/prsync-bench/short-$(date +%Y%m%d-%H%M%S)}
OUT=$(realpath -m "$OUT")
WORK=$(realpath -m "$WORK")
for d in "$OUT" "$WORK"; do
	case "$d/" in "$REPO"/*) die "$d is inside the repository; use a directory under /tmp or /var/tmp" ;; esac
done
mkdir -p "$OUT/logs" "$WORK"
IS_ROOT=0
[ "$(id -u)" = 0 ] && IS_ROOT=1
BIN=$WORK/bin
bench_build_tools "$BIN" "$OUT/logs" gentree
[ -n "$PRSYNC" ] || die "no prsync binary"
bench_drop_setup
prepare_tree small
DST=$WORK/short-dst
trap 'rm -rf "$DST"' EXIT

TOOLS="rsync-list prsync-default"
[ -z "$PRSYNC_BASE" ] || TOOLS="$TOOLS prsync-base"
(cd "$SRC" && find . -type f -print0 | sort -z) >"$OUT/list-all"
for n in $SIZES; do
	# not head at the end of a pipe: under pipefail its early exit fails the pipe
	head -z -n "$n" "$OUT/list-all" >"$OUT/list-$n"
	(cd "$SRC" && xargs -0 sha256sum <"$OUT/list-$n") >"$OUT/list-$n.sha256"
done

# run TOOL LIST: one copy into an empty DEST
run() {
	case "$1" in
	rsync-list) "$RSYNC" -a --from0 --files-from="$2" "$SRC/" "$DST/" ;;
	prsync-default) (cd "$SRC" && "$PRSYNC" -0 "$DST/" <"$2" >"$OUT/logs/$tag.jsonl") ;;
	prsync-base) (cd "$SRC" && "$PRSYNC_BASE" -0 "$DST/" <"$2" >"$OUT/logs/$tag.jsonl") ;;
	esac
}

CSV=$OUT/results.csv
echo "files,cache,tool,rep,wall_s,cpu_s,chunks,exit,check" >"$CSV"
say "== results in $OUT; lists of $SIZES files of $SRC; $REPS repetition(s); $TOOLS"
read -r -a TL <<<"$TOOLS"
for ((rep = 1; rep <= REPS; rep++)); do
	for n in $SIZES; do
		for cache in $CACHES; do
			for ((i = 0; i < ${#TL[@]}; i++)); do
				tool=${TL[$(((i + rep - 1) % ${#TL[@]}))]}
				tag=$n-$cache-$tool-$rep
				rm -rf "$DST" && mkdir -p "$DST"
				if [ "$cache" = cold ]; then drop_caches; else (cd "$SRC" && xargs -0 cat <"$OUT/list-$n" >/dev/null); fi
				code=0
				/usr/bin/time -o "$OUT/logs/$tag.time" -f '%e %U %S' bash -c "$(declare -f run); SRC='$SRC' DST='$DST' RSYNC='$RSYNC' PRSYNC='$PRSYNC' PRSYNC_BASE='$PRSYNC_BASE' OUT='$OUT' tag='$tag' run $tool '$OUT/list-$n'" \
					2>"$OUT/logs/$tag.err" || code=$?
				read -r wall user sys <"$OUT/logs/$tag.time" || true
				chunks=
				[ ! -f "$OUT/logs/$tag.jsonl" ] || chunks=$(grep -c '"type":"chunk_start"' "$OUT/logs/$tag.jsonl" || true)
				check=ok
				(cd "$DST" && xargs -0 sha256sum <"$OUT/list-$n" 2>/dev/null) | cmp -s - "$OUT/list-$n.sha256" || check=FAIL
				echo "$n,$cache,$tool,$rep,$wall,$(awk -v u="$user" -v s="$sys" 'BEGIN{printf "%.2f", u+s}'),$chunks,$code,$check" >>"$CSV"
				say "$(printf '   [%d] %5d %-4s %-15s %6.2f s  %s chunks  %s' "$rep" "$n" "$cache" "$tool" "$wall" "${chunks:--}" "$check")"
			done
		done
	done
done

{
	echo "| files | cache | method | median s | min–max s | CPU s | chunks (median) | ÷ rsync-list |"
	echo "|---:|---|---|---:|---:|---:|---:|---:|"
	awk -F, '
		function med(s,   a, n, i, j, x) { n = split(s, a, " "); for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > x + 0; j--) a[j+1] = a[j]; a[j+1] = x }
			return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
		function lo(s,   a, n, i, m) { n = split(s, a, " "); m = a[1]; for (i = 2; i <= n; i++) if (a[i] + 0 < m + 0) m = a[i]; return m }
		function hi(s,   a, n, i, m) { n = split(s, a, " "); m = a[1]; for (i = 2; i <= n; i++) if (a[i] + 0 > m + 0) m = a[i]; return m }
		NR > 1 { k = $1 SUBSEP $2 SUBSEP $3; if (!(k in w)) order[++K] = k; w[k] = w[k] " " $5; c[k] = c[k] " " $6; if ($7 != "") ch[k] = ch[k] " " $7 }
		END {
			for (i = 1; i <= K; i++) {
				split(order[i], f, SUBSEP); base = f[1] SUBSEP f[2] SUBSEP "rsync-list"
				r = (base in w) ? sprintf("%.2f", med(w[order[i]]) / med(w[base])) : ""
				printf "| %s | %s | %s | %.2f | %.2f–%.2f | %.2f | %s | %s |\n", f[1], f[2], f[3], med(w[order[i]]), lo(w[order[i]]), hi(w[order[i]]), med(c[order[i]]), (order[i] in ch) ? med(ch[order[i]]) : "", r
			}
		}' "$CSV"
	echo
	echo "Medians of $REPS; CPU is user+system, children included; every copy checked against the list's checksums."
} >"$OUT/RESULTS.md"
cat "$OUT/RESULTS.md" >&2
say "== done: $OUT"
if awk -F, 'NR > 1 && ($8 != 0 || $9 != "ok") { bad = 1 } END { exit !bad }' "$CSV"; then
	say "$ME: some runs failed or did not copy every file (see $CSV)"
	exit 1
fi
