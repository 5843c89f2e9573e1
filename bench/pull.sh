#!/usr/bin/env bash
# bench/pull.sh: --sizes and pulling from an rsync daemon (issue 13).
#
# Two scenarios, fresh copies of the generated tree, cold cache, every method
# interleaved with the others:
#
#   sizes  prsync's own CPU (the summary's cpu_seconds) on a local copy:
#            prsync-list    cd SRC; find . -type f -print0 | prsync -0 DEST
#            prsync-sizes   cd SRC; find . -type f -printf '%s\t%P\0' | prsync -0 --sizes DEST
#   pull   from an rsync daemon on 127.0.0.1 (a free port) serving the tree
#          read-only, into a local DEST:
#            rsync-pull         rsync -a rsync://127.0.0.1:PORT/bench/ DEST/
#            prsync-pull        cd SRC; find . -type f -print0 | prsync -0 --root rsync://127.0.0.1:PORT/bench DEST/
#            prsync-pull-sizes  the same list with sizes and --sizes
#
# The prsync lists hold files only (find -type f), so they leave the tree's
# empty directories out: their check counts files, bytes and the checksum
# sample, not directories. The daemon's CPU (its sessions, from its reaped
# children's rusage) is recorded beside the client's.
#
#   bench/pull.sh                        # profile small, 3 repetitions
#   bench/pull.sh --profile tiny --reps 1
set -euo pipefail
export LC_ALL=C

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$BENCH_DIR/.." && pwd -P)
ME=pull.sh
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"

PROFILE=${BENCH_PROFILE:-small}
REPS=${BENCH_REPS:-3}
SEED=${BENCH_SEED:-1}
WORK=${BENCH_WORK:-/var/tmp/prsync-bench}
OUT=${BENCH_OUT:-}
PRSYNC=${PRSYNC:-}
PRSYNC_BASE=${BENCH_PRSYNC_BASE:-}
ALL_METHODS="prsync-list prsync-sizes rsync-pull prsync-pull prsync-pull-sizes prsync-list-base prsync-sizes-base"
METHODS=${BENCH_PULL_METHODS:-$ALL_METHODS}
PORT=${BENCH_PULL_PORT:-}
PRSYNC_OPTS=${BENCH_PRSYNC_OPTS:-}
DROP=${BENCH_DROP_CACHES:-auto}
SAMPLE_N=${BENCH_SAMPLE:-50}
PERFILE_N=${BENCH_PERFILE_FILES:-500}

usage() {
	cat <<EOF
usage: bench/pull.sh [options]

  --profile NAME     tree profile: tiny, small (default), many, big       [BENCH_PROFILE]
  --reps N           repetitions, interleaved (default 3)                  [BENCH_REPS]
  --seed N           tree seed (default 1)                                 [BENCH_SEED]
  --methods LIST     subset of: $ALL_METHODS
                     (default: all)                                        [BENCH_PULL_METHODS]
  --port N           the daemon's port on 127.0.0.1 (default: the first
                     free one from 18730)                                  [BENCH_PULL_PORT]
  --prsync-opts STR  extra prsync flags for every prsync method            [BENCH_PRSYNC_OPTS]
  --out DIR          results (default /tmp/prsync-bench/pull-DATE-PROFILE) [BENCH_OUT]
  --work DIR         trees (cached, shared with run.sh) and DEST
                     (default /var/tmp/prsync-bench)                       [BENCH_WORK]
  --prsync PATH      prsync binary (default: built from the repo)          [PRSYNC]
  --base PATH        another prsync binary (an older build), for the
                     methods prsync-list-base and prsync-sizes-base, so
                     that a change is measured side by side          [BENCH_PRSYNC_BASE]
  --no-drop-caches   keep the page cache warm                              [BENCH_DROP_CACHES=0]
Also BENCH_SAMPLE (50): files checksummed in each check.
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--profile) PROFILE=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--seed) SEED=$2; shift ;;
	--methods) METHODS=$2; shift ;;
	--port) PORT=$2; shift ;;
	--prsync-opts) PRSYNC_OPTS=$2; shift ;;
	--out) OUT=$2; shift ;;
	--work) WORK=$2; shift ;;
	--prsync) PRSYNC=$2; shift ;;
	--base) PRSYNC_BASE=$2; shift ;;
	--no-drop-caches) DROP=0 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done

case "$REPS" in '' | *[!0-9]* | 0) die "--reps must be a positive integer" ;; esac
case "$PROFILE" in tiny | small | many | big) ;; *) die "unknown profile $PROFILE" ;; esac
case "$PORT" in '' | [1-9]*) ;; *) die "bad --port $PORT" ;; esac
for m in $METHODS; do
	case " $ALL_METHODS " in *" $m "*) ;; *) die "unknown method $m (one of: $ALL_METHODS)" ;; esac
	case "$m" in *-base) [ -x "$PRSYNC_BASE" ] || die "$m needs --base PATH, an executable prsync" ;; esac
done
read -r -a METHOD_LIST <<<"$METHODS"
[ "${#METHOD_LIST[@]}" -gt 0 ] || die "no methods"
NEED_DAEMON=0
for m in "${METHOD_LIST[@]}"; do case "$m" in *-pull*) NEED_DAEMON=1 ;; esac; done

STAMP=$(date +%Y%m%d-%H%M%S)
OUT=${OUT:-/tmp/prsync-bench/pull-$STAMP-$PROFILE}
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
bench_build_tools "$BIN" "$OUT/logs" gentree measure report
[ -n "$PRSYNC" ] || die "no prsync binary"
bench_drop_setup
prepare_tree "$PROFILE"
PDST=$WORK/pull-dst

DAEMON_PID=
cleanup() {
	if [ -n "$DAEMON_PID" ]; then
		kill "$DAEMON_PID" 2>/dev/null || true
		wait "$DAEMON_PID" 2>/dev/null || true
		DAEMON_PID=
	fi
	rm -rf "$PDST"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- daemon
port_free() { [ -z "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }
daemon_start() {
	local p i
	if [ -z "$PORT" ]; then
		for ((p = 18730; p < 18830; p++)); do
			if port_free "$p"; then PORT=$p; break; fi
		done
		[ -n "$PORT" ] || die "no free port in 18730-18829 (give --port)"
	fi
	cat >"$OUT/logs/rsyncd.conf" <<EOF
pid file = $OUT/logs/rsyncd.pid
lock file = $OUT/logs/rsyncd.lock
use chroot = no
max connections = 0
log file = $OUT/logs/rsyncd.log
[bench]
	path = $SRC
	read only = true
EOF
	# As root, the daemon would drop to nobody; keep root so every file reads.
	[ "$IS_ROOT" != 1 ] || printf '\tuid = root\n\tgid = root\n' >>"$OUT/logs/rsyncd.conf"
	rsync --daemon --no-detach --address=127.0.0.1 --port="$PORT" --config="$OUT/logs/rsyncd.conf" \
		>>"$OUT/logs/rsyncd.out" 2>&1 &
	DAEMON_PID=$!
	for ((i = 0; i < 50; i++)); do
		rsync "rsync://127.0.0.1:$PORT/" >/dev/null 2>&1 && return 0
		kill -0 "$DAEMON_PID" 2>/dev/null || break
		sleep 0.1
	done
	die "the rsync daemon on 127.0.0.1:$PORT did not answer (see $OUT/logs/rsyncd.out)"
}
if [ "$NEED_DAEMON" = 1 ]; then
	daemon_start
	say "== rsync daemon on 127.0.0.1:$PORT (pid $DAEMON_PID), module bench = $SRC, read only"
fi
export URL="rsync://127.0.0.1:$PORT/bench"

# ---------------------------------------------------------------- methods
m_prsync_list() {
	# shellcheck disable=SC2086 # word list on purpose
	cd "$SRC" && find . -type f -print0 | "$PRSYNC" -0 $PRSYNC_OPTS "$DEST" >"$PRLOG"
}
m_prsync_sizes() {
	# shellcheck disable=SC2086
	cd "$SRC" && find . -type f -printf '%s\t%P\0' | "$PRSYNC" -0 --sizes $PRSYNC_OPTS "$DEST" >"$PRLOG"
}
m_rsync_pull() { rsync -a "$URL"/ "$DEST"/; }
m_prsync_pull() {
	# shellcheck disable=SC2086
	cd "$SRC" && find . -type f -print0 | "$PRSYNC" -0 $PRSYNC_OPTS --root "$URL" "$DEST"/ >"$PRLOG"
}
m_prsync_pull_sizes() {
	# shellcheck disable=SC2086
	cd "$SRC" && find . -type f -printf '%s\t%P\0' | "$PRSYNC" -0 --sizes $PRSYNC_OPTS --root "$URL" "$DEST"/ >"$PRLOG"
}
m_prsync_list_base() { PRSYNC=$PRSYNC_BASE m_prsync_list; }
m_prsync_sizes_base() { PRSYNC=$PRSYNC_BASE m_prsync_sizes; }
export -f m_prsync_list m_prsync_sizes m_rsync_pull m_prsync_pull m_prsync_pull_sizes m_prsync_list_base m_prsync_sizes_base
export PRSYNC PRSYNC_OPTS PRSYNC_BASE

label_of() {
	local o=${PRSYNC_OPTS:+ ${PRSYNC_OPTS//,/;}}
	case "$1" in
	prsync-list) echo "find -type f -print0 | prsync -0$o DEST (lstat of every path)" ;;
	prsync-sizes) echo "find -type f -printf '%s\t%P\0' | prsync -0 --sizes$o DEST" ;;
	rsync-pull) echo "rsync -a rsync://127.0.0.1/bench/ DEST/" ;;
	prsync-pull) echo "find -type f -print0 | prsync -0$o --root rsync://127.0.0.1/bench DEST/" ;;
	prsync-pull-sizes) echo "find -type f -printf '%s\t%P\0' | prsync -0 --sizes$o --root rsync://127.0.0.1/bench DEST/" ;;
	prsync-list-base) echo "$(label_of prsync-list); base build" ;;
	prsync-sizes-base) echo "$(label_of prsync-sizes); base build" ;;
	esac
}
scenario_of() { case "$1" in *-pull*) echo pull ;; *) echo sizes ;; esac; }

RESULTS=$OUT/results.csv
echo "profile,scenario,method,label,case,rep,jobs,extrapolated,scale,wall_s,user_s,sys_s,maxrss_kb,exit,verify,files,bytes,server_cpu_s" >"$RESULTS"
FAILURES=0

run_one() { # METHOD REP
	local m=$1 rep=$2 sc tag res v mode=files wall user sys rss code srv='' s0 s1 jobs=0
	sc=$(scenario_of "$m")
	tag="$sc-$m-fresh-$rep"
	res=$OUT/logs/$tag.time
	export DEST=$PDST PRLOG=$OUT/logs/$tag.jsonl
	[ "$m" != rsync-pull ] || mode=full
	rm -rf "$PDST"
	mkdir -p "$PDST"
	drop_caches
	[ "$sc" != pull ] || s0=$(proc_cpu "$DAEMON_PID")
	"$MEASURE" -o "$res" -- bash -c "m_${m//-/_}" >"$OUT/logs/$tag.out" 2>"$OUT/logs/$tag.err" || true
	if [ "$sc" = pull ]; then
		sleep 0.3 # let the daemon reap its sessions
		s1=$(proc_cpu "$DAEMON_PID")
		srv=$(awk -v a="$s0" -v b="$s1" 'BEGIN{printf "%.3f", b-a}')
	fi
	read -r wall user sys rss code <"$res" || { wall=0 user=0 sys=0 rss=0 code=127; }
	v=$(verify "$PDST" "$mode")
	if [[ "$m" == prsync-* ]]; then
		record_prsync_summary "$OUT" "$sc" "$m" fresh "$rep" "$PRLOG"
		jobs=$(sed -n 's/.*"type": *"start".*"jobs": *\([0-9][0-9]*\).*/\1/p' "$PRLOG" 2>/dev/null | head -n1)
		jobs=${jobs:-0}
	fi
	if [ "$code" != 0 ] || [ "$v" != ok ]; then
		FAILURES=$((FAILURES + 1))
		say "   !! $tag: exit $code, verify: $v (logs: $OUT/logs/$tag.err)"
	fi
	echo "$PROFILE,$sc,$m,$(label_of "$m"),fresh,$rep,$jobs,0,1,$wall,$user,$sys,$rss,$code,$v,$SRC_FILES,$SRC_BYTES,$srv" >>"$RESULTS"
	say "$(printf '   [%s %d] %-18s %8.2f s  cpu %6.2f s%s  %s' "$sc" "$rep" "$m" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" "${srv:+  daemon $srv s}" "$v")"
}

n=${#METHOD_LIST[@]}
say "== results in $OUT; tree $SRC ($SRC_FILES files, $SRC_BYTES bytes); $REPS repetition(s) of: ${METHOD_LIST[*]}"
for ((rep = 1; rep <= REPS; rep++)); do
	for ((i = 0; i < n; i++)); do
		run_one "${METHOD_LIST[$(((i + rep - 1) % n))]}" "$rep"
	done
done

TREE_DESC="profile $PROFILE, seed $SEED: $SRC_FILES files in $SRC_DIRS directories, $(awk -v b="$SRC_BYTES" 'BEGIN{if (b >= 1e9) printf "%.2f GB", b/1e9; else printf "%.1f MB", b/1e6}')"
{
	machine_info "$TREE_DESC"
	[ "$NEED_DAEMON" = 0 ] || echo "daemon: rsync --daemon on 127.0.0.1:$PORT, the same machine (its CPU is shared with the client)"
} >"$OUT/machine.txt"
"$BIN/report" -in "$RESULTS" -machine "$OUT/machine.txt" -summary "$OUT/summary.csv" -md "$OUT/RESULTS.md" \
	-prsync-summaries "$OUT/prsync-summaries.jsonl" -title "## prsync --sizes and pull benchmark (bench/pull.sh)"
say "== done: $OUT"
if [ "$FAILURES" -gt 0 ]; then
	say "$ME: $FAILURES run(s) failed or did not verify"
	exit 1
fi
