#!/usr/bin/env bash
# bench/cpusplit.sh: where the CPU of a fresh local copy goes (issue 10): prsync itself,
# the client rsyncs and the server rsyncs.
#
# Each prsync run gets --rsync WRAPPER, a shell script that runs the real rsync under
# /usr/bin/time and appends "ROLE USER SYS" to a log: ROLE is "server" when rsync's
# arguments hold --server, "client" otherwise. In the pipe transport the server is the
# sender, which prsync's pipe helper starts by executing the wrapper, and the client
# is the receiver. A client's time includes its waited-for children, so the server's
# time is taken out of it. In the direct transport rsync forks its receiver without
# executing anything, so there is only a client, with sender and receiver together.
#
# prsync's own CPU is the summary's cpu_seconds. Cold cache, fresh copy of the
# generated tree, the transports interleaved:
#
#   bench/cpusplit.sh                      # profile small, 5 repetitions, pipe and direct
#   bench/cpusplit.sh --reps 1 --profile tiny --prsync-opts --sizes
set -euo pipefail
export LC_ALL=C

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$BENCH_DIR/.." && pwd -P)
ME=cpusplit.sh
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"

PROFILE=${BENCH_PROFILE:-small}
REPS=${BENCH_REPS:-5}
SEED=${BENCH_SEED:-1}
WORK=${BENCH_WORK:-/var/tmp/prsync-bench}
OUT=${BENCH_OUT:-}
PRSYNC=${PRSYNC:-}
PRSYNC_OPTS=${BENCH_PRSYNC_OPTS:-}
SAMPLE_N=50 PERFILE_N=500 # for prepare_tree
TRANSPORTS=${BENCH_TRANSPORTS:-"pipe direct"}
DROP=${BENCH_DROP_CACHES:-auto}

usage() {
	cat <<EOF
usage: bench/cpusplit.sh [options]

  --profile NAME     tree profile: tiny, small (default), many, big   [BENCH_PROFILE]
  --reps N           repetitions, interleaved (default 5)              [BENCH_REPS]
  --seed N           tree seed (default 1)                             [BENCH_SEED]
  --transports LIST  of pipe, direct (default both)                    [BENCH_TRANSPORTS]
  --prsync-opts STR  extra prsync flags (such as --sizes)              [BENCH_PRSYNC_OPTS]
  --out DIR          results (default /tmp/prsync-bench/cpusplit-DATE) [BENCH_OUT]
  --work DIR         trees (shared with run.sh) and DEST               [BENCH_WORK]
  --prsync PATH      prsync binary (default: built from the repo)      [PRSYNC]
  --no-drop-caches   keep the page cache warm                          [BENCH_DROP_CACHES=0]
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--profile) PROFILE=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--seed) SEED=$2; shift ;;
	--transports) TRANSPORTS=$2; shift ;;
	--prsync-opts) PRSYNC_OPTS=$2; shift ;;
	--out) OUT=$2; shift ;;
	--work) WORK=$2; shift ;;
	--prsync) PRSYNC=$2; shift ;;
	--no-drop-caches) DROP=0 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done

case "$REPS" in '' | *[!0-9]* | 0) die "--reps must be a positive integer" ;; esac
case "$PROFILE" in tiny | small | many | big) ;; *) die "unknown profile $PROFILE" ;; esac
for t in $TRANSPORTS; do case "$t" in pipe | direct) ;; *) die "unknown transport $t" ;; esac; done
[ -x /usr/bin/time ] || die "needs /usr/bin/time (Debian: apt-get install time)"
have jq || die "needs jq"
RSYNC=$(command -v rsync) || die "needs rsync"

OUT=${OUT:-/tmp/prsync-bench/cpusplit-$(date +%Y%m%d-%H%M%S)-$PROFILE}
OUT=$(realpath -m "$OUT")
WORK=$(realpath -m "$WORK")
for d in "$OUT" "$WORK"; do
	case "$d/" in "$REPO"/*) die "$d is inside the repository; use a directory under /tmp or /var/tmp" ;; esac
done
mkdir -p "$OUT/logs" "$WORK"
warn_fs "$WORK"
IS_ROOT=0
[ "$(id -u)" = 0 ] && IS_ROOT=1
BIN=$WORK/bin
bench_build_tools "$BIN" "$OUT/logs" gentree measure
[ -n "$PRSYNC" ] || die "no prsync binary"
bench_drop_setup
prepare_tree "$PROFILE"
DST=$WORK/cpusplit-dst
trap 'rm -rf "$DST"' EXIT

# the wrapper: its path holds no space or quote, as the pipe transport requires
WRAP=$OUT/rsync-timed
cat >"$WRAP" <<EOF
#!/bin/sh
role=client
for a in "\$@"; do [ "\$a" = --server ] && role=server && break; done
exec /usr/bin/time -a -o "\$CPUSPLIT_LOG" -f "\$role %U %S" $RSYNC "\$@"
EOF
chmod +x "$WRAP"

# the list: SIZE<TAB>PATH records when --sizes is among the options
list() {
	case " $PRSYNC_OPTS " in
	*" --sizes "*) find . -type f -printf '%s\t%P\0' ;;
	*) find . -type f -print0 ;;
	esac
}

CSV=$OUT/results.csv
echo "transport,rep,wall_s,prsync_cpu_s,rsync_cpu_s_summary,client_cpu_s,server_cpu_s,rsyncs,exit,check" >"$CSV"
say "== results in $OUT; tree $SRC ($SRC_FILES files); $REPS repetition(s) of: $TRANSPORTS"
read -r -a TLIST <<<"$TRANSPORTS"
n=${#TLIST[@]}
for ((rep = 1; rep <= REPS; rep++)); do
	for ((i = 0; i < n; i++)); do
		t=${TLIST[$(((i + rep - 1) % n))]}
		tag=$t-$rep
		log=$OUT/logs/$tag.times
		: >"$log"
		rm -rf "$DST" && mkdir -p "$DST"
		drop_caches
		t0=$(date +%s.%N)
		# shellcheck disable=SC2086 # word list on purpose
		(cd "$SRC" && list >"$OUT/logs/$tag.list" &&
			CPUSPLIT_LOG=$log "$PRSYNC" -0 --rsync "$WRAP" --transport "$t" $PRSYNC_OPTS "$DST/" \
				<"$OUT/logs/$tag.list" >"$OUT/logs/$tag.jsonl" 2>"$OUT/logs/$tag.err") && code=0 || code=$?
		wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')
		got=$(find "$DST" -type f | wc -l)
		check=ok
		[ "$got" = "$SRC_FILES" ] || check="files $got of $SRC_FILES"
		read -r client server count < <(awk '
			$1 == "client" { c += $2 + $3; k++ }
			$1 == "server" { s += $2 + $3; k++ }
			END { printf "%.3f %.3f %d\n", c - s, s, k }' "$log")
		read -r pcpu rcpu < <(jq -r 'select(.type == "summary") | "\(.cpu_seconds) \(.rsync_cpu_seconds)"' "$OUT/logs/$tag.jsonl")
		echo "$t,$rep,$wall,$pcpu,$rcpu,$client,$server,$count,$code,$check" >>"$CSV"
		say "$(printf '   [%d] %-6s %7.2f s  prsync %6.3f  client %7.3f  server %7.3f  (summary rsyncs %s)  %s' \
			"$rep" "$t" "$wall" "$pcpu" "$client" "$server" "$rcpu" "$check")"
	done
done

{
	echo "| transport | wall s | prsync CPU s | client rsyncs CPU s | server rsyncs CPU s | prsync ÷ all rsyncs |"
	echo "|---|---:|---:|---:|---:|---:|"
	for t in $TRANSPORTS; do
		awk -F, -v t="$t" '
			function med(a, n,   i, j, x) { for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
				return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
			$1 == t { n++; w[n] = $3; p[n] = $4; c[n] = $6; s[n] = $7; r[n] = ($6 + $7 > 0) ? $4 / ($6 + $7) : 0 }
			END { if (n) printf "| %s | %.2f | %.3f | %.2f | %.2f | %.3f |\n", t, med(w, n), med(p, n), med(c, n), med(s, n), med(r, n) }' "$CSV"
	done
	echo
	echo "Medians of $REPS; tree: profile $PROFILE ($SRC_FILES files). In direct form the client is sender and receiver together."
} >"$OUT/RESULTS.md"
cat "$OUT/RESULTS.md" >&2
say "== done: $OUT"
if awk -F, 'NR > 1 && ($9 != 0 || $10 != "ok") { bad = 1 } END { exit !bad }' "$CSV"; then
	say "$ME: some runs failed or did not copy every file (see $CSV)"
	exit 1
fi
