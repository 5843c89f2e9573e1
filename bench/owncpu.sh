#!/usr/bin/env bash
# bench/owncpu.sh: prsync's own CPU against its rsyncs' (issue 45's goal: at most 5 % with
# --sizes), in a local copy of a generated tree with a warm cache: the summary's
# cpu_seconds ÷ rsync_cpu_seconds. Each repetition runs every build in every mode, in an
# order that turns, into a fresh DEST:
#
#   bench/owncpu.sh                                   # the repo's build, 5 repetitions
#   bench/owncpu.sh --prsync NEW --prsync-base OLD    # two builds side by side
#   bench/owncpu.sh --modes sizes --prsync-opts "-j 0"
#
# Modes: "sizes" hands prsync SIZE<TAB>PATH records (--sizes), "plain" bare paths, which
# prsync examines itself.
set -euo pipefail
export LC_ALL=C

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$BENCH_DIR/.." && pwd -P)
ME=owncpu.sh
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"

PROFILE=${BENCH_PROFILE:-small}
REPS=${BENCH_REPS:-5}
SEED=${BENCH_SEED:-1}
WORK=${BENCH_WORK:-/var/tmp/prsync-bench}
OUT=${BENCH_OUT:-}
PRSYNC=${PRSYNC:-}
BASE=${PRSYNC_BASE:-}
MODES=${BENCH_MODES:-"sizes plain"}
PRSYNC_OPTS=${BENCH_PRSYNC_OPTS:-}
SAMPLE_N=50 PERFILE_N=500 # for prepare_tree

usage() {
	cat <<EOF
usage: bench/owncpu.sh [options]

  --profile NAME     tree profile: tiny, small (default), many, big   [BENCH_PROFILE]
  --reps N           repetitions (default 5)                           [BENCH_REPS]
  --seed N           tree seed (default 1)                             [BENCH_SEED]
  --modes LIST       of sizes, plain (default both)                    [BENCH_MODES]
  --prsync-opts STR  extra prsync flags                                [BENCH_PRSYNC_OPTS]
  --out DIR          results (default /tmp/prsync-bench/owncpu-DATE)   [BENCH_OUT]
  --work DIR         trees (shared with run.sh) and DEST               [BENCH_WORK]
  --prsync PATH      prsync binary (default: built from the repo)      [PRSYNC]
  --prsync-base PATH a second build, run beside it as "base"           [PRSYNC_BASE]
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--profile) PROFILE=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--seed) SEED=$2; shift ;;
	--modes) MODES=$2; shift ;;
	--prsync-opts) PRSYNC_OPTS=$2; shift ;;
	--out) OUT=$2; shift ;;
	--work) WORK=$2; shift ;;
	--prsync) PRSYNC=$2; shift ;;
	--prsync-base) BASE=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done

case "$REPS" in '' | *[!0-9]* | 0) die "--reps must be a positive integer" ;; esac
case "$PROFILE" in tiny | small | many | big) ;; *) die "unknown profile $PROFILE" ;; esac
for m in $MODES; do case "$m" in sizes | plain) ;; *) die "unknown mode $m" ;; esac; done
have jq || die "needs jq"
have rsync || die "needs rsync"

OUT=${OUT:-/tmp/prsync-bench/owncpu-$(date +%Y%m%d-%H%M%S)-$PROFILE}
OUT=$(realpath -m "$OUT")
WORK=$(realpath -m "$WORK")
for d in "$OUT" "$WORK"; do
	case "$d/" in "$REPO"/*) die "$d is inside the repository; use a directory under /tmp or /var/tmp" ;; esac
done
mkdir -p "$OUT/logs" "$WORK"
warn_fs "$WORK"
bench_build_tools "$WORK/bin" "$OUT/logs" gentree
[ -n "$PRSYNC" ] || die "no prsync binary"
if [ -n "$BASE" ]; then BASE=$(command -v "$BASE") || die "prsync binary $PRSYNC_BASE not found"; fi
prepare_tree "$PROFILE"
DST=$WORK/owncpu-dst
trap 'rm -rf "$DST"' EXIT

BUILDS=(new)
[ -z "$BASE" ] || BUILDS+=(base)
RUNS=()
for b in "${BUILDS[@]}"; do for m in $MODES; do RUNS+=("$b:$m"); done; done
n=${#RUNS[@]}

# one untimed run first: the tree's pages, and the builds', are then in the cache
(cd "$SRC" && find . -type f -print0) | "$PRSYNC" -0 --root "$SRC" "$DST/" >/dev/null 2>&1 || true

CSV=$OUT/results.csv
echo "build,mode,rep,seconds,prsync_cpu_s,rsync_cpu_s,ratio_pct,exit,check" >"$CSV"
say "== results in $OUT; tree $SRC ($SRC_FILES files); $REPS repetition(s) of: ${RUNS[*]}"
for ((rep = 1; rep <= REPS; rep++)); do
	for ((i = 0; i < n; i++)); do
		run=${RUNS[$(((i + rep - 1) % n))]}
		b=${run%%:*} m=${run#*:}
		bin=$PRSYNC
		[ "$b" = new ] || bin=$BASE
		tag=$b-$m-$rep
		rm -rf "$DST" && mkdir -p "$DST"
		sizes=
		fmt='%P\0'
		if [ "$m" = sizes ]; then sizes=--sizes fmt='%s\t%P\0'; fi
		# shellcheck disable=SC2086 # word lists on purpose
		(cd "$SRC" && find . -type f -printf "$fmt" |
			"$bin" -0 $sizes $PRSYNC_OPTS --root "$SRC" "$DST/" >"$OUT/logs/$tag.jsonl" 2>"$OUT/logs/$tag.err") && code=0 || code=$?
		got=$(find "$DST" -type f | wc -l)
		check=ok
		[ "$got" = "$SRC_FILES" ] || check="files $got of $SRC_FILES"
		read -r secs pcpu rcpu < <(jq -r 'select(.type == "summary") | "\(.seconds) \(.cpu_seconds) \(.rsync_cpu_seconds)"' "$OUT/logs/$tag.jsonl")
		ratio=$(awk -v p="$pcpu" -v r="$rcpu" 'BEGIN{printf "%.2f", (r > 0 ? 100 * p / r : 0)}')
		echo "$b,$m,$rep,$secs,$pcpu,$rcpu,$ratio,$code,$check" >>"$CSV"
		say "$(printf '   [%d] %-4s %-5s %7.2f s  prsync %6.3f  rsyncs %7.3f CPU-s  %5.2f %%  %s' "$rep" "$b" "$m" "$secs" "$pcpu" "$rcpu" "$ratio" "$check")"
	done
done

{
	echo "| build | mode | wall s | prsync CPU s | rsyncs CPU s | prsync ÷ rsyncs, % |"
	echo "|---|---|---:|---:|---:|---:|"
	for run in "${RUNS[@]}"; do
		awk -F, -v b="${run%%:*}" -v m="${run#*:}" '
			function med(a, n,   i, j, x) { for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
				return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
			$1 == b && $2 == m { n++; w[n] = $4; p[n] = $5; r[n] = $6; q[n] = $7 }
			END { if (n) printf "| %s | %s | %.2f | %.3f | %.2f | %.2f |\n", b, m, med(w, n), med(p, n), med(r, n), med(q, n) }' "$CSV"
	done
	echo
	echo "Medians of $REPS; tree: profile $PROFILE ($SRC_FILES files), warm cache; new: $PRSYNC${BASE:+; base: $BASE}."
} >"$OUT/RESULTS.md"
cat "$OUT/RESULTS.md" >&2
say "== done: $OUT"
if awk -F, 'NR > 1 && ($8 != 0 || $9 != "ok") { bad = 1 } END { exit !bad }' "$CSV"; then
	say "$ME: some runs failed or did not copy every file (see $CSV)"
	exit 1
fi
