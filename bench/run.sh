#!/usr/bin/env bash
# bench/run.sh: prsync against rsync, cp, tar, GNU parallel and fpsync on the
# same generated Cassandra-like tree. See bench/README.md.
#
#   bench/run.sh                      # profile small, 3 repetitions, every method
#   bench/run.sh --smoke              # tiny tree, 1 repetition, rsync -a and prsync only (CI)
#   bench/run.sh --profile many --reps 5 --methods "rsync fpsync prsync-default"
#   bench/run.sh --net                # also the shaped-network scenario (root only)
#   bench/run.sh --methods "prsync-auto prsync-default prsync-sweep" --jobs "1 2 4 8 16 32"
#   BENCH_NET_STREAM=100mbit bench/run.sh --net-only --net-methods "prsync-auto prsync-default prsync-sweep"
#
# Every option also reads an environment variable (BENCH_PROFILE, BENCH_REPS,
# BENCH_METHODS, BENCH_OUT, BENCH_WORK, BENCH_SEED, BENCH_JOBS, BENCH_NET,
# BENCH_NET_METHODS, BENCH_NET_STREAM, BENCH_NET_LINK, BENCH_NET_MAXCONN, PRSYNC,
# ...), listed by --help. bench/migrate.sh and bench/pull.sh share bench/lib.sh
# and the cached trees.
set -euo pipefail
export LC_ALL=C

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$BENCH_DIR/.." && pwd -P)
ME=run.sh
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"

PROFILE=${BENCH_PROFILE:-small}
REPS=${BENCH_REPS:-3}
SEED=${BENCH_SEED:-1}
METHODS=${BENCH_METHODS:-all}
JOBS_LIST=${BENCH_JOBS:-"1 2 4 8"}
WORK=${BENCH_WORK:-/var/tmp/prsync-bench}
OUT=${BENCH_OUT:-}
PRSYNC=${PRSYNC:-}
PRSYNC_BASE=${BENCH_PRSYNC_BASE:-}
PRSYNC_SWEEP_OPTS=${BENCH_PRSYNC_SWEEP_OPTS:---no-throttle}
PRSYNC_OPTS=${BENCH_PRSYNC_OPTS:-}
CHUNK=${BENCH_CHUNK:-2000}
PJOBS=${BENCH_PEER_JOBS:-8}
PERFILE_N=${BENCH_PERFILE_FILES:-500}
SAMPLE_N=${BENCH_SAMPLE:-50}
NET=${BENCH_NET:-0}
NET_ONLY=${BENCH_NET_ONLY:-0}
NET_METHODS=${BENCH_NET_METHODS:-"rsync parallel-chunked fpsync prsync-j4 prsync-j8 prsync-default"}
NET_REPS=${BENCH_NET_REPS:-}
NET_BIG_CHUNK=${BENCH_NET_BIG_CHUNK:-}
NET_TREES=${BENCH_NET_TREES:-"big small"}
NET_STREAM=${BENCH_NET_STREAM:-400mbit}
NET_LINK=${BENCH_NET_LINK:-2gbit}
NET_MAXCONN=${BENCH_NET_MAXCONN:-0}
DROP=${BENCH_DROP_CACHES:-auto}
INSTALL=${BENCH_INSTALL:-auto}
PLOT=${BENCH_PLOT:-auto}
PUBLISH=${BENCH_PUBLISH:-0}
SMOKE=0

usage() {
	cat <<EOF
usage: bench/run.sh [options]

  --profile NAME     tree profile: tiny, small (default), many, big       [BENCH_PROFILE]
  --reps N           repetitions, interleaved (default 3)                  [BENCH_REPS]
  --seed N           tree seed (default 1)                                 [BENCH_SEED]
  --methods LIST     subset of: rsync cp tar parallel-perfile parallel-chunked
                     fpsync prsync-jN... prsync-sweep prsync-default
                     prsync-direct prsync-pipe prsync-auto prsync-base
                     (default: all, every method but those four)           [BENCH_METHODS]
  --jobs LIST        -j values of prsync-sweep (default "1 2 4 8"; any
                     positive numbers, e.g. "1 2 4 8 16 32")               [BENCH_JOBS]
  --out DIR          results directory (default /tmp/prsync-bench/run-...) [BENCH_OUT]
  --work DIR         trees and destinations (default /var/tmp/prsync-bench) [BENCH_WORK]
  --prsync PATH      prsync binary (default: built from the repo)          [PRSYNC]
  --base PATH        another prsync build (an older one), for the method
                     prsync-base: its defaults, side by side with the
                     build under test                                     [BENCH_PRSYNC_BASE]
  --prsync-opts STR  extra flags for every prsync method, shown in its
                     label (default none; e.g. "--chunk-files 50")         [BENCH_PRSYNC_OPTS]
  --smoke            tiny tree, 1 rep, rsync -a and prsync only; for CI
  --net              add the shaped-network scenario (root only)           [BENCH_NET=1]
  --net-only         run only the network scenario                         [BENCH_NET_ONLY=1]
  --net-methods LIST methods for the network scenario                      [BENCH_NET_METHODS]
  --net-reps N       repetitions for the network scenario (default --reps) [BENCH_NET_REPS]
  --net-trees LIST   trees for the network scenario (default "big small";
                     any profile, e.g. "tiny" to try it)                   [BENCH_NET_TREES]
  --net-stream RATE  tc ceiling per TCP stream (default 400mbit)           [BENCH_NET_STREAM]
  --net-link RATE    tc ceiling of the whole link (default 2gbit)          [BENCH_NET_LINK]
  --net-maxconn N    the daemon's max connections (default 0: unlimited)   [BENCH_NET_MAXCONN]
  --no-drop-caches   keep the page cache warm                              [BENCH_DROP_CACHES=0]
  --no-install       never apt-get install missing peers                   [BENCH_INSTALL=0]
  --plot / --no-plot write results.png (default: on, off with --smoke)     [BENCH_PLOT]
  --publish          copy results.csv, RESULTS.md and results.png into bench/
Other knobs: BENCH_CHUNK (2000), BENCH_PEER_JOBS (8), BENCH_PERFILE_FILES (500),
BENCH_SAMPLE (50), BENCH_NET_BIG_CHUNK (entries/8), BENCH_PRSYNC_SWEEP_OPTS ("--no-throttle", added to prsync -jN only).
RATE is in tc's units: 100mbit, 2gbit, 500kbit. Methods: prsync-default is prsync's
defaults (pipe transport, CPU throttle on); prsync-direct and prsync-pipe add
--transport direct and --transport pipe;
prsync-auto adds -j auto; only the -jN sweep gets BENCH_PRSYNC_SWEEP_OPTS.
See also bench/migrate.sh --help and bench/pull.sh --help.
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--profile) PROFILE=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--seed) SEED=$2; shift ;;
	--methods) METHODS=$2; shift ;;
	--jobs) JOBS_LIST=$2; shift ;;
	--out) OUT=$2; shift ;;
	--work) WORK=$2; shift ;;
	--prsync) PRSYNC=$2; shift ;;
	--base) PRSYNC_BASE=$2; shift ;;
	--prsync-opts) PRSYNC_OPTS=$2; shift ;;
	--smoke) SMOKE=1 ;;
	--net) NET=1 ;;
	--net-only) NET=1; NET_ONLY=1 ;;
	--net-methods) NET_METHODS=$2; shift ;;
	--net-reps) NET_REPS=$2; shift ;;
	--net-trees) NET_TREES=$2; shift ;;
	--net-stream) NET_STREAM=$2; shift ;;
	--net-link) NET_LINK=$2; shift ;;
	--net-maxconn) NET_MAXCONN=$2; shift ;;
	--no-drop-caches) DROP=0 ;;
	--no-install) INSTALL=0 ;;
	--plot) PLOT=1 ;;
	--no-plot) PLOT=0 ;;
	--publish) PUBLISH=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 1 ;;
	esac
	shift
done

if [ "$SMOKE" = 1 ]; then
	PROFILE=tiny REPS=1 METHODS="rsync prsync-default" NET=0 NET_ONLY=0
	[ "$PLOT" = auto ] && PLOT=0
fi
[ "$PLOT" = auto ] && PLOT=1
NET_REPS=${NET_REPS:-$REPS}
METHODS=${METHODS//,/ }
NET_METHODS=${NET_METHODS//,/ }

case "$REPS" in '' | *[!0-9]* | 0) die "--reps must be a positive integer" ;; esac
case "$PROFILE" in tiny | small | many | big) ;; *) die "unknown profile $PROFILE" ;; esac
for t in $NET_TREES; do
	case "$t" in tiny | small | many | big) ;; *) die "unknown network tree $t (tiny, small, many or big)" ;; esac
done
for r in "$NET_STREAM" "$NET_LINK"; do
	[[ "$r" =~ ^[0-9]+(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$ ]] || die "bad rate $r (tc units: 400mbit, 2gbit, 500kbit)"
done
for j in $JOBS_LIST; do
	case "$j" in '' | *[!0-9]* | 0) die "--jobs must list positive numbers, not $j" ;; esac
done
case "$NET_MAXCONN" in '' | *[!0-9]*) die "--net-maxconn must be a number (0: unlimited)" ;; esac

STAMP=$(date +%Y%m%d-%H%M%S)
OUT=${OUT:-/tmp/prsync-bench/run-$STAMP-$PROFILE}
OUT=$(realpath -m "$OUT")
WORK=$(realpath -m "$WORK")
for d in "$OUT" "$WORK"; do
	case "$d/" in "$REPO"/*) die "$d is inside the repository; use a directory under /tmp or /var/tmp" ;; esac
done
mkdir -p "$OUT/logs" "$WORK"
warn_fs "$WORK"

# ---------------------------------------------------------------- tools
BIN=$WORK/bin
mkdir -p "$BIN"
bench_build_tools "$BIN" "$OUT/logs" gentree measure report
[ -n "$PRSYNC" ] || say "run.sh: no prsync binary; prsync methods are skipped"

IS_ROOT=0
[ "$(id -u)" = 0 ] && IS_ROOT=1

# Peers. parallel and fpsync (package fpart) come from the distribution.
want_peer() { # method -> needed command
	case "$1" in
	parallel-*) echo parallel ;;
	fpsync) echo fpsync ;;
	esac
}
all_methods="$METHODS"
[ "$NET" = 1 ] && all_methods="$all_methods $NET_METHODS"
missing=()
for m in $all_methods; do
	c=$(want_peer "$m")
	[ -n "$c" ] && ! command -v "$c" >/dev/null && missing+=("$c")
done
if [ "${#missing[@]}" -gt 0 ] && [ "$IS_ROOT" = 1 ] && [ "$INSTALL" != 0 ] && command -v apt-get >/dev/null; then
	pkgs=()
	for c in $(printf '%s\n' "${missing[@]}" | sort -u); do
		case $c in parallel) pkgs+=(parallel) ;; fpsync) pkgs+=(fpart) ;; esac
	done
	say "== installing ${pkgs[*]} with apt-get"
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}"; } \
		>"$OUT/logs/apt.log" 2>&1 || say "run.sh: apt-get install ${pkgs[*]} failed (see $OUT/logs/apt.log)"
fi
# Expand "all" and check every method can run.
expand_methods() {
	local list=$1 out=() m j
	[ "$list" = all ] && list="rsync cp tar parallel-perfile parallel-chunked fpsync prsync-sweep prsync-default"
	for m in $list; do
		case "$m" in
		prsync-sweep) for j in $JOBS_LIST; do out+=("prsync-j$j"); done ;;
		rsync | cp | tar | parallel-perfile | parallel-chunked | fpsync | prsync-default | prsync-direct | prsync-pipe | prsync-auto | prsync-base) out+=("$m") ;;
		prsync-j*) [[ "$m" =~ ^prsync-j[1-9][0-9]*$ ]] || die "bad method $m (prsync-jN, N a positive number)"; out+=("$m") ;;
		*) die "unknown method $m" ;;
		esac
	done
	printf '%s\n' "${out[@]}"
}
SKIPPED=()
usable() { # method -> 0 if it can run here, else records why not
	local m=$1
	case "$m" in
	parallel-*) have parallel || { SKIPPED+=("$m: GNU parallel is not installed (apt-get install parallel)"); return 1; } ;;
	fpsync) have fpsync || { SKIPPED+=("$m: fpsync is not installed (apt-get install fpart)"); return 1; } ;;
	prsync-base) [ -x "$PRSYNC_BASE" ] || die "prsync-base needs --base PATH, an executable prsync" ;;
	prsync-*) [ -n "$PRSYNC" ] || { SKIPPED+=("$m: no prsync binary"); return 1; } ;;
	esac
	return 0
}
select_methods() {
	local m
	for m in $(expand_methods "$1"); do
		usable "$m" && echo "$m"
	done
	return 0
}
expand_methods "$METHODS" >/dev/null # dies here, in this shell, on an unknown name
[ "$NET" = 1 ] && expand_methods "$NET_METHODS" >/dev/null
mapfile -t LOCAL_METHODS < <(select_methods "$METHODS")
NET_METHODS_SEL=()
[ "$NET" = 1 ] && mapfile -t NET_METHODS_SEL < <(select_methods "$NET_METHODS")
# select_methods runs in a subshell: recompute the skip messages here.
SKIPPED=()
for m in $(expand_methods "$METHODS") $([ "$NET" = 1 ] && expand_methods "$NET_METHODS"); do usable "$m" || true; done
mapfile -t SKIPPED < <(printf '%s\n' "${SKIPPED[@]}" | sort -u | sed '/^$/d')
for s in "${SKIPPED[@]}"; do say "run.sh: skipping $s"; done
if [ "$SMOKE" = 1 ] && [ -z "$PRSYNC" ]; then die "--smoke needs a prsync binary"; fi

# ---------------------------------------------------------------- page cache
bench_drop_setup

# Trees: prepare_tree, tree_stats and verify are in lib.sh.

# ---------------------------------------------------------------- methods
# Each method is a function run by `measure -- bash -c NAME`, from SRC to DEST
# (a directory, or an rsync:// URL in the network scenario).
m_rsync() { rsync -a "$SRC"/ "$DEST"/; }
m_cp() { cp -a "$SRC"/. "$DEST"/; }
m_tar() { tar -C "$SRC" -cf - . | tar -C "$DEST" -xf -; }
m_parallel_perfile() { cd "$SRC" && parallel --will-cite -0 -j "$PJOBS" rsync -aR {} "$DEST"/ <"$META/subset.list0"; }
m_parallel_chunked() {
	cd "$SRC" && find . -print0 |
		parallel --will-cite -0 --pipe --recend '\0' -N "$CHUNK" -j "$PJOBS" rsync -a --from0 --files-from=- . "$DEST"/
}
m_fpsync() { fpsync -n "$PJOBS" -f "$CHUNK" -t "$FPTMP" "$SRC"/ "$DEST"/; }
m_prsync() {
	# shellcheck disable=SC2086 # PR_ARGS is a word list on purpose
	cd "$SRC" && find . -print0 | "$PRSYNC" -0 $PR_ARGS "$DEST" >"$PRLOG"
}
m_prsync_base() { PRSYNC=$PRSYNC_BASE m_prsync; }
export -f m_rsync m_cp m_tar m_parallel_perfile m_parallel_chunked m_fpsync m_prsync m_prsync_base
export PJOBS CHUNK PRSYNC PRSYNC_BASE

# label_of METHOD SCENARIO (a CSV field: no commas)
label_of() {
	local l
	l=$(label_base "$@")
	# prsync's extra options go right after "prsync -0"; a CSV field has no comma.
	[ -z "$PRSYNC_OPTS" ] || case "$1" in prsync-*) l=${l/prsync -0/prsync -0 $PRSYNC_OPTS} ;; esac
	echo "${l//,/;}"
}
label_base() {
	case "$1" in
	rsync) echo "rsync -a" ;;
	cp) echo "cp -a" ;;
	tar) echo "tar -c | tar -x" ;;
	parallel-perfile) echo "parallel -j $PJOBS rsync -aR {} (one rsync per file)" ;;
	parallel-chunked) echo "find -print0 | parallel -0 --pipe -N $CHUNK -j $PJOBS rsync --files-from=-" ;;
	fpsync) echo "fpsync -n $PJOBS -f $CHUNK" ;;
	prsync-default)
		if [ "${2:-local}" = local ]; then echo "find -print0 | prsync -0 (defaults: pipe transport; throttle on)"
		else echo "find -print0 | prsync -0 (defaults; throttle on)"; fi ;;
	prsync-direct) echo "find -print0 | prsync -0 --transport direct (otherwise defaults)" ;;
	prsync-pipe) echo "find -print0 | prsync -0 --transport pipe (otherwise defaults)" ;;
	prsync-auto) echo "find -print0 | prsync -0 -j auto (otherwise defaults; throttle on)" ;;
	prsync-base) echo "find -print0 | prsync -0 (defaults; the base build)" ;;
	prsync-j*) echo "find -print0 | prsync -0 -j ${1#prsync-j} $PRSYNC_SWEEP_OPTS" | sed 's/ *$//' ;;
	esac
}
has_rerun() { case "$1" in cp | tar | parallel-perfile) return 1 ;; esac; return 0; }

RESULTS=$OUT/results.csv
echo "profile,scenario,method,label,case,rep,jobs,extrapolated,scale,wall_s,user_s,sys_s,maxrss_kb,exit,verify,files,bytes,server_cpu_s" >"$RESULTS"
FAILURES=0
NS_A='' NS_B='' NET_DAEMON_PID=''

# run_one SCENARIO METHOD CASE REP TREEPROFILE
run_one() {
	local sc=$1 m=$2 kase=$3 rep=$4 prof=$5 fn jobs=1 extrap=0 scale=1 tag res v files bytes srv0=0 srv1=0 srv=
	local -a wrap=()
	tag="$sc-$m-$kase-$rep"
	res=$OUT/logs/$tag.time
	export PRLOG=$OUT/logs/$tag.jsonl FPTMP=$WORK/fpsync-tmp PR_ARGS=
	fn=m_${m//-/_}
	case "$m" in
	parallel-perfile) jobs=$PJOBS extrap=1 ;;
	parallel-chunked | fpsync) jobs=$PJOBS ;;
	prsync-default) fn=m_prsync jobs=0 ;;
	prsync-direct) fn=m_prsync jobs=0 PR_ARGS="--transport direct" ;;
	prsync-pipe) fn=m_prsync jobs=0 PR_ARGS="--transport pipe" ;;
	prsync-auto) fn=m_prsync jobs=0 PR_ARGS="-j auto" ;;
	prsync-base) fn=m_prsync_base jobs=0 ;;
	prsync-j*) fn=m_prsync jobs=${m#prsync-j} PR_ARGS="-j $jobs $PRSYNC_SWEEP_OPTS" ;;
	esac
	[[ "$m" != prsync-* ]] || PR_ARGS="$PRSYNC_OPTS $PR_ARGS"
	if [ "$sc" = local ]; then
		export DEST=$WORK/dst
		DSTDIR=$WORK/dst
	else
		export DEST=rsync://10.200.0.2/bench
		DSTDIR=$WORK/net-dst
		wrap=(ip netns exec "$NS_A")
	fi
	if [ "$kase" = fresh ]; then
		rm -rf "$DSTDIR"
		mkdir -p "$DSTDIR"
	fi
	rm -rf "$FPTMP"
	drop_caches
	[ "$sc" = local ] || srv0=$(proc_cpu "$NET_DAEMON_PID")
	"$MEASURE" -o "$res" -- "${wrap[@]}" bash -c "$fn" >"$OUT/logs/$tag.out" 2>"$OUT/logs/$tag.err" || true
	if [ "$sc" != local ]; then
		# The daemon's CPU: its sessions' CPU reaches its cutime/cstime once
		# it has reaped them, right after the client exits.
		sleep 0.3
		srv1=$(proc_cpu "$NET_DAEMON_PID")
		srv=$(awk -v a="$srv0" -v b="$srv1" 'BEGIN{printf "%.3f", b-a}')
	fi
	rm -rf "$FPTMP"
	read -r wall user sys rss code <"$res" || { wall=0 user=0 sys=0 rss=0 code=127; }
	if [ "$m" = parallel-perfile ]; then
		v=$(verify "$DSTDIR" subset)
		scale=$(awk -v a="$SRC_FILES" -v b="$SUB_FILES" 'BEGIN{printf "%.4f", a/b}')
		read -r wall user sys < <(awk -v s="$scale" -v w="$wall" -v u="$user" -v y="$sys" 'BEGIN{printf "%.3f %.3f %.3f\n", w*s, u*s, y*s}')
	else
		v=$(verify "$DSTDIR")
	fi
	if [[ "$m" == prsync-* ]] && [ -s "$PRLOG" ]; then
		jobs=$(sed -n 's/.*"type": *"start".*"jobs": *\([0-9][0-9]*\).*/\1/p' "$PRLOG" | head -n1)
		jobs=${jobs:-0}
		record_prsync_summary "$OUT" "$sc" "$m" "$kase" "$rep" "$PRLOG"
	fi
	if [ "$code" != 0 ] || [ "$v" != ok ]; then
		FAILURES=$((FAILURES + 1))
		say "   !! $tag: exit $code, verify: $v (logs: $OUT/logs/$tag.err)"
	fi
	files=$SRC_FILES bytes=$SRC_BYTES
	echo "$PROFILE_OF_SC,$sc,$m,$(label_of "$m" "$sc"),$kase,$rep,$jobs,$extrap,$scale,$wall,$user,$sys,$rss,$code,$v,$files,$bytes,$srv" >>"$RESULTS"
	local extra=""
	[ "$extrap" = 1 ] && extra=" (extrapolated from $SUB_FILES files, x$scale)"
	say "$(printf '   [%s %d] %-17s %-6s %8.2f s  cpu %6.2f s  %s%s' "$sc" "$rep" "$m" "$kase" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" "$v" "$extra")"
}

# run_scenario SCENARIO PROFILE REPS METHOD...
run_scenario() {
	local sc=$1 prof=$2 reps=$3 rep i n m
	shift 3
	local -a ms=("$@")
	n=${#ms[@]}
	[ "$n" -gt 0 ] || return 0
	prepare_tree "$prof"
	PROFILE_OF_SC=$prof
	local chunk_saved=$CHUNK
	if [ "$sc" = net-big ]; then
		# 2000 entries per chunk would put the whole 160-file tree in one
		# chunk, one TCP stream. Give the peers one chunk per job instead.
		CHUNK=${NET_BIG_CHUNK:-$(((SRC_FILES + SRC_DIRS + PJOBS - 1) / PJOBS))}
		say "   peers use chunks of $CHUNK entries here (BENCH_NET_BIG_CHUNK)"
	fi
	say "== scenario $sc: tree $prof ($SRC_FILES files, $SRC_DIRS dirs, $SRC_BYTES bytes), $reps rep(s), methods: ${ms[*]}"
	for ((rep = 1; rep <= reps; rep++)); do
		# Rotate the order each repetition so no method always runs first.
		for ((i = 0; i < n; i++)); do
			m=${ms[$(((i + rep - 1) % n))]}
			run_one "$sc" "$m" fresh "$rep" "$prof"
			if [ "$sc" = local ] && has_rerun "$m"; then
				run_one "$sc" "$m" rerun "$rep" "$prof"
			fi
		done
	done
	CHUNK=$chunk_saved
	rm -rf "$WORK/dst" "$WORK/net-dst"
}

# ---------------------------------------------------------------- network
# net_setup, net_teardown and tc_bits are in lib.sh.
cleanup() {
	net_teardown
	rm -rf "$WORK/dst" "$WORK/net-dst" "$WORK/fpsync-tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# machine_info is in lib.sh.

# ---------------------------------------------------------------- main
say "== results in $OUT, trees and destinations in $WORK"
TREE_DESC=
if [ "$NET_ONLY" != 1 ] && [ "${#LOCAL_METHODS[@]}" -gt 0 ]; then
	prepare_tree "$PROFILE"
	TREE_DESC="profile $PROFILE, seed $SEED: $SRC_FILES files in $SRC_DIRS directories, $(awk -v b="$SRC_BYTES" 'BEGIN{if (b >= 1e9) printf "%.2f GB", b/1e9; else printf "%.1f MB", b/1e6}')"
	run_scenario local "$PROFILE" "$REPS" "${LOCAL_METHODS[@]}"
fi
if [ "$NET" = 1 ] && [ "${#NET_METHODS_SEL[@]}" -gt 0 ]; then
	if [ "$IS_ROOT" != 1 ] || ! have ip || ! have tc; then
		say "run.sh: skipping the network scenario: it needs root, ip and tc"
		SKIPPED+=("network scenario: needs root, ip and tc")
	elif ! net_setup; then
		say "run.sh: network setup failed; skipping the network scenario"
		SKIPPED+=("network scenario: setup failed")
		net_teardown
	else
		NET_RAN=1
		for t in $NET_TREES; do
			run_scenario "net-$t" "$t" "$NET_REPS" "${NET_METHODS_SEL[@]}"
		done
		net_teardown
	fi
fi
[ -n "$TREE_DESC" ] || TREE_DESC="see the scenarios below"

{
	machine_info "$TREE_DESC"
	if [ "${NET_RAN:-0}" = 1 ]; then
		echo "net stream cap: $NET_STREAM"
		echo "net link cap: $NET_LINK"
		echo "net max connections: $NET_MAXCONN"
	fi
} >"$OUT/machine.txt"
if [ "$(wc -l <"$RESULTS")" -le 1 ]; then die "nothing was measured"; fi
"$BIN/report" -in "$RESULTS" -machine "$OUT/machine.txt" -summary "$OUT/summary.csv" -md "$OUT/RESULTS.md" \
	-prsync-summaries "$OUT/prsync-summaries.jsonl"
if [ "${#SKIPPED[@]}" -gt 0 ]; then
	{ echo; echo "Skipped:"; printf -- '- %s\n' "${SKIPPED[@]}"; } | tee -a "$OUT/RESULTS.md"
fi
if [ "$PLOT" = 1 ]; then
	if (cd "$BENCH_DIR" && go build -o "$BIN/" ./cmd/plot ./cmd/plotjobs) &&
		"$BIN/plot" -in "$RESULTS" -machine "$OUT/machine.txt" -out "$OUT/results.png"; then
		say "== plot: $OUT/results.png"
	else
		say "run.sh: the plot failed"
	fi
	# Concurrency over time (the -j limit and the running rsyncs) of the
	# prsync-auto and prsync-default runs: one PNG per scenario.
	if ls "$OUT"/logs/*-prsync-auto-*.jsonl "$OUT"/logs/*-prsync-default-*.jsonl >/dev/null 2>&1; then
		if [ -x "$BIN/plotjobs" ] && "$BIN/plotjobs" -logs "$OUT/logs" -machine "$OUT/machine.txt" -out "$OUT/jobs"; then
			say "== concurrency plots: $(cd "$OUT" && ls jobs-*.png 2>/dev/null | tr '\n' ' ')"
		else
			say "run.sh: the concurrency plot failed"
		fi
	fi
fi
if [ "$PUBLISH" = 1 ]; then
	cp "$RESULTS" "$OUT/RESULTS.md" "$BENCH_DIR/"
	[ -f "$OUT/results.png" ] && cp "$OUT/results.png" "$BENCH_DIR/"
	say "== copied results.csv, RESULTS.md and results.png into $BENCH_DIR"
fi
# The seven scenarios of issue 23 (scenarios.sh), tiny: a daemon with max
# connections, a pull, and the sshfs mount when sshd, sshfs and FUSE exist.
if [ "$SMOKE" = 1 ] && [ "${BENCH_SMOKE_SCENARIOS:-1}" != 0 ]; then
	if ! BENCH_INSTALL=0 bash "$BENCH_DIR/scenarios.sh" --smoke --prsync "$PRSYNC" --work "$WORK" --out "$OUT/scenarios"; then
		FAILURES=$((FAILURES + 1))
		say "run.sh: the scenarios smoke failed (see $OUT/scenarios)"
	fi
fi
say "== done: $OUT"
if [ "$FAILURES" -gt 0 ]; then
	say "run.sh: $FAILURES run(s) failed or did not verify"
	exit 1
fi
